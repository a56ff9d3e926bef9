#!/usr/bin/env bash
# A real Kubernetes on this machine, from the binaries hack/test-assets.sh and
# hack/node-assets.sh build: etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
# containerd + runc + the CNI bridge, the kubelet, kube-proxy (iptables), kube-router's network
# policy controller (it enforces NetworkPolicies; NODE_NETWORK_POLICY=0 leaves it out) and
# CoreDNS (on the host, at the pod bridge's address).
#
# One node by default: the control-plane node, in this machine's network, with fake GPUs
# (NODE_FAKE_GPUS, 3: that many nvidia.com/gpu in its capacity, the GPU Operator's labels, and
# /dev/nvidia0.. as character devices). With NODE_WORKERS=N (hack/node/nodes.sh), N worker
# nodes join it, each in a network namespace of its own with its own containerd, kubelet,
# kube-proxy, kube-router, cgroup and pod subnet, routed through this machine; then the worker
# nodes have the fake GPUs (and the taint nvidia.com/gpu=present:NoSchedule, as GPU pools
# commonly do) and the control-plane node has none.
#
#   hack/node.sh up              start it (needs root); prints the admin kubeconfig's path
#   hack/node.sh import F...     import OCI image layout folders into every node's containerd
#   hack/node.sh import-into NODE F...  into that node's alone
#   hack/node.sh down            stop it and undo everything it did to this machine
#   hack/node.sh logs            print where the components' logs are
#   hack/node.sh nodes           print the worker nodes' names
#   hack/node.sh stop NODE       shut a worker node down: its containers, kubelet, containerd
#   hack/node.sh kill NODE       a worker node dies at once: everything of it gets SIGKILL
#   hack/node.sh start NODE      start a stopped or killed worker node again
#   hack/node.sh cut NODE SECS   cut a worker node off from every other for SECS seconds
#   hack/node.sh mend NODE       end a cut now
#
# Everything lives under $NODE_DIR (default /tmp/slurm-operator-node). What it changes outside
# (iptables chains, the bridge, sysctls, cgroups, device files, the kubelet's fixed paths) is
# recorded first, and `down` removes only what `up` made.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
R=${NODE_DIR:-/tmp/slurm-operator-node}
# `up` and `down` remove this folder whole: refuse anything that is not a folder of its own.
case $R in
/ | /tmp | /tmp/ | /root | /home | /var | /usr | /etc | "") echo "node: NODE_DIR=$R is not a folder of its own" >&2; exit 2 ;;
esac
NODE=${NODE_NAME:-slurm-test-node}
K8S=$("$HERE/test-assets.sh" --print-dir)
N=$("$HERE/node-assets.sh" --print-dir)
KUBE_ROUTER=$("$HERE/node-assets.sh" --kube-router)
BIN=$N/bin
P=$R/pki
L=$R/logs
GPUS=${NODE_FAKE_GPUS:-3}
WORKERS=${NODE_WORKERS:-0}
# 1: every node runs kube-router's network policy controller, so NetworkPolicies are enforced.
NETWORK_POLICY=${NODE_NETWORK_POLICY:-1}
# The worker nodes' network: a bridge on this machine at .1, node I at .(10+I).
NODES_NET=10.250.0
export PATH=$BIN:$K8S:$PATH

log() { echo "node: $*" >&2; }
kc() { "$K8S/kubectl" --kubeconfig "$R/admin.kubeconfig" "$@"; }
alive() { pid_alive "$R/$1.pid"; }
# start runs a command in the background in the network namespace of the node node_vars set
# last, its output in $L/NAME.log and its pid in $R/NAME.pid.
start() {
	local n=$1
	shift
	(
		[ -z "$NETNS" ] || exec nsenter --net="/run/netns/$NETNS" "$@"
		exec "$@"
	) >"$L/$n.log" 2>&1 &
	echo $! >"$R/$n.pid"
}
# innode runs a command in the network namespace of the node node_vars set last.
innode() {
	if [ -n "$NETNS" ]; then nsenter --net="/run/netns/$NETNS" "$@"; else "$@"; fi
}

