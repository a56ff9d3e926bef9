#!/usr/bin/env bash
# The demo: a Slurm cluster you can log in to, on a real one-node Kubernetes built here
# (hack/node.sh) with the product's images (hack/images.sh), the operator chart and
# helm-slurm-cluster, as the node test installs them. Where that cannot run (not root, not
# Linux), the control-plane demo: a local API server, the operator, and the objects it writes.
#
#   hack/demo.sh up               the whole demo, step by step; ends with how to log in
#                                 (the values: hack/demo/values.yaml, then DEMO_VALUES)
#   hack/demo.sh ssh [CMD...]     ssh as root to the login Service with the demo's key
#   hack/demo.sh down             remove everything the demo made (hack/node.sh down)
#   hack/demo.sh control-plane    the control-plane demo (Ctrl-C stops it)
#
# The steps `up` runs, also run by the node test on its own node:
#   hack/demo.sh install [FILE...]  the claims and the database (hack/demo/storage.yaml), the
#                                   operator chart, then the cluster as `cluster` does
#   hack/demo.sh cluster [FILE...]  helm-slurm-cluster with hack/demo/values.yaml, then the
#                                   FILEs, and root's key; waits until it is Available
#   hack/demo.sh gpus               the stand-in nvidia-smi (hack/demo/nvidia-smi) in the shared
#                                   root; waits until the health checks let the workers take jobs
#
# DEMO_KEY is root's private key (default $NODE_DIR/demo/id_ed25519, made when missing; its
# public half is DEMO_KEY.pub). DEMO_MODE=control-plane runs the control-plane demo even as
# root. DEMO_VALUES are the values files `up` gives on top of hack/demo/values.yaml:
# hack/demo/demo.yaml (one login node) when unset; none when set empty (the node test, which
# wants the two login nodes of values.yaml). NODE_LOCK_HELD=1 says the caller holds the
# node's lock (the node tests do). DEMO_FLAGS are the manager's extra flags in the
# control-plane demo; DEMO_MANAGER a built manager to run there instead of building bin/manager.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
R=${NODE_DIR:-/tmp/slurm-operator-node}
D=$R/demo
NS=fpt-hpc
CLUSTER=fpt-hpc
KEY=${DEMO_KEY:-$D/id_ed25519}
START=$(date +%s)

elapsed() {
	local s=$(($(date +%s) - START))
	printf '%dm%02ds' $((s / 60)) $((s % 60))
}
say() { echo "demo [$(elapsed)] $*"; }
die() { echo "demo: $*" >&2; exit 1; }

assets() { "$HERE/test-assets.sh" --print-dir; }
# The demo talks to its own node only, whatever KUBECONFIG the shell has.
KC=$R/admin.kubeconfig
kc() { "$(assets)/kubectl" --kubeconfig "$KC" "$@"; }
helm_() {
	HELM_CACHE_HOME=${HELM_CACHE_HOME:-$D/helm} HELM_CONFIG_HOME=${HELM_CONFIG_HOME:-$D/helm} \
		"$(assets)/helm" --kubeconfig "$KC" "$@"
}

# lock_node takes the node's lock, which the node tests hold while they run (they set
# NODE_LOCK_HELD=1 when they call this script), so that a demo and a test never take the one
# node down under each other.
lock_node() {
	[ "${NODE_LOCK_HELD:-}" = 1 ] && return 0
	exec 9>"$R.lock"
	flock -n 9 || die "another demo or a node test is using this machine's node ($R.lock); try again when it ends"
}

# why_not_node prints why the full demo cannot run here, or nothing when it can.
why_not_node() {
	if [ "${DEMO_MODE:-}" = control-plane ]; then
		echo "DEMO_MODE=control-plane asks for it"
	elif [ "$(uname -s)" != Linux ]; then
		echo "a real node needs Linux (this is $(uname -s)); run 'make demo' as root on a Linux machine for it"
	elif [ "$(id -u)" != 0 ]; then
		echo "a real node needs root (containerd, the kubelet, network namespaces); run 'sudo make demo' for it"
	elif [ ! -d /sys/fs/cgroup ] || ! command -v ip ssh ssh-keygen flock >/dev/null; then
		echo "a real node needs cgroups, iproute2 (ip), an ssh client and flock; install them, then run 'make demo' again"
	fi
}

