#!/usr/bin/env bash
# Shared by the hack/ scripts: sourced, never run.

# debian_mirror prints the archive URI of the host's own Debian release from the apt sources
# (one-line .list files and deb822 .sources files). The security and updates suites do not
# match the bare codename, so they are skipped.
debian_mirror() {
	local codename files=()
	codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
	[ -n "$codename" ] || return 1
	[ -f /etc/apt/sources.list ] && files+=(/etc/apt/sources.list)
	local f
	for f in /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] && files+=("$f")
	done
	[ ${#files[@]} -gt 0 ] || return 1
	awk -v want="$codename" '
		function flush() {
			if (deb && enabled && uris != "") {
				n = split(suites, s, /[ \t]+/)
				for (i = 1; i <= n; i++) if (s[i] == want) { split(uris, u, /[ \t]+/); print u[1]; found = 1; exit }
			}
			deb = 0; enabled = 1; uris = ""; suites = ""
		}
		BEGIN { enabled = 1 }
		FNR == 1 { flush() }
		FILENAME ~ /\.list$/ {
			sub(/#.*/, "")
			if ($1 != "deb") next
			i = 2
			if ($i ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
			if ($(i + 1) == want) { print $i; found = 1; exit }
			next
		}
		/^[ \t]*#/ { next }
		/^[ \t]*$/ { flush(); next }
		{
			key = tolower($1); sub(/:$/, "", key); $1 = ""; sub(/^[ \t]+/, "")
			if (key == "types") deb = ($0 ~ /(^|[ \t])deb([ \t]|$)/)
			else if (key == "uris") uris = $0
			else if (key == "suites") suites = $0
			else if (key == "enabled") enabled = (tolower($0) != "no")
		}
		END { if (!found) flush() }
	' "${files[@]}"
}


# need_debs installs the Debian packages (by name) that are not installed yet. One install runs
# at a time: make test runs scripts side by side (the node's tools build beside the real-Slurm
# tests, which install Ceph), and apt holds one lock; a waiting install looks again once it has
# the lock, and waits for apt's own lock too (another apt run on the machine).
need_debs() {
	local missing=() p
	missing_debs() {
		missing=()
		for p in "$@"; do
			dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
		done
	}
	missing_debs "$@"
	[ ${#missing[@]} -eq 0 ] && return 0
	(
		flock 7
		missing_debs "$@"
		[ ${#missing[@]} -eq 0 ] && exit 0
		echo "installing ${missing[*]}" >&2
		local apt=(apt-get -o DPkg::Lock::Timeout=600)
		DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y -q "${missing[@]}" >/dev/null 2>&1 ||
			{ "${apt[@]}" update -q >/dev/null && DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y -q "${missing[@]}" >/dev/null; }
	) 7>"${TMPDIR:-/tmp}/slurm-operator-apt.lock"
}

# pid_alive FILE says whether the process whose pid FILE holds runs.
pid_alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# pid_stop FILE stops the process whose pid FILE holds: SIGTERM, then SIGKILL after 20 s.
pid_stop() {
	pid_alive "$1" || return 0
	local p i
	p=$(cat "$1")
	kill "$p" 2>/dev/null || true
	for i in $(seq 1 40); do kill -0 "$p" 2>/dev/null || return 0; sleep 0.5; done
	kill -9 "$p" 2>/dev/null || true
}
