package node

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"time"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
)

// The node test's directory (test/node/slapd): an LDAP server in the cluster's namespace over
// TLS, whose entries only a bound reader may see, with two users: dana, in the group hpc, with
// her SSH key in the directory, and erin, in no group of note and with no key.
const (
	directoryBase       = "dc=example,dc=org"
	directoryReader     = "cn=reader," + directoryBase
	directoryReaderPass = "reader-secret-1"
	directorySecret     = "sssd-config"
	// directoryHost is the Service's name in the certificate and in sssd.conf.
	directoryHost = "slapd." + ns + ".svc.cluster.local"
)

// directory is what the identity steps need of the directory: dana's private key, and the key
// of the directory's own "alice", who shares her name with the jail's local user (contents: the
// step that made the directory and its temporary folder are gone by then).
type directory struct {
	danaKey, aliceKey []byte
}

// directoryUsers are the directory's entries (slapadd's LDIF) with dana's public key, and an
// entry named alice, as the jail's local user (made with adduser in an earlier step), with a key
// of its own.
func directoryUsers(danaPub, alicePub string) string {
	return `dn: ` + directoryBase + `
objectClass: dcObject
objectClass: organization
o: example
dc: example

dn: ou=people,` + directoryBase + `
objectClass: organizationalUnit
ou: people

dn: ou=groups,` + directoryBase + `
objectClass: organizationalUnit
ou: groups

dn: ` + directoryReader + `
objectClass: organizationalRole
objectClass: simpleSecurityObject
cn: reader
userPassword: ` + directoryReaderPass + `

dn: uid=dana,ou=people,` + directoryBase + `
objectClass: inetOrgPerson
objectClass: posixAccount
objectClass: ldapPublicKey
uid: dana
cn: Dana
sn: Dana
uidNumber: 20001
gidNumber: 20001
homeDirectory: /home/dana
loginShell: /bin/bash
sshPublicKey: ` + danaPub + `

dn: uid=erin,ou=people,` + directoryBase + `
objectClass: inetOrgPerson
objectClass: posixAccount
uid: erin
cn: Erin
sn: Erin
uidNumber: 20002
gidNumber: 20002
homeDirectory: /home/erin
loginShell: /bin/bash

dn: uid=alice,ou=people,` + directoryBase + `
objectClass: inetOrgPerson
objectClass: posixAccount
objectClass: ldapPublicKey
uid: alice
cn: Alice of the directory
sn: Alice
uidNumber: 20003
gidNumber: 20001
homeDirectory: /home/alice
loginShell: /bin/bash
sshPublicKey: ` + alicePub + `

dn: cn=dana,ou=groups,` + directoryBase + `
objectClass: posixGroup
cn: dana
gidNumber: 20001

dn: cn=erin,ou=groups,` + directoryBase + `
objectClass: posixGroup
cn: erin
gidNumber: 20002

dn: cn=hpc,ou=groups,` + directoryBase + `
objectClass: posixGroup
cn: hpc
gidNumber: 20100
memberUid: dana
`
}

// sssdConfig is the admin's sssd.conf for the directory: LDAP over TLS with the CA from the
// same Secret, a bind as the reader, and users' keys from sshPublicKey.
const sssdConfig = `[sssd]
services = nss, pam, ssh
domains = directory

[domain/directory]
id_provider = ldap
auth_provider = ldap
sudo_provider = none
ldap_uri = ldaps://` + directoryHost + `
ldap_search_base = ` + directoryBase + `
ldap_schema = rfc2307
ldap_default_bind_dn = ` + directoryReader + `
ldap_default_authtok_type = password
ldap_default_authtok = ` + directoryReaderPass + `
ldap_tls_cacert = /etc/sssd/secret/ca.crt
ldap_tls_reqcert = demand
ldap_user_ssh_public_key = sshPublicKey
cache_credentials = false
`