control_plane() {
	"$HERE/test-assets.sh" >/dev/null
	cd "$ROOT"
	export KUBEBUILDER_ASSETS
	KUBEBUILDER_ASSETS=$(assets)
	# shellcheck disable=SC2086 # DEMO_FLAGS are words.
	if [ -n "${DEMO_MANAGER:-}" ]; then
		exec "$DEMO_MANAGER" --local ${DEMO_FLAGS:-}
	fi
	# Built, then run in this process's place: a signal to it (Ctrl-C, or SIGTERM from a
	# supervisor) reaches the manager, which stops its API server and etcd. `go run` would
	# not pass SIGTERM on, and they would outlive it.
	go build -o "$ROOT/bin/manager" ./cmd/manager
	exec "$ROOT/bin/manager" --local ${DEMO_FLAGS:-}
}

# ensure_key makes root's key for the cluster when there is none.
ensure_key() {
	if [ -f "$KEY" ]; then
		[ -f "$KEY.pub" ] || ssh-keygen -y -f "$KEY" >"$KEY.pub"
		return 0
	fi
	mkdir -p "$(dirname "$KEY")"
	ssh-keygen -q -t ed25519 -N '' -C slurm-operator-demo -f "$KEY"
}

ssh_() {
	mkdir -p "$D"
	ssh -i "$KEY" -o IdentitiesOnly=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile="$D/known_hosts" \
		-o LogLevel=ERROR -o ConnectTimeout=10 "$@"
}

login_address() {
	kc get service "$CLUSTER-login" -n "$NS" -o jsonpath='{.spec.clusterIP}'
}

# wait_available waits until the cluster's Available condition is True, printing the
# conditions that are not True each time they change.
wait_available() {
	local deadline=$(($(date +%s) + ${DEMO_WAIT_SECONDS:-900})) last="" now
	while :; do
		now=$(kc get slurmcluster "$CLUSTER" -n "$NS" -o \
			'jsonpath={range .status.conditions[*]}{.type}={.status} {.reason}: {.message}{"\n"}{end}' 2>/dev/null || true)
		if grep -q '^Available=True ' <<<"$now"; then
			say "cluster: Available"
			return 0
		fi
		# One line per change: the conditions not yet True, and what Available says.
		local pending
		pending=$(grep -v -e '^[A-Za-z]*=True ' -e '^Degraded=' -e '^Available=' <<<"$now" | cut -d= -f1 | paste -sd, - | sed 's/,/, /g' || true)
		pending="$pending ($(grep -m1 '^Available=' <<<"$now" | cut -d' ' -f2- || true))"
		[ -n "$now" ] || pending="the operator's first status"
		if [ "$pending" != "$last" ]; then
			say "cluster: waiting for $pending"
			last=$pending
		fi
		if [ "$(date +%s)" -gt "$deadline" ]; then
			echo "$now" >&2
			die "the cluster is not Available after ${DEMO_WAIT_SECONDS:-900} s (kubectl get pods -n $NS; kubectl describe slurmcluster -n $NS)"
		fi
		sleep 3
	done
}

install_cluster() {
	ensure_key
	local args=(upgrade --install "$CLUSTER" "$ROOT/charts/helm-slurm-cluster" -n "$NS" -f "$HERE/demo/values.yaml")
	local f
	for f in "$@"; do args+=(-f "$f"); done
	say "cluster: helm install $CLUSTER (helm-slurm-cluster, hack/demo/values.yaml${*:+ and ${*#"$ROOT/"}})"
	# The key as a JSON string: a backslash or a double quote in its comment is escaped.
	local pub
	pub=$(tr -d '\n' <"$KEY.pub" | sed 's/[\\"]/\\&/g')
	helm_ "${args[@]}" --set-json "slurmNodes.login.sshRootPublicKeys=[\"$pub\"]" >/dev/null
	wait_available
}

install_all() {
	say "storage: the claims, their volumes and the accounting database (hack/demo/storage.yaml)"
	# The volumes live in the node's folder, which hack/node.sh down removes.
	sed "s|/tmp/slurm-operator-node/|$R/|" "$HERE/demo/storage.yaml" | kc apply -f - >/dev/null
	say "operator: helm install slurm-operator (charts/slurm-operator)"
	helm_ upgrade --install slurm-operator "$ROOT/charts/slurm-operator" -n slurm-system --create-namespace \
		--set image.pullPolicy=Never --wait --timeout 5m >/dev/null
	install_cluster "$@"
}

