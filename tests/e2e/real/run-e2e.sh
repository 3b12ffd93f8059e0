#!/usr/bin/env bash
# The end-to-end tests on real nodes: GVirtuS installed as an operator would (real/up.sh),
# then the shared scenarios (tests/e2e/scenarios, the same ones kind runs) and the ones
# that need this harness (tests/e2e/real/scenarios: they restart kubelets, kill
# processes, restart the API server), then with NVIDIA KAI-Scheduler (tests/e2e/kai),
# then reinstalled from the release's OCI chart in the loopback registry
# (install-from-oci.sh, which needs HELM).
# Always stops everything. Closes with
# "e2e: N passed, N failed".
#   real/run-e2e.sh [NAME] [PATTERN]   (PATTERN: only scenarios whose name contains it)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
log_tag="e2e-real"
# shellcheck source=../../lib/log.sh
source "$repo/tests/lib/log.sh"
name=${1:-gvirtus-e2e}
pattern=${2:-}
stopped=0 warm_pid=""
trap '[ -z "$warm_pid" ] || kill -- "-$warm_pid" 2>/dev/null; [ "$stopped" = 1 ] || bash "$here/down.sh" "$name"' EXIT
trap 'exit 130' INT TERM
start=$SECONDS
# No backend at first: scenario 50 shows a pod waiting; 60 opts gpu-a in and sees it released.
env_lines=$(E2E_OPT_IN_BACKENDS=false bash "$here/up.sh" "$name") || exit 1
eval "$env_lines"
export GVIRTUS_CLUSTER_NAME E2E_TEST_IMAGE
export E2E_BACKEND_NODE=gpu-a E2E_BACKEND2_NODE=gpu-b E2E_FRONTEND_NODE=fe-a
export E2E_NODE_CONTAINER_PREFIX=gvirtus-$GVIRTUS_CLUSTER_NAME- E2E_TIMEOUT=${E2E_TIMEOUT:-120} E2E_BACKEND_ECHO=1
export E2E_ARTIFACTS=${E2E_ARTIFACTS:-$GVIRTUS_E2E_STATE/artifacts}
passed=0 failed=0 names=()
# NetworkPolicy enforced on every node (kube-network-policies), as in a shared cluster.
if bash "$repo/tests/cluster/netpol/up.sh"; then
  export E2E_NETWORK_POLICY=1
else
  failed=$((failed + 1)); names+=("network-policy-agent")
fi
# The release of install-from-oci (last) builds every platform. Those other than the build
# machine's compile now, into BuildKit's cache, while the scenarios mostly wait: buildkitd
# runs at nice 19 (tests/cluster/registry/up.sh), so they take only the CPU left idle.
if [ -n "${HELM:-}" ] && { [ -z "$pattern" ] || [[ install-from-oci == *"$pattern"* ]]; }; then
  build_platform=linux/$(docker version -f '{{.Server.Arch}}')
  others=$(tr ',' '\n' <<<"${PLATFORMS:-linux/amd64,linux/arm64}" | grep -vx "$build_platform" | tr '\n' ' ')
  warm_log=$GVIRTUS_E2E_STATE/logs/release-warm.log
  # A session of its own, so that an early exit stops the whole build (the trap above).
  # shellcheck disable=SC2016  # expanded by the inner bash
  setsid bash -c 'for platform in $1; do
      bash "$2/images/build.sh" --cache-only "$platform" labeler device-plugin webhook backend kai-reservation || exit 1
    done' warm "$others" "$repo" >"$warm_log" 2>&1 &
  warm_pid=$!
  say "the release's images for ${others:-no other platform} compile in the background ($warm_log)"