// startDirectory runs the directory server in the namespace and makes the admin's SSSD Secret,
// labelled for SlurmClusters to read. The cluster does not use it until spec.identity names it.
func (e *env) startDirectory() *directory {
	t := e.t
	caPEM, certPEM, keyPEM := directoryCerts(t.Fatalf)
	danaKey := filepath.Join(t.TempDir(), "dana")
	danaPub := writeKey(t, danaKey)
	aliceKey := filepath.Join(t.TempDir(), "alice-of-the-directory")
	alicePub := writeKey(t, aliceKey)
	labels := map[string]string{"app": "slapd"}
	items := []map[string]any{
		{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "slapd-tls", "namespace": ns},
			"stringData": map[string]string{"tls.crt": string(certPEM), "tls.key": string(keyPEM)}},
		{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "slapd-seed", "namespace": ns},
			"data": map[string]string{"10-directory.ldif": directoryUsers(danaPub, alicePub)}},
		{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "slapd", "namespace": ns},
			"spec": map[string]any{
				"replicas": 1,
				"selector": map[string]any{"matchLabels": labels},
				"template": map[string]any{
					"metadata": map[string]any{"labels": labels},
					"spec": map[string]any{
						"containers": []map[string]any{{
							"name": "slapd", "image": "docker.io/slurm-k8s-test/slapd:2.6", "imagePullPolicy": "Never",
							"env": []map[string]string{{"name": "LDAP_BASE", "value": directoryBase},
								{"name": "LDAP_ADMIN_PASSWORD", "value": "admin-secret-1"}},
							"ports":          []map[string]any{{"name": "ldaps", "containerPort": 636}},
							"readinessProbe": map[string]any{"tcpSocket": map[string]any{"port": 636}, "periodSeconds": 1},
							"resources":      map[string]any{"requests": map[string]string{"cpu": "10m", "memory": "32Mi"}},
							"volumeMounts": []map[string]any{{"name": "tls", "mountPath": "/etc/slapd-tls", "readOnly": true},
								{"name": "seed", "mountPath": "/etc/slapd-seed", "readOnly": true}},
						}},
						"volumes": []map[string]any{{"name": "tls", "secret": map[string]any{"secretName": "slapd-tls"}},
							{"name": "seed", "configMap": map[string]any{"name": "slapd-seed"}}},
					},
				},
			}},
		{"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": "slapd", "namespace": ns},
			"spec": map[string]any{"selector": labels, "ports": []map[string]any{{"name": "ldaps", "port": 636, "targetPort": "ldaps"}}}},
		{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": directorySecret, "namespace": ns,
			"labels": map[string]string{slurmv1alpha1.LabelAllowReference: "true"}},
			"stringData": map[string]string{"sssd.conf": sssdConfig, "ca.crt": string(caPEM)}},
	}
	manifest, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	if err != nil {
		t.Fatal(err)
	}
	e.sh(string(manifest), filepath.Join(e.assets, "kubectl"), "apply", "-f", "-")
	e.kubectlOK("rollout", "status", "deployment/slapd", "-n", ns, "--timeout=2m")
	d := &directory{}
	if d.danaKey, err = os.ReadFile(danaKey); err != nil {
		t.Fatal(err)
	}
	if d.aliceKey, err = os.ReadFile(aliceKey); err != nil {
		t.Fatal(err)
	}
	return d
}

