# shellcheck shell=bash disable=SC2034  # sourced: its variables are for the sourcing script
# Sourced by the KAI-Scheduler scenarios: the scenarios' library (../scenarios/lib.sh), a
# skip where KAI is not installed, the scenario's namespace, and helpers. Sets `node`
# (E2E_BACKEND_NODE, the backend node the scenarios opt in and out).
# shellcheck source=../scenarios/lib.sh
source "$(dirname "$0")/../scenarios/lib.sh"
node=${E2E_BACKEND_NODE:?}
[ -n "$(k get crd podgroups.scheduling.run.ai -o name 2>/dev/null)" ] || skip "KAI-Scheduler is not installed"
use_test_namespace

field() { jp pod "$1" -n "$test_ns" -o "jsonpath=$2"; }
running() { [ "$(field "$1" '{.status.phase}')" = Running ]; }
no_backend() { [ -z "$(k get pods -n "$system_ns" -l app.kubernetes.io/component=backend -o name)" ]; }

# sole_backend_node: the scenario opts $node in and out; it skips when another node is
# opted in, and at its exit $node is opted in again (after `cleanup`, when the scenario
# defines one).
sole_backend_node() {
  trap 'dump_on_failure; ! declare -F cleanup >/dev/null || cleanup
    k label node "$node" gvirtus.io/backend.allowed=true --overwrite >/dev/null 2>&1 || true
    k delete namespace "$test_ns" --ignore-not-found --wait=false >/dev/null 2>&1 || true' EXIT
  local others
  others=$(k get nodes -l gvirtus.io/backend.allowed=true -o name | grep -v "node/$node$" || true)
  [ -z "$others" ] || skip "other backend nodes are opted in: $others"
}
