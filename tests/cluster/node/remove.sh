#!/usr/bin/env bash
# Removes a real node and everything it left on the host: its Node object (when the
# API server answers), its container and volume, the routes to its pods on the host and
# on the other nodes, its cgroup folders, its state folder.
#   node/remove.sh CLUSTER NODE
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
# shellcheck source=../versions.sh
source "$here/../versions.sh"
# shellcheck source=lib.sh
source "$here/lib.sh"
cluster=${1:?usage: node/remove.sh CLUSTER NODE}
node=${2:?usage: node/remove.sh CLUSTER NODE}
export PATH=$CLUSTER_BIN:$PATH
container=$(node_container "$cluster" "$node")
state=$(node_state "$cluster" "$node")
if [ -f "$state/index" ]; then
  pod_cidr=$(node_pod_cidr "$cluster" "$node")
  for other in $(cluster_nodes "$cluster"); do
    [ "$other" = "$node" ] || docker exec "$(node_container "$cluster" "$other")" ip route del "$pod_cidr" 2>/dev/null
  done
  ip route del "$pod_cidr" 2>/dev/null
fi
[ -n "${KUBECONFIG:-}" ] && kubectl delete node "$node" --ignore-not-found --wait=false --request-timeout=5s >/dev/null 2>&1
docker rm -f -v "$container" >/dev/null 2>&1
# The kubelet's cgroup root (named after the container), deepest folders first; they empty as the container's
# processes die.
for _ in $(seq 1 20); do
  left=0
  for hierarchy in /sys/fs/cgroup/*; do
    [ -d "$hierarchy/$container" ] && [ ! -L "$hierarchy" ] || continue
    find "$hierarchy/$container" -depth -type d -exec rmdir {} + 2>/dev/null || left=1
  done
  [ "$left" = 0 ] && break
  sleep 0.5
done
[ "$left" = 0 ] || echo "[node $node] some cgroup folders of /$container could not be removed" >&2
rm -rf "$state"
echo "[node $node] removed" >&2
