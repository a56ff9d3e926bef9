# A backup of the accounting database (a dump) and of slurmctld's StateSaveLocation (a copy),
# written to $BACKUP/$CLUSTER/<time>-$NAME: before a change of Slurm release (NAME unset:
# slurm-$FROM-to-$TO) or on a schedule (NAME=scheduled). It writes into a ".partial" folder and
# renames it at the end, so a finished backup is always whole.
#   DBD_CONF  slurmdbd.conf (the database's host, port, user, password and name); unset: no
#             accounting, no dump
#   STATE     StateSaveLocation as mounted here (read-only); unset: no state to copy
#   KEEP      after a whole backup, keep only the KEEP newest whole backups of this NAME and
#             delete the older ones and this NAME's unfinished ones; unset: delete nothing
set -eu
# Root's alone: the dump holds every user's job records, the state their queued jobs' scripts and
# environments, and the backup volume may be one users can reach.
umask 077
say() { echo "backup: $*"; }
fail() { say "error: $*" >&2; exit 1; }

case ${KEEP:-1} in *[!0-9]* | 0) fail "KEEP is $KEEP, not a number above 0" ;; esac
[ -d "$BACKUP" ] || fail "the backup volume is not mounted at $BACKUP"
NAME=${NAME:-slurm-$FROM-to-$TO}
# Named by the second: a backup of the same name begun the same second waits for the next.
while dest=$BACKUP/$CLUSTER/$(date -u +%Y%m%dT%H%M%SZ)-$NAME && { [ -e "$dest" ] || [ -e "$dest.partial" ]; }; do sleep 1; done
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

if [ -n "${KEEP:-}" ]; then
	# Folder names begin with the time, so the shell's sorted glob lists the oldest first. Only
	# this NAME's folders are candidates: a backup before an upgrade is never deleted here.
	set -- "$BACKUP/$CLUSTER"/[0-9]*Z-"$NAME"
	[ -d "$1" ] || set --
	while [ $# -gt "$KEEP" ]; do
		say "deleting $1 (keeping the $KEEP newest)"
		rm -rf "$1"
		shift
	done
	# Unfinished folders of runs that stopped half-way (this one has been renamed).
	for p in "$BACKUP/$CLUSTER"/[0-9]*Z-"$NAME".partial; do
		[ -d "$p" ] || continue
		say "deleting $p (a run that did not finish)"
		rm -rf "$p"
	done
fi
