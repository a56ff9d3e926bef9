# shellcheck shell=bash
# The worker nodes of hack/node.sh, which sources this file (NODE_WORKERS=N).
#
# Worker node I is named $NODE-I. It has a network namespace of its own (slurmtest-nodeI) with
# one veth into the bridge slurmtestnodes on this machine ($NODES_NET.1/24; the node is at
# $NODES_NET.(10+I)), its own containerd, kubelet, kube-proxy and kube-router in that
# namespace, its pods' bridge on 10.244.I.0/24 (this machine routes that subnet to the node; the
# node's default route is this machine), and its pods under the cgroup /slurmtest-nodeI in
# every hierarchy. The mount namespace is this machine's (so hostPath volumes are one folder for
# every node, as a shared file system would be). The kubelet's kubeconfig reaches the API server
# at $NODES_NET.1 with a certificate for system:node:$NODE-I.
#
# The faults: stop (its containers get SIGTERM, then SIGKILL ten seconds later, and its
# kubelet, kube-proxy, kube-router and containerd stop: a shutdown), kill (everything of the
# node gets SIGKILL at once and its veth goes down: a node lost), start (again, after either),
# cut (its veth goes down for a number of seconds: the node is cut off from every other, and
# from the API server) and mend (the cut ends now).

# workers_count prints how many worker nodes `up` made.
workers_count() { cat "$R/workers" 2>/dev/null || echo 0; }

workers_names() {
	local i
	for i in $(seq 1 "$(workers_count)"); do echo "$NODE-$i"; done
}

# worker_cmd CMD NODE [ARG] runs stop, kill, start, cut or mend on the worker node NODE.
worker_cmd() {
	local cmd=$1 name=$2 i
	for i in $(seq 1 "$(workers_count)"); do
		[ "$name" = "$NODE-$i" ] || continue
		node_vars "$i"
		"node_$cmd" "${@:3}"
		return 0
	done
	log "no worker node $name; the worker nodes are: $(workers_names | tr '\n' ' ')"
	exit 2
}

# worker_node_up I makes worker node I: its network, certificates, containerd, kubelet,
# kube-proxy and kube-router; with GPUS, its stand-in GPUs.
worker_node_up() {
	node_vars "$1"
	local host=stn$NI v
	if ! ip link show slurmtestnodes >/dev/null 2>&1; then
		ip link add slurmtestnodes type bridge
		ip addr add "$NODES_NET.1/24" dev slurmtestnodes
		ip link set slurmtestnodes up
	fi
	sysctl -qw net.ipv4.ip_forward=1
	ip netns add "$NETNS"
	ip link add "$host" type veth peer name eth0 netns "$NETNS"
	ip link set "$host" master slurmtestnodes up
	ip -n "$NETNS" link set lo up
	ip -n "$NETNS" addr add "$NIP/24" dev eth0
	ip -n "$NETNS" link set eth0 up
	ip -n "$NETNS" route add default via "$NODES_NET.1"
	ip route add "$NSUB" via "$NIP"
	innode sysctl -qw net.ipv4.ip_forward=1
	# Pods that reach a Service on their own node come back through the bridge: its traffic
	# must pass iptables in this namespace as it does on this machine.
	if v=$(sysctl -n net.bridge.bridge-nf-call-iptables 2>/dev/null); then
		innode sysctl -qw net.bridge.bridge-nf-call-iptables="$v" 2>/dev/null || true
	fi
	[ -f "$NADMIN" ] || kubeconfig "$NADMIN" admin "https://$NODES_NET.1:6443"
	sign "${NX}kubelet" "/O=system:nodes/CN=system:node:$NN" "DNS:$NN,IP:$NIP"
	kubeconfig "$R/${NX}kubelet.kubeconfig" "${NX}kubelet" "https://$NODES_NET.1:6443"
	mkdir -p "$ND"
	node_start
}

