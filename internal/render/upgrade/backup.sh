# The backup before a change of Slurm release: a dump of the accounting database and a copy of
# slurmctld's StateSaveLocation, written to $BACKUP/$CLUSTER/<time>-slurm-$FROM-to-$TO. It writes
# into a ".partial" folder and renames it at the end, so a finished backup is always whole.
#   DBD_CONF  slurmdbd.conf (the database's host, port, user, password and name); unset: no
#             accounting, no dump
#   STATE     StateSaveLocation as mounted here (read-only); unset: no state to copy
set -eu
say() { echo "upgrade-backup: $*"; }
fail() { say "error: $*" >&2; exit 1; }

[ -d "$BACKUP" ] || fail "the backup volume is not mounted at $BACKUP"
dest=$BACKUP/$CLUSTER/$(date -u +%Y%m%dT%H%M%SZ)-slurm-$FROM-to-$TO
mkdir -p "$dest.partial" || fail "cannot write to the backup volume ($BACKUP): an NFS export that squashes root refuses this Job, which writes as root"

if [ -n "${DBD_CONF:-}" ]; then
	# The last value of a key in slurmdbd.conf, as slurmdbd reads it.
	conf() { sed -n "s/^[[:space:]]*$1[[:space:]]*=[[:space:]]*//p" "$DBD_CONF" | tail -n 1; }
	host=$(conf StorageHost) port=$(conf StoragePort) user=$(conf StorageUser) db=$(conf StorageLoc)
	[ -n "$host" ] && [ -n "$db" ] || fail "$DBD_CONF names no StorageHost or StorageLoc"
	say "dumping database $db from $host:${port:-3306}"
	# --single-transaction: one consistent snapshot of InnoDB tables while slurmdbd writes.
	MYSQL_PWD=$(conf StoragePass) mariadb-dump --single-transaction --routines --triggers \
		--host="$host" --port="${port:-3306}" --user="${user:-slurm}" "$db" >"$dest.partial/accounting.sql" ||
		fail "mariadb-dump of $db on $host failed"
	tail -n 1 "$dest.partial/accounting.sql" | grep -q '^-- Dump completed' || fail "the dump of $db is incomplete"
fi

if [ -n "${STATE:-}" ]; then
	[ -f "$STATE/job_state" ] || [ -f "$STATE/node_state" ] ||
		fail "$STATE holds no slurmctld state (no job_state, no node_state): not the controller's spool?"
	say "copying $STATE"
	# slurmctld replaces each state file by a rename, so every file copied is whole.
	cp -a "$STATE" "$dest.partial/statesave" || fail "copying $STATE failed"
fi

(cd "$dest.partial" && find . -type f ! -name SHA256SUMS -exec sha256sum {} + >SHA256SUMS)
mv "$dest.partial" "$dest"
say "backup written to $dest ($(du -sh "$dest" | cut -f1))"
