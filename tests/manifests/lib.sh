# shellcheck shell=bash disable=SC2034  # sourced: its variables are for the sourcing script
# Shared by the manifest tests (sourced). They run against the local control plane of
#   bash tests/cluster/with-cluster.sh NAME ctest --test-dir build -L integration
# which exports GVIRTUS_KUBECONFIG, GVIRTUS_CLUSTER_BIN and KUBECONFIG. The cluster is
# shared with other integration tests: these create only nodes named mf-*, and remove
# them and everything they applied when they end, however they end.
set -euo pipefail

if [ -z "${GVIRTUS_KUBECONFIG:-}" ]; then
  echo "FAIL: GVIRTUS_KUBECONFIG is not set: run the integration tests through" >&2
  echo "      bash tests/cluster/with-cluster.sh NAME ctest --test-dir build -L integration" >&2
  exit 1
fi
repo=${GVIRTUS_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
export KUBECONFIG=$GVIRTUS_KUBECONFIG
[ -n "${GVIRTUS_CLUSTER_BIN:-}" ] && export PATH=$GVIRTUS_CLUSTER_BIN:$PATH
command -v kubectl >/dev/null || { echo "FAIL: no kubectl (GVIRTUS_CLUSTER_BIN unset?)" >&2; exit 1; }
manifests=$repo/manifests
add_node=$repo/tests/cluster/add-node.sh
ns=gvirtus-system

# shellcheck source=../lib/checks.sh
source "$repo/tests/lib/checks.sh"

# Removes everything the manifests create and waits until it is gone, so that a test
# after this one may create gvirtus-system again.
delete_manifests() {
  k delete -k "$manifests" --ignore-not-found --wait=true --timeout=120s >/dev/null 2>&1 ||
    k delete namespace "$ns" --ignore-not-found --wait=true --timeout=120s >/dev/null 2>&1 || true
}

delete_test_nodes() {
  local nodes
  mapfile -t nodes < <(k get nodes -o name 2>/dev/null | grep '^node/mf-' || true)
  [ "${#nodes[@]}" = 0 ] || k delete "${nodes[@]}" --wait=true --timeout=60s >/dev/null 2>&1 || true
}