# stand_in_gpus puts the stand-in nvidia-smi in the shared root through the login node and
# waits until every worker is idle (the health check drains a worker whose nvidia-smi fails).
stand_in_gpus() {
	local login workers
	login=$(login_address)
	say "gpus: the stand-in nvidia-smi in the shared root (the node's GPUs are fake)"
	ssh_ -o BatchMode=yes "root@$login" 'cat > /usr/local/bin/nvidia-smi && chmod 0755 /usr/local/bin/nvidia-smi' <"$HERE/demo/nvidia-smi"
	workers=$(kc get slurmcluster "$CLUSTER" -n "$NS" -o jsonpath='{.spec.slurmNodes.worker.size}')
	local deadline=$(($(date +%s) + 180)) out=""
	while :; do
		out=$(ssh_ -o BatchMode=yes "root@$login" "sinfo -h -N -o '%N %t' | sort -u" 2>&1 || true)
		[ "$(grep -c ' idle$' <<<"$out")" = "$workers" ] && break
		[ "$(date +%s)" -le "$deadline" ] || die "the workers are not idle after 180 s: $out"
		sleep 3
	done
	say "gpus: $workers workers idle"
}

up() {
	local why
	why=$(why_not_node)
	if [ -n "$why" ]; then
		echo "demo: the control-plane demo (the objects the operator writes; no pod runs), because $why."
		control_plane
	fi
	lock_node
	local values
	read -ra values <<<"${DEMO_VALUES-$HERE/demo/demo.yaml}"
	if [ -f "$KC" ] && kc get --raw /readyz >/dev/null 2>&1; then
		# A node from an earlier make demo: finish what it did not (every step can run again).
		say "node: up already (make demo-down removes it)"
		install_all "${values[@]}"
		stand_in_gpus
		ready
		return 0
	fi
	say "tools: kubectl, helm, kube-apiserver, etcd and the node's binaries (built once, then cached)"
	"$HERE/test-assets.sh" >/dev/null
	"$HERE/node-assets.sh" >/dev/null
	say "images: the nine images with BuildKit (built once, then rebuilt only when their inputs change)"
	local layouts
	layouts=$("$HERE/images.sh" | awk 'NF == 2 {print $2}')
	say "node: a one-node Kubernetes (hack/node.sh up)"
	# What the node's scripts and containerd say goes to a log, shown when a step fails. The
	# node's daemons must not inherit the lock (9).
	local nodelog
	nodelog=$(mktemp "${TMPDIR:-/tmp}/slurm-operator-demo-node.XXXXXX")
	# shellcheck disable=SC2086 # one folder per line
	if ! { "$HERE/node.sh" up && "$HERE/node.sh" import $layouts; } >"$nodelog" 2>&1 9>&-; then
		tail -n 40 "$nodelog" >&2
		rm -f "$nodelog"
		die "the node did not start (above: the end of what it said)"
	fi
	say "node: $(grep -m1 '^node: up in' "$nodelog" | sed 's/^node: //'), images imported"
	rm -f "$nodelog"
	install_all "${values[@]}"
	stand_in_gpus
	ready
}

# ready prints how to log in and what to try.
ready() {
	local login
	login=$(login_address)
	cat <<EOF

demo [$(elapsed)] ready. Log in as root through the login Service:

    make demo-ssh
    # or: ssh -i $KEY root@$login

and try:

    sinfo
    srun -N2 --gres=gpu:1 nvidia-smi -L
    sbatch -N2 --wrap 'srun hostname'; sleep 5; cat slurm-*.out

kubectl: export KUBECONFIG=$KC ($(assets)/kubectl)
Remove the node and the cluster with: make demo-down (the build caches stay)
EOF
}

case ${1:-} in
up) up ;;
install) shift; install_all "$@" ;;
cluster) shift; install_cluster "$@" ;;
gpus) stand_in_gpus ;;
ssh)
	shift
	[ -f "$KEY" ] || die "no demo key at $KEY: run 'make demo' first"
	login=$(login_address) || die "no demo cluster: run 'make demo' first"
	tty=()
	[ ! -t 0 ] || tty=(-t)
	ssh_ "${tty[@]}" "root@$login" "$@"
	;;
down)
	lock_node
	"$HERE/node.sh" down
	;;
control-plane) control_plane ;;
*) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
esac
