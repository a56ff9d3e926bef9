# JailWritable: write, sync and read back 16 MiB in the jail as the job's user, and want the
# jail's free space above MIN_FREE_KB. A jail that is read-only, full or slow fails here
# before a user's job does.
dir=/var/tmp
f=$(mktemp "$dir/.slurm-operator-check.XXXXXX" 2>&1) || { echo "cannot create a file in $dir of the jail: $f"; exit 1; }
trap 'rm -f "$f"' EXIT
if ! err=$(timeout 60 dd if=/dev/zero of="$f" bs=1M count=16 conv=fsync status=none 2>&1); then
  echo "writing 16 MiB to $dir of the jail failed or took more than 60 s: $err"
  exit 1
fi
if ! err=$(timeout 60 cmp -n $((16 << 20)) "$f" /dev/zero 2>&1); then
  echo "reading back 16 MiB from $dir of the jail failed: $err"
  exit 1
fi
free=$(df -Pk / | awk 'NR == 2 {print $4}')
if [ -z "$free" ] || [ "$free" -lt "$MIN_FREE_KB" ]; then
  echo "the jail has $((${free:-0} / 1024)) MiB free, less than $((MIN_FREE_KB / 1024)) MiB"
  exit 1
fi
echo "wrote, synced and read back 16 MiB in $dir; $((free / 1024)) MiB free"