# node_vars I sets where node I keeps its things (0 is the control-plane node, in this
# machine's network; 1.. are the worker nodes, each in a network namespace of its own):
# NN its name, ND its folder, NX the prefix of its processes' pid and log files, NETNS its
# network namespace, NIP its address, NGW and NSUB its pod bridge's address and subnet, NC
# and SOCK its containerd's folder and socket, NSHIM its shims' sockets, NADMIN the admin kubeconfig it reaches the API
# server with.
node_vars() {
	local i=$1
	NI=$i
	if [ "$i" = 0 ]; then
		NN=$NODE ND=$R NX= NETNS= NIP=${HOST_IP:-} NADMIN=$R/admin.kubeconfig
	else
		NN=$NODE-$i ND=$R/nodes/$i NX=node$i- NETNS=slurmtest-node$i NIP=$NODES_NET.$((10 + i))
		NADMIN=$R/node-admin.kubeconfig
	fi
	NGW=10.244.$i.1 NSUB=10.244.$i.0/24 NC=$ND/containerd
	SOCK=$NC/containerd.sock
	# containerd refuses a shim socket folder longer than 42 characters.
	NSHIM=$NC/shim
	[ "$i" = 0 ] || NSHIM=$R/shim$i
}
wait_for() {
	local what=$1 tries=$2
	shift 2
	local i
	for i in $(seq 1 "$tries"); do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.5
	done
	log "$what did not come up; its log ends with:"
	tail -n 30 "$L/$what.log" >&2 || true
	return 1
}

node_ip() { ip -4 route get 1.1.1.1 2>/dev/null | awk '{for (i = 1; i <= NF; i++) if ($i == "src") print $(i + 1)}'; }

# sign NAME SUBJECT [SANS] makes a key and a certificate signed by the test CA, in $P.
sign() {
	local n=$1 subj=$2 sans=${3:-}
	(
		cd "$P"
		openssl genrsa -out "$n.key" 2048 2>/dev/null
		openssl req -new -key "$n.key" -subj "$subj" -out "$n.csr" 2>/dev/null
		if [ -n "$sans" ]; then
			printf "subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\n" "$sans" >"$n.ext"
		else
			printf "extendedKeyUsage=clientAuth\n" >"$n.ext"
		fi
		openssl x509 -req -in "$n.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 -extfile "$n.ext" -out "$n.crt" 2>/dev/null
	)
}

# kubeconfig FILE NAME SERVER writes a kubeconfig for the certificate NAME.
kubeconfig() {
	local f=$1 n=$2 server=$3
	"$K8S/kubectl" config --kubeconfig="$f" set-cluster local --server="$server" --certificate-authority="$P/ca.crt" --embed-certs >/dev/null
	"$K8S/kubectl" config --kubeconfig="$f" set-credentials "$n" --client-certificate="$P/$n.crt" --client-key="$P/$n.key" --embed-certs >/dev/null
	"$K8S/kubectl" config --kubeconfig="$f" set-context default --cluster=local --user="$n" >/dev/null
	"$K8S/kubectl" config --kubeconfig="$f" use-context default >/dev/null
}

pki() {
	mkdir -p "$P"
	local ip=$1
	(
		cd "$P"
		openssl genrsa -out ca.key 2048 2>/dev/null
		openssl req -x509 -new -nodes -key ca.key -subj "/CN=slurm-operator-test-ca" -days 30 -out ca.crt 2>/dev/null
		openssl genrsa -out sa.key 2048 2>/dev/null
		openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
	)
	sign apiserver "/CN=kube-apiserver" "DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost,IP:127.0.0.1,IP:10.96.0.1,IP:$ip,IP:$NODES_NET.1"
	sign admin "/O=system:masters/CN=kubernetes-admin"
	sign apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
	sign kubelet "/O=system:nodes/CN=system:node:$NODE" "DNS:$NODE,IP:$ip"
	sign controller-manager "/CN=system:kube-controller-manager"
	sign scheduler "/CN=system:kube-scheduler"
	local n
	for n in admin kubelet controller-manager scheduler; do kubeconfig "$R/$n.kubeconfig" "$n" https://127.0.0.1:6443; done
}

