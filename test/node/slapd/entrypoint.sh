#!/bin/sh
# Writes /etc/ldap/slapd.conf for the suffix LDAP_BASE (rootdn cn=admin,$LDAP_BASE with password
# LDAP_ADMIN_PASSWORD), loads /etc/slapd-seed/*.ldif in name order into an empty database, then
# runs slapd in the foreground ("-d none": no detaching; only start, stop and errors go to stderr).
# Entries are readable only after a bind; anonymous may only bind and read the root DSE.
# With /etc/slapd-tls/tls.crt and tls.key present it also serves ldaps:// and StartTLS.
# The node test's directory server; not a product image.
set -eu
: "${LDAP_BASE:?LDAP_BASE must be set, e.g. dc=example,dc=org}"
: "${LDAP_ADMIN_PASSWORD:?LDAP_ADMIN_PASSWORD must be set}"
conf=/etc/ldap/slapd.conf
data=/var/lib/ldap
run=/run/slapd
install -d -o openldap -g openldap -m 0755 "$run"
install -d -o openldap -g openldap -m 0700 "$data"

urls="ldap:///"
tls=""
if [ -f /etc/slapd-tls/tls.crt ] && [ -f /etc/slapd-tls/tls.key ]; then
  # slapd reads its configuration after dropping to openldap, so give it its own copies.
  install -d -o root -g openldap -m 0750 "$run/tls"
  install -o openldap -g openldap -m 0644 /etc/slapd-tls/tls.crt "$run/tls/tls.crt"
  install -o openldap -g openldap -m 0600 /etc/slapd-tls/tls.key "$run/tls/tls.key"
  tls="TLSCertificateFile $run/tls/tls.crt
TLSCertificateKeyFile $run/tls/tls.key"
  urls="ldap:/// ldaps:///"
fi

rootpw=$(slappasswd -s "$LDAP_ADMIN_PASSWORD")
umask 027
cat >"$conf" <<CONF
include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/nis.schema
include /etc/ldap/schema/inetorgperson.schema
include /etc/ldap/schema/openssh-lpk.schema
pidfile $run/slapd.pid
argsfile $run/slapd.args
modulepath /usr/lib/ldap
moduleload back_mdb
$tls

access to dn.base=""
  by * read
access to dn.base="cn=Subschema"
  by * read
access to attrs=userPassword
  by self write
  by anonymous auth
  by * none
access to *
  by users read
  by anonymous auth
  by * none

database mdb
maxsize 104857600
suffix "$LDAP_BASE"
rootdn "cn=admin,$LDAP_BASE"
rootpw $rootpw
directory $data
index objectClass,uid,uidNumber,gidNumber,memberUid eq
CONF
umask 022
chown root:openldap "$conf"

if [ ! -e "$data/data.mdb" ]; then
  for ldif in /etc/slapd-seed/*.ldif; do
    [ -f "$ldif" ] || continue
    slapadd -f "$conf" -l "$ldif"
  done
  chown -R openldap:openldap "$data"
fi

exec slapd -d none -h "$urls" -f "$conf" -u openldap -g openldap
