# shellcheck shell=bash disable=SC2034  # sourced: its variables are for the sourcing script
# Shared by the end-to-end scenarios (sourced). A scenario is a bash script run against
# an installed GVirtuS cluster: it takes the cluster from KUBECONFIG, creates what it
# needs in its own namespace, removes it when it ends, and exits 0 (passed), 77
# (skipped, with the reason on stderr) or anything else (failed). The same scenarios run
# on kind (tests/kind/run-e2e.sh) and on the local control plane; only cluster creation
# and deployment differ. Optional environment:
#   E2E_BACKEND_NODE  a node the harness lets become a backend: scenarios label it
#                     gvirtus.io/backend.allowed=true and nvidia.com/gpu.present=true
#                     (without it, scenarios that need a backend skip)
#   E2E_TEST_IMAGE    image with a shell, cat, sleep, tcp-echo-probe and
#                     gvirtus-frontend-standin (default gvirtus-k8s/testapp:0.1.0,
#                     tests/e2e/testapp)
#   E2E_TIMEOUT       seconds to wait for each condition (default 120)
#   E2E_NODE_CONTAINER_PREFIX
#                     set where nodes are Docker containers (real-node harness:
#                     gvirtus-CLUSTER-; kind: empty): the container of node N is PREFIX+N
#   E2E_ARTIFACTS     folder for dumps on failure
set -euo pipefail
: "${KUBECONFIG:?KUBECONFIG must name the cluster under test}"
export KUBECONFIG
scenario=$(basename "$0" .sh)
system_ns=gvirtus-system
test_image=${E2E_TEST_IMAGE:-gvirtus-k8s/testapp:0.1.0}
timeout_s=${E2E_TIMEOUT:-120}
test_ns=e2e-$(tr -c 'a-z0-9\n' '-' <<<"$scenario" | cut -c1-50)
failures=0

log_tag=$scenario
# say, ok, bad, k (its own finish is below).
# shellcheck source=../../lib/checks.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../lib/checks.sh"
skip() { say "SKIP: $*"; exit 77; }

# eventually DESCRIPTION COMMAND...: retries COMMAND (quietly) until it succeeds or
# E2E_TIMEOUT passes; reports either way and returns its status.
eventually() {
  local what=$1 deadline=$((SECONDS + timeout_s))
  shift
  # Within the retries a failed read only means "not yet" (the API server may be
  # restarting): jp_lenient keeps jp from counting it.
  until jp_lenient=1 "$@" >/dev/null 2>&1; do
    if [ $SECONDS -ge $deadline ]; then bad "$what (after ${timeout_s}s)"; return 1; fi
    sleep 2
  done
  ok "$what"
}

# A fresh namespace for this scenario, deleted when it exits.
use_test_namespace() {
  k delete namespace "$test_ns" --ignore-not-found --wait=true --timeout=120s >/dev/null 2>&1 || true
  k create namespace "$test_ns" >/dev/null
  trap 'dump_on_failure; k delete namespace "$test_ns" --ignore-not-found --wait=false >/dev/null 2>&1 || true' EXIT
}

dump_on_failure() {
  [ "$failures" != 0 ] && [ -n "${E2E_ARTIFACTS:-}" ] || return 0
  mkdir -p "$E2E_ARTIFACTS/$scenario"
  k get pods,events -n "$test_ns" -o wide >"$E2E_ARTIFACTS/$scenario/namespace.txt" 2>&1 || true
  k get pods -n "$test_ns" -o yaml >"$E2E_ARTIFACTS/$scenario/pods.yaml" 2>&1 || true
}

# A pod that sleeps; extra lines of YAML for metadata (labels/annotations) and
# container fields may be given.
# test_pod NAME METADATA_YAML CONTAINER_YAML
test_pod() {
  cat <<YAML
apiVersion: v1
kind: Pod
metadata:
  name: $1
  namespace: $test_ns
$2
spec:
  terminationGracePeriodSeconds: 1
  containers:
    - name: app
      image: $test_image
      command: ["sleep", "3600"]
$3
YAML
}

# node_container NODE: the node's Docker container, or nothing (then scenarios that
# restart a node's processes skip).
node_container() {
  [ -n "${E2E_NODE_CONTAINER_PREFIX+set}" ] || return 1
  local container=$E2E_NODE_CONTAINER_PREFIX$1
  docker inspect "$container" >/dev/null 2>&1 && echo "$container"
}

# jp RESOURCE... -o jsonpath=...: the value, empty when the object does not exist. Any
# other failure to read is a failed check (it is called in $(...), so the count goes
# through a file): a negative check must not pass because a read failed.
read_failures=$(mktemp)
jp() {
  local out err
  err=$(mktemp)
  if out=$(k get "$@" 2>"$err"); then
    rm -f "$err"
    printf '%s' "$out"
    return 0
  fi
  if [ -z "${jp_lenient:-}" ] && ! grep -q NotFound "$err"; then
    printf '  FAIL  kubectl get %s: %s\n' "$*" "$(head -c 300 "$err")" >&2
    echo x >>"$read_failures"
  fi
  rm -f "$err"
  return 0
}

finish() {
  failures=$((failures + $(grep -c . "$read_failures" || true)))
  rm -f "$read_failures"
  if [ "$failures" = 0 ]; then say "passed"; exit 0; fi
  say "FAILED: $failures checks"
  exit 1
}

# start_log_collector DIR: what every container of the test namespace logs, with its
# time, appended to DIR/POD.log until stop_log_collector. Each pod's log is followed
# (kubectl logs -f) from the moment the pod is listed, so the lines a container writes
# just before its pod is deleted are kept: polling missed them when a pod lived only a
# few seconds past its last line. A restarted container is followed again (its lines
# may repeat: readers sort -u). A deleted pod's file stays.
start_log_collector() {
  local dir=$1
  (
    trap 'kill $(jobs -p) 2>/dev/null; exit 0' TERM
    declare -A followed=()
    while :; do
      for pod in $(k get pods -n "$test_ns" -o 'jsonpath={.items[*].metadata.name}' 2>/dev/null); do
        [ -z "${followed[$pod]:-}" ] || continue
        followed[$pod]=1
        follow_pod_log "$dir/$pod.log" "$pod" &
      done
      sleep 1
    done
  ) &
  log_collector=$!
}
# follow_pod_log FILE POD: its containers' lines until the pod is gone.
follow_pod_log() {
  local stream=""
  trap '[ -z "$stream" ] || kill "$stream" 2>/dev/null; exit 0' TERM
  while [ -n "$(k get pod "$2" -n "$test_ns" -o 'jsonpath={.metadata.name}' 2>/dev/null)" ]; do
    kubectl logs -f -n "$test_ns" "$2" --timestamps >>"$1" 2>/dev/null &
    stream=$!
    wait "$stream" || true
    stream=""
    sleep 1
  done
}
stop_log_collector() {
  [ -z "${log_collector:-}" ] || kill "$log_collector" 2>/dev/null || true
  log_collector=""
}
