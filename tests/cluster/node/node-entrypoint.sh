#!/bin/bash
# PID 1's child in a node container (under tini): prepares the node, then runs
# containerd, kube-proxy and the kubelet, each restarted when it exits (a test may kill
# the kubelet to see the device plugin register again). Logs go to /var/log/gvirtus-node.
#
# From tests/cluster/node/add.sh: NODE_NAME, POD_CIDR (this node's pods), CLUSTER_CIDR
# (all nodes' pods), CGROUP_ROOT (unique on the host, default NODE_NAME), NODE_LABELS and NODE_TAINTS (kubelet syntax, may be empty), and
# read-only in /etc/kubernetes: pki/ca.crt, kubelet.kubeconfig, kube-proxy.kubeconfig
# with the client certificates they name.
set -euo pipefail
: "${NODE_NAME:?}" "${POD_CIDR:?}" "${CLUSTER_CIDR:?}"
cgroup_root=${CGROUP_ROOT:-$NODE_NAME}
logs=/var/log/gvirtus-node
conf=/var/lib/gvirtus-node
mkdir -p "$logs" "$conf" /etc/cni/net.d /etc/cdi /var/lib/kubelet
say() { printf '[node %s %s] %s\n' "$NODE_NAME" "$(date +%H:%M:%S)" "$*"; }

children=()
stop() {
  say "stopping"
  kill -TERM "${children[@]}" 2>/dev/null || true
  wait || true
  exit 0
}
trap stop TERM INT

# --- The node's own setup ------------------------------------------------------------
[ -s /etc/machine-id ] || tr -d - </proc/sys/kernel/random/uuid >/etc/machine-id
# The kubelet's cgroup root must exist in every cgroup v1 hierarchy.
for hierarchy in /sys/fs/cgroup/*; do
  [ -d "$hierarchy" ] && [ ! -L "$hierarchy" ] && mkdir -p "$hierarchy/$cgroup_root" 2>/dev/null || true
done
# Bridged pod traffic must pass iptables (kube-proxy's Service rules), and pods leaving
# the cluster's pod range (the API server on the host) leave as this node.
sysctl -qw net.ipv4.ip_forward=1
sysctl -qw net.bridge.bridge-nf-call-iptables=1 2>/dev/null || say "bridge-nf-call-iptables not settable"
iptables -t nat -C POSTROUTING -s "$POD_CIDR" ! -d "$CLUSTER_CIDR" -j MASQUERADE 2>/dev/null ||
  iptables -t nat -A POSTROUTING -s "$POD_CIDR" ! -d "$CLUSTER_CIDR" -j MASQUERADE
node_ip=$(ip -4 -o addr show dev eth0 | awk '{sub(/\/.*/, "", $4); print $4; exit}')

cat >/etc/cni/net.d/10-gvirtus-pods.conflist <<CNI
{
  "cniVersion": "1.0.0",
  "name": "gvirtus-pods",
  "plugins": [
    {
      "type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
      "ipam": {"type": "host-local", "ranges": [[{"subnet": "$POD_CIDR"}]], "routes": [{"dst": "0.0.0.0/0"}]}
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
CNI

# NODE_TAINTS (key[=value]:Effect,...) as the configuration's registerWithTaints: the
# kubelet's flags for configuration fields are deprecated.
taints="registerWithTaints: []"
IFS=, read -ra node_taints <<<"${NODE_TAINTS:-}"
[ ${#node_taints[@]} = 0 ] || taints="registerWithTaints:"
for taint in "${node_taints[@]}"; do
  key=${taint%%:*} value=""
  [[ $key == *=* ]] && value=${key#*=} key=${key%%=*}
  taints+=$'\n'"  - {key: \"$key\", value: \"$value\", effect: \"${taint##*:}\"}"
done

cat >"$conf/kubelet.yaml" <<KUBELET
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# The node's pods live under /$cgroup_root in every cgroup v1 hierarchy. The cgroup
# driver is asked of containerd over CRI (cgroupfs: SystemdCgroup = false); the kubelet's
# own cgroupDriver setting is deprecated. From 1.35 the kubelet refuses cgroup v1 unless
# failCgroupV1 is false: a temporary override for this machine's local nodes only
# (production nodes run cgroup v2, docs/local-clusters.md).
cgroupRoot: /$cgroup_root
failCgroupV1: false
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
# Only the API server (its client certificate, signed by the cluster CA) may call the
# kubelet, and what it may do is asked of the API server.
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: /etc/kubernetes/pki/ca.crt}
authorization: {mode: Webhook}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
clusterDomain: cluster.local
resolvConf: ""
failSwapOn: false
serializeImagePulls: false
# The disk is the host's, shared by every node: never evict for it.
evictionHard: {memory.available: "100Mi", nodefs.available: "0%", imagefs.available: "0%"}
imageGCHighThresholdPercent: 100
logging: {verbosity: ${KUBELET_VERBOSITY:-1}}
$taints
KUBELET

cat >"$conf/kube-proxy.yaml" <<PROXY
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
hostnameOverride: $NODE_NAME
clusterCIDR: $CLUSTER_CIDR
clientConnection: {kubeconfig: /etc/kubernetes/kube-proxy.kubeconfig}
# No CAP_SYS_RESOURCE here: leave the host's conntrack table size alone.
conntrack: {maxPerCore: 0}
PROXY

# supervise NAME COMMAND...: runs it, restarting it a second after it exits.
supervise() {
  local name=$1
  shift
  (
    trap 'kill -TERM "$child" 2>/dev/null; wait "$child"; exit 0' TERM
    while :; do
      "$@" >>"$logs/$name.log" 2>&1 &
      child=$!
      wait "$child" && status=0 || status=$?
      say "$name exited ($status); restarting" >>"$logs/$name.log"
      sleep 1
    done
  ) &
  children+=($!)
}

# --- containerd, then the images baked into the node ---------------------------------
supervise containerd containerd --config /etc/containerd/config.toml
for _ in $(seq 1 100); do ctr version >/dev/null 2>&1 && break; sleep 0.1; done
for image in /opt/gvirtus-node/images/*.tar; do
  [ -e "$image" ] && ctr -n k8s.io images import "$image" >/dev/null
done
say "containerd ready"

supervise kube-proxy kube-proxy --config "$conf/kube-proxy.yaml"
supervise kubelet kubelet --config "$conf/kubelet.yaml" \
  --kubeconfig /etc/kubernetes/kubelet.kubeconfig --hostname-override "$NODE_NAME" \
  --node-ip "$node_ip" --node-labels "${NODE_LABELS:-}"
say "kubelet and kube-proxy started (node IP $node_ip, pods $POD_CIDR)"
wait
