#!/bin/sh
# Initializes the data directory once, then runs mariadbd with the database and user named by
# MARIADB_DATABASE, MARIADB_USER and MARIADB_PASSWORD (created if missing on every start).
set -eu
data=/var/lib/mysql
install -d -o mysql -g mysql -m 0755 /run/mysqld
chown mysql:mysql "$data"
if [ ! -d "$data/mysql" ]; then
  mariadb-install-db --user=mysql --datadir="$data" --skip-test-db >/dev/null
fi
init=/run/mysqld/init.sql
cat >"$init" <<SQL
CREATE DATABASE IF NOT EXISTS \`$MARIADB_DATABASE\`;
CREATE USER IF NOT EXISTS '$MARIADB_USER'@'%' IDENTIFIED BY '$MARIADB_PASSWORD';
GRANT ALL ON \`$MARIADB_DATABASE\`.* TO '$MARIADB_USER'@'%';
SQL
chown mysql "$init"
exec mariadbd --user=mysql --datadir="$data" --bind-address=0.0.0.0 --skip-name-resolve --init-file="$init"