# node_cgroup makes the current worker node's cgroup, under which its kubelet puts its pods.
node_cgroup() {
	if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
		mkdir -p "/sys/fs/cgroup/$NETNS"
		local c
		for c in $(cat /sys/fs/cgroup/cgroup.subtree_control); do
			echo "+$c" >"/sys/fs/cgroup/$NETNS/cgroup.subtree_control" 2>/dev/null || true
		done
		return 0
	fi
	local h
	for h in /sys/fs/cgroup/*/; do
		[ -f "${h}cgroup.procs" ] || continue
		mkdir -p "$h$NETNS"
		if [ -f "${h}cpuset.cpus" ]; then
			cat "${h}cpuset.cpus" >"$h$NETNS/cpuset.cpus"
			cat "${h}cpuset.mems" >"$h$NETNS/cpuset.mems"
		fi
	done
}

# node_procs prints the pids of every process in the current worker node's cgroup.
node_procs() {
	local d
	for d in /sys/fs/cgroup/*/"$NETNS" "/sys/fs/cgroup/$NETNS"; do
		if [ -d "$d" ]; then find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null || true; fi
	done | sort -u
}

# node_signal SIG sends SIG to every process of the current worker node's pods.
node_signal() {
	local p
	for p in $(node_procs); do kill "-$1" "$p" 2>/dev/null || true; done
}

node_start() {
	if alive "${NX}kubelet"; then
		log "$NN is running"
		return 0
	fi
	node_mend
	containerd_up
	pause_image
	kubelet_up
	proxy_up
	netpol_up
	node_ready
	# After the kubelet registered again: it may reset extended resources when it does.
	[ "$GPUS" = 0 ] || fake_gpus
	log "$NN up at $NIP"
}

node_kill() {
	local n p
	# A dead machine answers nothing, not even for its pods' addresses (their network
	# namespaces outlive the processes here): its link goes down until it starts again.
	node_mend
	ip link set "stn$NI" down 2>/dev/null || true
	for n in kubelet kube-proxy kube-router containerd; do
		alive "$NX$n" && kill -9 "$(cat "$R/$NX$n.pid")" 2>/dev/null
	done
	# Gone, not only signalled: a start right after must not find them still there.
	for n in kubelet kube-proxy kube-router containerd; do
		for p in $(seq 1 50); do alive "$NX$n" || break; sleep 0.1; done
	done
	for p in $(pgrep -f "containerd-shim-runc-v2 .*-address $SOCK" || true); do kill -9 "$p" 2>/dev/null || true; done
	local i
	for i in $(seq 1 20); do
		[ -n "$(node_procs)" ] || break
		node_signal KILL
		sleep 0.2
	done
	log "$NN killed"
}

node_stop() {
	stop "${NX}kubelet"
	stop "${NX}kube-proxy"
	stop "${NX}kube-router"
	node_signal TERM
	local i
	for i in $(seq 1 20); do
		[ -n "$(node_procs)" ] || break
		sleep 0.5
	done
	node_kill >/dev/null 2>&1
	log "$NN stopped"
}

# node_cut SECONDS takes the node's veth down, and up again after SECONDS.
node_cut() {
	local secs=$1
	node_mend
	ip link set "stn$NI" down
	setsid sh -c "sleep $secs; ip link set 'stn$NI' up" >/dev/null 2>&1 </dev/null &
	echo $! >"$R/${NX}cut.pid"
	log "$NN cut off for ${secs}s"
}

node_mend() {
	if alive "${NX}cut"; then kill "$(cat "$R/${NX}cut.pid")" 2>/dev/null || true; fi
	rm -f "$R/${NX}cut.pid"
	ip link show "stn$NI" >/dev/null 2>&1 && ip link set "stn$NI" up
	return 0
}

# workers_down removes the worker nodes: their processes, network namespaces, routes, bridge
# and cgroups.
workers_down() {
	local i d
	for i in $(seq 1 "$(workers_count)"); do
		node_vars "$i"
		node_mend
		node_kill >/dev/null 2>&1
		ip netns del "$NETNS" 2>/dev/null || true
		# The namespace may outlive its name a while (the kernel frees it when the last
		# reference goes): its veth goes now.
		ip link del "stn$i" 2>/dev/null || true
		for d in /sys/fs/cgroup/*/"$NETNS" "/sys/fs/cgroup/$NETNS"; do
			[ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true
		done
	done
	ip link show slurmtestnodes >/dev/null 2>&1 && ip link del slurmtestnodes
	return 0
}
