#!/usr/bin/env bash
# The network side of a cluster's real nodes.
#   node/network.sh create CLUSTER          the Docker network and the pod range (10.X.0.0/16,
#                                           X not routed on this host yet)
#   node/network.sh kwokctl-config CLUSTER  writes the API server settings real nodes
#                                           need; prints the file's path. With
#                                           NODE_HEARTBEAT_FACTOR, kwokctl's heartbeat
#                                           factor (below)
#   node/network.sh delete CLUSTER          removes every real node, then the network
#   node/network.sh check-clean CLUSTER CIDR  exits 1, naming them, when any of the
#                                           cluster's containers, network,
#                                           routes to CIDR, cgroup folders or mounts are left
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
# shellcheck source=../versions.sh
source "$here/../versions.sh"
# shellcheck source=lib.sh
source "$here/lib.sh"
usage="usage: node/network.sh create|kwokctl-config|delete CLUSTER"
action=${1:?$usage}
cluster=${2:?$usage}
network=$(node_network "$cluster")
state=$(node_state "$cluster")
say() { printf '[cluster %s] %s\n' "$cluster" "$*" >&2; }

case $action in
  create)
    mkdir -p "$state"
    docker network inspect "$network" >/dev/null 2>&1 ||
      docker network create --label "gvirtus.io/cluster=$cluster" "$network" >/dev/null
    if [ ! -s "$state/cluster-cidr" ]; then
      for x in $(seq 244 254) $(seq 200 243); do
        ip route | grep -q "^10\.$x\." && continue
        grep -qx "10.$x.0.0/16" "$repo"/build/cluster/*/nodes/cluster-cidr 2>/dev/null && continue
        echo "10.$x.0.0/16" >"$state/cluster-cidr"
        break
      done
    fi
    say "real-node network $network (gateway $(network_gateway "$cluster")), pods $(cluster_cidr "$cluster")"
    ;;
  kwokctl-config)
    gateway=$(network_gateway "$cluster")
    pki=${KWOK_WORKDIR:-$repo/build/cluster/kwok}/clusters/$cluster/pki
    cat >"$state/kwokctl.yaml" <<YAML
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokctlConfiguration
options:
  # The nodes dial the gateway; pods dial the kubernetes Service's cluster IP.
  kubeApiserverCertSANs: ["$gateway", "10.96.0.1"]
  kubeAuthorization: true
  # kwokctl multiplies the node heartbeat settings by this factor (default 5), to spare
  # its fake nodes' lease renewals: kube-controller-manager then waits 3m20s before it
  # marks a silent node NotReady (--node-monitor-grace-period; upstream's default is 40 s,
  # factor 1). Real kubelets renew their leases on their own schedule either way.
  heartbeatFactor: ${NODE_HEARTBEAT_FACTOR:-5}
componentsPatches:
  - name: kube-apiserver
    extraArgs:
      - {key: advertise-address, value: "$gateway"}
      - {key: service-cluster-ip-range, value: 10.96.0.0/16}
      - {key: kubelet-preferred-address-types, value: InternalIP}
      - {key: kubelet-client-certificate, value: "$pki/admin.crt"}
      - {key: kubelet-client-key, value: "$pki/admin.key"}
      - {key: enable-aggregator-routing, value: "true"}
  # kwokctl's binary runtime lets kwok manage every node: it would write fake pod IPs
  # and phases over the real kubelets' status. Only nodes annotated fake are kwok's.
  - name: kwok-controller
    extraArgs:
      - {key: manage-all-nodes, value: "false", override: true}
      - {key: manage-nodes-with-annotation-selector, value: kwok.x-k8s.io/node=fake}
YAML
    echo "$state/kwokctl.yaml"
    ;;
  delete)
    for node in $(cluster_nodes "$cluster"); do bash "$here/remove.sh" "$cluster" "$node"; done
    # What else joined the network (the local registry, node/add.sh --registry) leaves it,
    # else the network cannot be removed; the registry itself keeps running.
    for container in $(docker network inspect -f '{{range .Containers}}{{.Name}} {{end}}' "$network" 2>/dev/null); do
      docker network disconnect -f "$network" "$container" >/dev/null 2>&1 || true
    done
    docker network rm "$network" >/dev/null 2>&1 || true
    rm -rf "$state"
    ;;
  check-clean)
    cidr_prefix=$(cut -d. -f1-2 <<<"${3:?$usage CIDR}")
    left=()
    [ -z "$(docker ps -aq --filter "label=gvirtus.io/cluster=$cluster")" ] || left+=("containers")
    ! docker network inspect "$network" >/dev/null 2>&1 || left+=("network $network")
    ! ip route | grep -q "^${cidr_prefix//./\.}\." || left+=("routes to $cidr_prefix.0.0/16")
    ! compgen -G "/sys/fs/cgroup/*/gvirtus-$cluster-*" >/dev/null || left+=("cgroup folders")
    ! grep -q "gvirtus-$cluster-" /proc/self/mountinfo || left+=("mounts")
    [ ! -d "$state" ] || left+=("state folder $state")
    if [ ${#left[@]} -gt 0 ]; then
      say "left behind: ${left[*]}"
      exit 1
    fi
    say "nothing of the cluster's real nodes is left on this host"
    ;;
  *) echo "node/network.sh: unknown action \"$action\" ($usage)" >&2; exit 2 ;;
esac