# baseline records what `down` must restore, before anything is changed.
baseline() {
	mkdir -p "$R/baseline"
	local k
	for k in vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys \
		kernel.keys.root_maxbytes net.ipv4.ip_forward net.bridge.bridge-nf-call-iptables; do
		v=$(sysctl -n "$k" 2>/dev/null) && echo "$k=$v"
	done >"$R/baseline/sysctl"
	iptables-save >"$R/baseline/iptables" 2>/dev/null || true
	ip6tables-save >"$R/baseline/ip6tables" 2>/dev/null || true
	{ ipset list -n 2>/dev/null || true; } >"$R/baseline/ipsets"
	: >"$R/baseline/made"
	local p
	for p in /var/lib/kubelet /var/log/containers /var/lib/cni /run/containerd /var/log/pods; do
		[ -e "$p" ] || echo "$p" >>"$R/baseline/made"
	done
	local i
	for i in $(seq 0 $((GPUS - 1))) ctl; do
		[ -e "/dev/nvidia$i" ] || echo "/dev/nvidia$i" >>"$R/baseline/made"
	done
}

# pause_image imports the pods' sandbox image into the current node's containerd (made once).
pause_image() {
	if [ ! -f "$R/pause.tar" ]; then make_pause_image; fi
	"$BIN/ctr" --address "$SOCK" -n k8s.io images import "$R/pause.tar" >/dev/null
}

make_pause_image() {
	local dir=$R/pause-rootfs
	mkdir -p "$dir"
	gcc -static -O2 -o "$dir/pause" "$HERE/node/pause.c"
	local t
	t=$(mktemp -d)
	tar --numeric-owner --owner=0 --group=0 -C "$dir" -cf "$t/layer.tar" pause
	local lsum csum
	lsum=$(sha256sum "$t/layer.tar" | cut -d' ' -f1)
	mkdir "$t/$lsum"; mv "$t/layer.tar" "$t/$lsum/layer.tar"
	jq -nc --arg d "sha256:$lsum" '{architecture:"amd64",os:"linux",config:{Entrypoint:["/pause"]},rootfs:{type:"layers",diff_ids:[$d]}}' >"$t/config.json"
	csum=$(sha256sum "$t/config.json" | cut -d' ' -f1); mv "$t/config.json" "$t/$csum.json"
	jq -nc --arg c "$csum.json" --arg l "$lsum/layer.tar" '[{Config:$c,RepoTags:["docker.io/slurm-k8s-test/pause:1"],Layers:[$l]}]' >"$t/manifest.json"
	tar -C "$t" -cf "$R/pause.tar" manifest.json "$csum.json" "$lsum"
	rm -rf "$t"
}