// directoryCerts makes a CA and the directory server's certificate for directoryHost.
func directoryCerts(fatalf func(string, ...any)) (caPEM, certPEM, keyPEM []byte) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		fatalf("CA key: %v", err)
	}
	now := time.Now()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "node test directory CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		fatalf("CA certificate: %v", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		fatalf("server key: %v", err)
	}
	srv := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: directoryHost},
		DNSNames: []string{directoryHost, "slapd." + ns + ".svc", "slapd"}, NotBefore: now.Add(-time.Hour),
		NotAfter: now.Add(24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		fatalf("CA certificate: %v", err)
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srv, caCert, &key.PublicKey, caKey)
	if err != nil {
		fatalf("server certificate: %v", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		fatalf("server key: %v", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srvDER}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
}

// identityPatch is the part of a SlurmCluster patch that turns the directory on.
const identityPatch = `"identity":{"sssd":{"configSecretName":"` + directorySecret + `"}}`

// checkDirectoryUsers: with spec.identity on, every pod that resolves users runs SSSD, and the
// directory's users are the cluster's: dana logs in with the key the directory holds, gets a
// home made at first login, runs srun -N2 as herself with her directory groups, and a
// partition with AllowGroups=hpc (slurmctld resolving the group) runs her job and holds erin's;
// sacct names her. The jail's own users (root, alice) keep working.
func (e *env) checkDirectoryUsers(d *directory) {
	t := e.t
	danaKey := filepath.Join(t.TempDir(), "dana")
	if err := os.WriteFile(danaKey, d.danaKey, 0o600); err != nil {
		t.Fatal(err)
	}
	e.waitSSSDInEveryPod()

	// The jail's view on a login node: dana and her groups from the directory, root and alice
	// from the jail's files.
	out := e.onLogin("id dana; id -un alice; getent group hpc")
	if want := "uid=20001(dana) gid=20001(dana) groups=20001(dana),20100(hpc)\nalice\nhpc:*:20100:dana"; strings.TrimSpace(out) != want {
		t.Fatalf("a login node's view of the directory:\n%s\nwant:\n%s", out, want)
	}

	// dana logs in with the key the directory holds: no authorized_keys file of hers exists.
	out, err := e.sshAs(danaKey, "dana@"+e.login, `id -un; echo "$HOME $(stat -c '%U %a' "$HOME")"; ls -A ~/.ssh 2>/dev/null | wc -l
srun -N2 sh -c 'echo "$(id -un) $(hostname) $(id -Gn)"' | sort`)
	want := "dana\n/home/dana dana 700\n0\ndana " + cluster + "-worker-0 dana hpc\ndana " + cluster + "-worker-1 dana hpc"
	if err != nil || strings.TrimSpace(out) != want {
		t.Fatalf("dana's session and job: %v\n%s\nwant:\n%s", err, out, want)
	}

	// An ordinary user's view, from her own shell: the jail's alice sees dana and her group
	// (SSSD's sockets and cache are open to every user, as on any SSSD host), and herself as the
	// jail's alice, not the directory's entry of that name.
	out = e.onLogin(`su - alice -c 'id dana; stat -c %U /home/dana; id -u'`)
	if want := "uid=20001(dana) gid=20001(dana) groups=20001(dana),20100(hpc)\ndana\n1000"; strings.TrimSpace(out) != want {
		t.Errorf("alice's view of the directory's users:\n%s\nwant:\n%s", out, want)
	}
	// The directory's alice may not log in as the jail's alice with the directory's key: the keys
	// command asks SSSD only for users the jail's files do not know.
	aliceKey := filepath.Join(t.TempDir(), "alice-of-the-directory")
	if err := os.WriteFile(aliceKey, d.aliceKey, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := e.sshAs(aliceKey, "alice@"+e.login, "id"); err == nil {
		t.Errorf("the directory's key for alice logged in to the jail's alice:\n%s", out)
	}

	// A partition for the group hpc: slurmctld resolves its members through its SSSD.
	e.kubectlOK("patch", "slurmcluster", cluster, "-n", ns, "--type=json", "-p",
		`[{"op":"add","path":"/spec/slurmConfig/partitions/-","value":{"name":"hpc","options":"AllowGroups=hpc"}}]`)
	defer e.kubectlOK("patch", "slurmcluster", cluster, "-n", ns, "--type=json", "-p",
		`[{"op":"test","path":"/spec/slurmConfig/partitions/1/name","value":"hpc"},{"op":"remove","path":"/spec/slurmConfig/partitions/1"}]`)
	e.waitFor(2*time.Minute, "partition hpc in slurmctld", func() (bool, string) {
		out, _ := e.sshErr(e.login, "scontrol show partition hpc | grep -o 'AllowGroups=[^ ]*'")
		return strings.TrimSpace(out) == "AllowGroups=hpc", out
	})
	out, err = e.sshAs(danaKey, "dana@"+e.login, "srun -p hpc -N2 id -un | sort -u; sacct -X -n -P -o User,Partition,State | grep '|hpc|' | tail -1")
	if err != nil || !strings.HasPrefix(out, "dana\n") {
		t.Fatalf("dana, in group hpc: srun -p hpc: %v\n%s", err, out)
	}
	e.waitFor(time.Minute, "dana's hpc job in sacct under her name", func() (bool, string) {
		out, _ := e.sshAs(danaKey, "dana@"+e.login, "sacct -X -n -P -o User,Partition,State -S now-10minutes | grep '|hpc|' | tail -1")
		return strings.TrimSpace(out) == "dana|hpc|COMPLETED", out
	})
	// erin's job is taken (EnforcePartLimits is Slurm's default, NO) but never starts: slurmctld
	// finds her outside the partition's groups when it schedules.
	erinJob := strings.TrimSpace(e.onLogin(`su -s /bin/sh erin -c 'cd /; sbatch --parsable -p hpc --wrap true'`))
	defer e.onLogin("scancel " + erinJob)
	e.waitFor(time.Minute, "erin's job "+erinJob+" held back as outside the partition's groups", func() (bool, string) {
		out, _ := e.sshErr(e.login, "scontrol show job "+erinJob+" | grep -o 'JobState=[A-Z]*\\|Reason=.*'")
		// scontrol writes the reason's spaces as underscores.
		return strings.Contains(out, "JobState=PENDING") && strings.Contains(out, "not_in_group_permitted_to_use_this_partition_(hpc)"), out
	})
	if out := e.onLogin("scontrol show job " + erinJob + " | grep -o 'JobState=[A-Z]*'"); strings.TrimSpace(out) != "JobState=PENDING" {
		t.Fatalf("erin's job in partition hpc: %s", out)
	}
	// erin has no key in the directory and no authorized_keys: she cannot log in.
	if out, err := e.sshAs(danaKey, "erin@"+e.login, "id -un"); err == nil {
		t.Fatalf("erin logged in with dana's key:\n%s", out)
	}
	// slurmctld's own view: the same user and group from its SSSD.
	out = e.kubectlOK("exec", "-n", ns, cluster+"-controller-0", "-c", "slurmctld", "--", "sh", "-c", "id dana; getent passwd alice | cut -d: -f1")
	if want := "uid=20001(dana) gid=20001(dana) groups=20001(dana),20100(hpc)\nalice"; strings.TrimSpace(out) != want {
		t.Errorf("slurmctld's container's view of users:\n%s\nwant:\n%s", out, want)
	}
}

// waitSSSDInEveryPod waits until the controller, login and worker pods all run SSSD (the roll
// that spec.identity starts is over) and both workers are idle. A pod's Slurm containers start only
// once its SSSD sidecar answers (its startup probe), so their readiness stands for both.
func (e *env) waitSSSDInEveryPod() {
	e.waitFor(5*time.Minute, "the controller, login and worker pods running SSSD, both workers idle", func() (bool, string) {
		out, _ := e.kubectl("get", "pods", "-n", ns, "-l", "app.kubernetes.io/component in (controller,login,worker)", "-o",
			`jsonpath={range .items[*]}{.metadata.name}:{.metadata.deletionTimestamp}:{.spec.initContainers[*].name}:{.status.containerStatuses[*].ready}{"\n"}{end}`)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		nodes, _ := e.sshErr(e.login, "sinfo -h -N -o '%N %t' | sort -u")
		for _, l := range lines {
			if !strings.Contains(l, "sssd") || strings.Contains(l, "false") || !strings.Contains(l, "::") {
				return false, out + nodes
			}
		}
		return len(lines) == 5 && strings.TrimSpace(nodes) == "worker-0 idle\nworker-1 idle", out + nodes
	})
}