fi
run() {
  local scenario=$1 status began=$SECONDS
  [ -z "$pattern" ] || [[ $(basename "$scenario") == *"$pattern"* ]] || return 0
  bash "$scenario"
  status=$?
  case $status in
    0) passed=$((passed + 1)) ;;
    77) ;;
    *) failed=$((failed + 1)); names+=("$(basename "$scenario" .sh)") ;;
  esac
  printf '[e2e-real] %-36s %s (%ss)\n' "$(basename "$scenario" .sh)" \
    "$(case $status in 0) echo passed ;; 77) echo skipped ;; *) echo FAILED ;; esac)" \
    $((SECONDS - began)) >&2
}
for scenario in "$here"/../scenarios/[0-9]*.sh; do run "$scenario"; done
# Now both GPU nodes are backends, as an operator opts them in.
kubectl label node gpu-a gpu-b gvirtus.io/backend.allowed=true --overwrite >/dev/null
two_loads() {
  [ "$(kubectl get pods -n gvirtus-system -l app.kubernetes.io/component=backend \
    -o jsonpath='{range .items[*]}{.metadata.annotations.gvirtus\.io/load}{"\n"}{end}' |
    grep -c connections)" = 2 ]
}
wait_until 120 "both backends publishing gvirtus.io/load" two_loads
for scenario in "$here"/scenarios/[0-9]*.sh; do run "$scenario"; done
# KAI-Scheduler beside the cluster, the webhook given its two KAI flags (overlay-kai),
# one backend node left opted in.
kubectl label node gpu-b gvirtus.io/backend.allowed=false --overwrite >/dev/null
# With a PATTERN, KAI-Scheduler is set up only when one of its scenarios is wanted.
wanted() {
  [ -z "$pattern" ] && return 0
  local f
  for f in "$1"/*; do [[ ${f##*/} =~ $pattern ]] && return 0; done
  return 1
}
if ! wanted "$here/../kai"; then
  :
elif bash "$repo/tests/cluster/kai/up.sh" "$name" &&
    kubectl apply -k "$repo/tests/e2e/overlay-kai" >/dev/null &&
    kubectl rollout status deployment/gvirtus-webhook -n gvirtus-system --timeout=180s >/dev/null &&
    kubectl rollout status daemonset/gvirtus-backend -n gvirtus-system --timeout=180s >/dev/null; then
  for scenario in "$here"/../kai/[0-9]*.sh; do run "$scenario"; done
else
  failed=$((failed + 1)); names+=("kai-scheduler-setup")
fi
# Last: the release as operators install it, from the OCI chart in the loopback registry.
if [ -n "$pattern" ] && [[ install-from-oci != *"$pattern"* ]]; then
  :
elif [ -n "${HELM:-}" ]; then
  if [ -n "$warm_pid" ]; then
    waited=$SECONDS
    wait "$warm_pid" && say "the release's other platforms were built beside the scenarios (waited $((SECONDS - waited))s more)" ||
      say "building the release's other platforms beforehand failed ($warm_log): the release builds them"
    warm_pid=""
  fi
  run "$here/install-from-oci.sh"
else
  echo "[e2e-real] install-from-oci skipped: HELM is not set (make e2e-test sets it)" >&2
fi
if [ "$failed" != 0 ]; then
  echo "[e2e-real] failed: ${names[*]}; artifacts in $E2E_ARTIFACTS" >&2
  mkdir -p "$E2E_ARTIFACTS"
  kubectl get pods -A -o wide >"$E2E_ARTIFACTS/pods.txt" 2>&1
  for pod in $(kubectl get pods -n gvirtus-system -o name 2>/dev/null); do
    kubectl logs -n gvirtus-system "$pod" --tail=30 --prefix 2>&1 | tail -n 30 >&2
  done
fi
# Last check: stopping the cluster leaves nothing of its nodes on this host.
cidr=$(cat "$(dirname "$GVIRTUS_KUBECONFIG")/nodes/cluster-cidr")
bash "$here/down.sh" "$name"
stopped=1
if bash "$repo/tests/cluster/node/network.sh" check-clean "$name" "$cidr"; then
  passed=$((passed + 1))
  printf '[e2e-real] %-36s passed\n' 99-nothing-left-behind >&2
else
  failed=$((failed + 1))
  printf '[e2e-real] %-36s FAILED\n' 99-nothing-left-behind >&2
fi
echo "[e2e-real] done in $((SECONDS - start))s"
echo "e2e: $passed passed, $failed failed"
[ "$failed" = 0 ]