# containerd_up starts the current node's containerd, with the CNI bridge on its pod subnet.
containerd_up() {
	local C=$NC
	mkdir -p "$C"/{root,state,runc} "$NSHIM" "$ND"/cni/{net.d,ipam} "$R/cdi"
	cat >"$C/config.toml" <<TOML
version = 4
root = '$C/root'
state = '$C/state'
disabled_plugins = ['io.containerd.internal.v1.opt', 'io.containerd.snapshotter.v1.btrfs', 'io.containerd.snapshotter.v1.zfs', 'io.containerd.snapshotter.v1.devmapper', 'io.containerd.snapshotter.v1.erofs', 'io.containerd.differ.v1.erofs', 'io.containerd.snapshotter.v1.blockfile', 'io.containerd.image-verifier.v1.bindir']
[plugins]
  [plugins.'io.containerd.server.v1.grpc']
    address = '$SOCK'
  [plugins.'io.containerd.server.v1.ttrpc']
    address = '$SOCK.ttrpc'
  [plugins.'io.containerd.shim.v1.manager']
    socket_dir = '$NSHIM'
  [plugins.'io.containerd.nri.v1.nri']
    disable = true
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = 'overlayfs'
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = 'docker.io/slurm-k8s-test/pause:1'
  [plugins.'io.containerd.cri.v1.runtime']
    netns_mounts_under_state_dir = true
    # Machines without CAP_SYS_RESOURCE refuse a negative oom_score_adj.
    restrict_oom_score_adj = true
    cdi_spec_dirs = ['$R/cdi']
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = 'runc'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = 'io.containerd.runc.v2'
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = '$BIN/runc'
          Root = '$C/runc'
          SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ['$N/cni-bin']
      conf_dir = '$ND/cni/net.d'
TOML
	cat >"$ND/cni/net.d/10-slurm-test.conflist" <<JSON
{"cniVersion": "1.0.0", "name": "slurm-test", "plugins": [
  {"type": "bridge", "bridge": "slurmtest0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "dataDir": "$ND/cni/ipam", "ranges": [[{"subnet": "$NSUB", "gateway": "$NGW"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}
JSON
	# A socket left by a containerd that was killed would pass for the new one's.
	rm -f "$SOCK"
	start "${NX}containerd" "$BIN/containerd" --config "$C/config.toml"
	wait_for "${NX}containerd" 60 test -S "$SOCK"
}

control_plane_up() {
	local ip=$1
	mkdir -p "$R/etcd"
	start etcd "$K8S/etcd" --name default --data-dir "$R/etcd" \
		--listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
		--listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
		--initial-cluster default=http://127.0.0.1:2380 --listen-metrics-urls http://127.0.0.1:2381
	wait_for etcd 60 curl -sf http://127.0.0.1:2379/health
	start kube-apiserver "$K8S/kube-apiserver" \
		--etcd-servers=http://127.0.0.1:2379 --advertise-address="$ip" --secure-port=6443 \
		--cert-dir="$R/apiserver-certs" --tls-cert-file="$P/apiserver.crt" --tls-private-key-file="$P/apiserver.key" \
		--client-ca-file="$P/ca.crt" --service-account-key-file="$P/sa.pub" --service-account-signing-key-file="$P/sa.key" \
		--service-account-issuer=https://kubernetes.default.svc.cluster.local \
		--service-cluster-ip-range=10.96.0.0/16 --authorization-mode=Node,RBAC \
		--enable-admission-plugins=NodeRestriction --allow-privileged=true \
		--kubelet-client-certificate="$P/apiserver-kubelet-client.crt" --kubelet-client-key="$P/apiserver-kubelet-client.key" \
		--kubelet-preferred-address-types=InternalIP,Hostname
	wait_for kube-apiserver 240 kc get --raw /readyz
	start kube-controller-manager "$N/bin/kube-controller-manager" \
		--kubeconfig="$R/controller-manager.kubeconfig" \
		--authentication-kubeconfig="$R/controller-manager.kubeconfig" --authorization-kubeconfig="$R/controller-manager.kubeconfig" \
		--bind-address=127.0.0.1 --leader-elect=false --use-service-account-credentials=true \
		--service-account-private-key-file="$P/sa.key" --root-ca-file="$P/ca.crt" \
		--cluster-signing-cert-file="$P/ca.crt" --cluster-signing-key-file="$P/ca.key" \
		--service-cluster-ip-range=10.96.0.0/16 --allocate-node-cidrs=false
	start kube-scheduler "$N/bin/kube-scheduler" \
		--kubeconfig="$R/scheduler.kubeconfig" \
		--authentication-kubeconfig="$R/scheduler.kubeconfig" --authorization-kubeconfig="$R/scheduler.kubeconfig" \
		--bind-address=127.0.0.1 --leader-elect=false
}

# kubelet_up starts the current node's kubelet; a worker node's pods live under a cgroup of
# its own (/$NETNS in every hierarchy) so that the node can be killed whole.
kubelet_up() {
	local kd=$ND/kubelet extra=
	mkdir -p "$kd" "$ND/pod-logs"
	if [ -n "$NETNS" ]; then
		node_cgroup
		extra="cgroupRoot: /$NETNS"
		[ "$GPUS" = 0 ] || extra="$extra
registerWithTaints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]"
	fi
	cat >"$kd/config.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $P/ca.crt}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://$SOCK
imageServiceEndpoint: unix://$SOCK
podLogsDir: $ND/pod-logs
clusterDomain: cluster.local
clusterDNS: [10.244.0.1]
resolvConf: /etc/resolv.conf
address: $NIP
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
tlsCertFile: $P/${NX}kubelet.crt
tlsPrivateKeyFile: $P/${NX}kubelet.key
# No registry: locally imported images can never be pulled again, so never collect them.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%"}
maxPods: 60
$extra
YAML
	start "${NX}kubelet" "$N/bin/kubelet" --config="$kd/config.yaml" --kubeconfig="$R/${NX}kubelet.kubeconfig" \
		--root-dir="$kd" --cert-dir="$kd/pki" --node-ip="$NIP" --hostname-override="$NN" --v=1
	wait_for "${NX}kubelet" 120 kc get node "$NN"
}

dns_up() {
	# CoreDNS listens on the bridge's address; make the bridge now so it can bind.
	if ! ip link show slurmtest0 >/dev/null 2>&1; then
		ip link add slurmtest0 type bridge
		ip addr add 10.244.0.1/24 dev slurmtest0
		ip link set slurmtest0 up
	fi
	mkdir -p "$R/coredns"
	cat >"$R/coredns/Corefile" <<CF
.:53 {
    bind 10.244.0.1
    errors
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig $R/admin.kubeconfig default
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
    cache 5
}
CF
	start coredns "$BIN/coredns" -conf "$R/coredns/Corefile"
}

proxy_up() {
	start "${NX}kube-proxy" "$N/bin/kube-proxy" --kubeconfig="$NADMIN" --hostname-override="$NN" \
		--proxy-mode=iptables --cluster-cidr=10.244.0.0/16 \
		--iptables-localhost-nodeports=false --conntrack-max-per-core=0 \
		--conntrack-tcp-timeout-established=0 --conntrack-tcp-timeout-close-wait=0 \
		--metrics-bind-address=127.0.0.1:10249 --healthz-bind-address=127.0.0.1:10256
	wait_for "${NX}kube-proxy" 120 innode curl -sf http://127.0.0.1:10256/healthz
}

# netpol_up starts kube-router on the current node, in its network namespace, with its network
# policy controller alone (no routes, no service proxy: the CNI bridge and kube-proxy do those).
# Its chains (KUBE-ROUTER-INPUT/FORWARD/OUTPUT, jumped to first from the filter table's
# INPUT/FORWARD/OUTPUT, and KUBE-POD-FW-*, KUBE-NWPLCY-*) judge only traffic from and to this
# node's pods, after kube-proxy's DNAT (so a Service's traffic meets its pods' policies) and
# before kube-proxy's own filter chains; its ipsets are KUBE-SRC-* and KUBE-DST-*. It starts
# after the kubelet registered the node: it reads the node's InternalIP to know its pods.
netpol_up() {
	[ "$(cat "$R/network-policy" 2>/dev/null || echo 0)" = 1 ] || return 0
	start "${NX}kube-router" "$KUBE_ROUTER" --kubeconfig="$NADMIN" --hostname-override="$NN" \
		--run-firewall=true --run-router=false --run-service-proxy=false --run-loadbalancer=false \
		--enable-ipv4=true --enable-ipv6=false \
		--service-cluster-ip-range=10.96.0.0/16 --service-node-port-range=30000-32767 \
		--health-port=20244 --metrics-port=0
	wait_for "${NX}kube-router" 120 innode curl -sf http://127.0.0.1:20244/healthz
	# Its first full sync ends with the accept rule of the traffic that policies allow.
	wait_for "${NX}kube-router" 120 innode sh -c "iptables-save -t filter | grep -q -- '-A KUBE-ROUTER-FORWARD .*0x20000/0x20000 -j ACCEPT'"
}

# fake_gpus gives the current node GPUS stand-in GPUs: device files, the GPU Operator's
# labels, and nvidia.com/gpu in its capacity. On the one-node cluster a real device plugin
# serves them (test/node/gpuplugin: the kubelet picks each pod's GPUs and the plugin says which
# in NVIDIA_VISIBLE_DEVICES, as the NVIDIA plugin does). Worker nodes share this machine's
# /dev and the kubelet's one device plugin folder, so there the capacity is only written.
fake_gpus() {
	local i
	for i in $(seq 0 $((GPUS - 1))); do
		[ -e "/dev/nvidia$i" ] || mknod -m 666 "/dev/nvidia$i" c 195 "$i"
	done
	[ -e /dev/nvidiactl ] || mknod -m 666 /dev/nvidiactl c 195 255
	kc label node "$NN" --overwrite nvidia.com/gpu.present=true nvidia.com/gpu.count="$GPUS" \
		nvidia.com/gpu.product=Stand-In-GPU nvidia.com/gpu.memory=1024 >/dev/null
	if [ "$WORKERS" = 0 ]; then
		(cd "$HERE/.." && go build -o "$R/gpuplugin" ./test/node/gpuplugin)
		start gpuplugin "$R/gpuplugin" --count "$GPUS"
		wait_for gpuplugin 120 sh -c "'$K8S/kubectl' --kubeconfig '$R/admin.kubeconfig' get node '$NN' -o jsonpath='{.status.allocatable.nvidia\\.com/gpu}' | grep -qx '$GPUS'"
		return
	fi
	kc patch node "$NN" --subresource=status --type=json \
		-p "[{\"op\":\"add\",\"path\":\"/status/capacity/nvidia.com~1gpu\",\"value\":\"$GPUS\"}]" >/dev/null
}

up() {
	[ "$(id -u)" = 0 ] || { log "must run as root"; exit 1; }
	if alive kube-apiserver; then log "already up"; echo "$R/admin.kubeconfig"; return 0; fi
	[ -x "$BIN/kubelet" ] && [ -x "$K8S/kube-apiserver" ] || { log "run hack/test-assets.sh and hack/node-assets.sh first"; exit 1; }
	grep -q overlay /proc/filesystems || { log "this kernel has no overlayfs"; exit 1; }
	need_debs iptables openssl
	if [ "$NETWORK_POLICY" = 1 ]; then
		need_debs ipset
		[ -x "$KUBE_ROUTER" ] || { log "run hack/node-assets.sh first (kube-router)"; exit 1; }
	fi
	# A node left by a run that was killed (its processes gone, its pod mounts and iptables
	# rules still there) is taken down first: a plain rm would stop at the busy mounts.
	if [ -d "$R" ]; then
		log "a previous node is left at $R; taking it down first"
		down
	fi
	mkdir -p "$R" "$L"
	baseline
	local ip
	ip=$(node_ip)
	[ -n "$ip" ] || { log "no node address (no default route)"; exit 1; }
	local t0=$SECONDS
	HOST_IP=$ip
	echo "$WORKERS" >"$R/workers"
	echo "$NETWORK_POLICY" >"$R/network-policy"
	pki "$ip"
	node_vars 0
	containerd_up
	pause_image
	control_plane_up "$ip"
	dns_up
	kubelet_up
	proxy_up
	netpol_up
	# With worker nodes, they have the GPUs.
	[ "$WORKERS" != 0 ] || fake_gpus
	node_ready
	# Pods need their namespace's default ServiceAccount, which the controller-manager makes.
	wait_for kube-controller-manager 120 kc get serviceaccount default -n default
	local i
	for i in $(seq 1 "$WORKERS"); do
		worker_node_up "$i"
	done
	log "up in $((SECONDS - t0))s: node $NODE at $ip$([ "$WORKERS" = 0 ] || echo " and $WORKERS worker nodes: $(workers_names | tr "\n" " ")")"
	echo "$R/admin.kubeconfig"
}

# node_ready waits until the current node is Ready.
node_ready() {
	wait_for "${NX}kubelet" 120 sh -c "'$K8S/kubectl' --kubeconfig '$R/admin.kubeconfig' get node '$NN' -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}' | grep -qx True"
}

# import_if NODE DIR imports DIR when the current node is NODE.
import_if() { [ "$NN" != "$1" ] || import "$2"; }

# each_node CMD... runs CMD once per running node, with node_vars set.
each_node() {
	local i
	for i in 0 $(seq 1 "$(cat "$R/workers" 2>/dev/null || echo 0)"); do
		node_vars "$i"
		alive "${NX}containerd" || continue
		"$@"
	done
}

import() {
	local dir=$1
	[ -f "$dir/index.json" ] || { log "$dir is not an OCI image layout"; exit 1; }
	tar -C "$dir" -cf - . | "$BIN/ctr" --address "$SOCK" -n k8s.io images import --no-unpack=false - >/dev/null
}

stop() { pid_stop "$R/$1.pid"; }

down() {
	[ -d "$R" ] || { log "nothing to stop"; return 0; }
	if alive kube-apiserver && alive kubelet; then
		# Pods on a node that does not answer (killed, cut off) would never finish: they go at
		# once. The kubelets that answer stop theirs properly (CNI teardown, unmounts).
		local lost
		for lost in $(kc get nodes -o jsonpath='{range .items[*]}{.metadata.name} {.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' 2>/dev/null | awk '$2 != "True" {print $1}'); do
			kc delete pods -A --field-selector "spec.nodeName=$lost" --force --grace-period=0 >/dev/null 2>&1 || true
		done
		kc delete namespace --all --wait=false >/dev/null 2>&1 || true
		kc delete pods --all -A --grace-period=1 --timeout=60s >/dev/null 2>&1 || true
	fi
	workers_down
	node_vars 0
	local n C=$NC
	for n in gpuplugin kubelet kube-proxy kube-router coredns kube-scheduler kube-controller-manager; do stop "$n"; done
	if [ -d "$C/runc/k8s.io" ]; then
		for n in $("$BIN/runc" --root "$C/runc/k8s.io" list -q 2>/dev/null); do "$BIN/runc" --root "$C/runc/k8s.io" delete -f "$n" >/dev/null 2>&1 || true; done
	fi
	for n in $(pgrep -f "containerd-shim-runc-v2 .*-address $SOCK" || true); do kill -9 "$n" 2>/dev/null || true; done
	stop containerd
	stop kube-apiserver
	stop etcd
	# Mounts under our folder, deepest first.
	local m
	for m in $(awk -v r="$R" 'index($5, r) == 1 {print $5}' /proc/self/mountinfo | sort -r); do
		umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
	done
	ip link show slurmtest0 >/dev/null 2>&1 && ip link del slurmtest0
	# iptables, IPv4 and IPv6 (the kubelet's and kube-proxy's canaries): our chains (KUBE-*,
	# CNI-*) and the jumps to them; tables nobody used before.
	local ipt t rule ch
	for ipt in iptables ip6tables; do
		for t in filter nat mangle; do
			{ "$ipt-save" -t "$t" 2>/dev/null || true; } | awk '/^-A [A-Z-]+ .*-j (KUBE-|CNI-)/ && !/^-A (KUBE-|CNI-)/ {sub(/^-A/, "-D"); print}' |
				while read -r rule; do eval "$ipt -t $t $rule" 2>/dev/null || true; done
			for ch in $("$ipt-save" -t "$t" 2>/dev/null | awk '/^:(KUBE-|CNI-)/ {print substr($1, 2)}'); do "$ipt" -t "$t" -F "$ch" 2>/dev/null || true; done
			for ch in $("$ipt-save" -t "$t" 2>/dev/null | awk '/^:(KUBE-|CNI-)/ {print substr($1, 2)}'); do "$ipt" -t "$t" -X "$ch" 2>/dev/null || true; done
		done
	done
	# kube-router's ipsets, once no rule uses them; not those that were there before.
	local s
	for s in $({ ipset list -n 2>/dev/null || true; } | grep -E '^KUBE-(SRC|DST)-'); do
		grep -qxF "$s" "$R/baseline/ipsets" 2>/dev/null || ipset destroy "$s" 2>/dev/null || true
	done
	local fam
	for ipt in iptables ip6tables; do
		fam=ip
		[ "$ipt" = iptables ] || fam=ip6
		if [ -f "$R/baseline/$ipt" ] && ! grep -q '^\*' "$R/baseline/$ipt" && ! "$ipt-save" 2>/dev/null | grep -q '^-A'; then
			for t in filter nat mangle; do nft delete table "$fam" "$t" 2>/dev/null || true; done
		fi
	done
	if [ -f "$R/baseline/sysctl" ]; then
		while IFS='=' read -r k v; do sysctl -qw "$k=$v" 2>/dev/null || true; done <"$R/baseline/sysctl"
	fi
	local top d
	for top in kubepods k8s.io; do
		for d in /sys/fs/cgroup/*/"$top" /sys/fs/cgroup/"$top"; do
			[ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true
		done
	done
	if [ -f "$R/baseline/made" ]; then
		while read -r p; do rm -rf --one-file-system "$p"; done <"$R/baseline/made"
	fi
	rm -rf --one-file-system "$R"
	log "down"
}

# The worker nodes: bring-up, stop, kill, start, cut, and their part of down.
. "$HERE/node/nodes.sh"

case ${1:-} in
up) up ;;
down) down ;;
import) shift; for d in "$@"; do each_node import "$d"; done ;;
import-into) shift; node=$1; shift; for d in "$@"; do each_node import_if "$node" "$d"; done ;;
logs) echo "$L" ;;
nodes) workers_names ;;
stop | kill | start | mend) worker_cmd "$1" "${2:?which node}" ;;
cut) worker_cmd cut "${2:?which node}" "${3:?for how many seconds}" ;;
*) echo "usage: $0 up|down|import DIR...|import-into NODE DIR...|logs|nodes|stop NODE|kill NODE|start NODE|cut NODE SECONDS|mend NODE" >&2; exit 2 ;;
esac
