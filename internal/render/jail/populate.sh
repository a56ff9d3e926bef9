#!/bin/sh
# Populates the jail once. Run by the populate Job; SOURCE is the root file system shipped in
# the image, JAIL the mounted jail volume, OVERWRITE "true" to replace a populated jail,
# REQUEST the name of the request (the Job's name: it changes with the image and the flag),
# MARKER the name of the marker file at the jail's root.
# An overwrite runs once per request: a Job recreated for the same request (deleted by hand or
# by a clean-up) finds the request in the marker and leaves the jail alone.
set -eu
SOURCE=${SOURCE:-/jail}
JAIL=${JAIL:-/mnt/jail}
OVERWRITE=${OVERWRITE:-false}
REQUEST=${REQUEST:-unnamed}
MARKER="$JAIL/${MARKER:?MARKER names the marker file (the renderer sets it)}"

if [ -e "$MARKER" ] && [ "$OVERWRITE" = "true" ] && grep -qxF "request=$REQUEST" "$MARKER"; then
  echo "this overwrite ($REQUEST) already ran; leaving the jail as it is"
  exit 0
fi

if [ -e "$MARKER" ] && [ "$OVERWRITE" != "true" ]; then
  echo "jail already populated ($(cat "$MARKER")); leaving it as it is"
  exit 0
fi
if [ ! -e "$MARKER" ]; then
  # A jail with data but no marker was filled by someone else: never overwrite it, not even
  # with OVERWRITE=true (that replaces only a jail this operator populated). Empty directories
  # do not count: a container runtime may have made mountpoints in it.
  # The root probe below is not data either: a Job stopped between its two steps leaves it.
  data=$(find "$JAIL" -mindepth 1 \( -path "$JAIL/lost+found" -o -path "$JAIL/.slurm-operator-root-probe" \) -prune -o ! -type d -print 2>/dev/null | head -n 5)
  if [ -n "$data" ]; then
    echo "jail is not empty and has no marker: it was not populated by slurm-operator, so it is never overwritten (empty it yourself to have it populated). It holds, among others:" >&2
    echo "$data" >&2
    exit 1
  fi
fi
# Root must create files in the jail and give them their owners (slurm, munge, setuid-root
# sudo). A file system that performs root's requests as another user (an NFS export with
# root_squash or all_squash) would refuse part of the copy and leave a jail that is neither
# whole nor owned right: find that out before copying anything.
if [ "$(id -u)" = 0 ]; then
  probe="$JAIL/.slurm-operator-root-probe"
  rm -f "$probe" 2>/dev/null || true
  if ! touch "$probe" 2>/dev/null || [ "$(stat -c %u "$probe")" != 0 ] || ! chown 64030:64030 "$probe" 2>/dev/null; then
    rm -f "$probe" 2>/dev/null || true
    echo "the jail volume does not let root create files as root and give them owners: its file system performs root's requests as another user (an NFS export with root_squash or all_squash does). Populating needs the export's no_root_squash (or the file system's equivalent) for root from the nodes; nothing was copied. See docs/install.md (storage)." >&2
    exit 1
  fi
  rm -f "$probe"
fi
echo "populating the jail from $SOURCE"
rm -f "$MARKER"
cp -a "$SOURCE"/. "$JAIL"/
{ date -u +%Y-%m-%dT%H:%M:%SZ; echo "request=$REQUEST"; } > "$MARKER.tmp"
mv "$MARKER.tmp" "$MARKER"
echo "jail populated"
