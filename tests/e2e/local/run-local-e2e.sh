#!/usr/bin/env bash
# The end-to-end tests on the local control plane: GVirtuS brought up as an operator would
# (local-up.sh), then the shared scenarios (tests/e2e/scenarios, the same ones kind runs)
# and the local ones that kill processes (tests/e2e/local/scenarios). Always stops
# everything. Closes with "N passed, N failed".
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
name=${1:-gvirtus-e2e}
trap 'bash "$here/local-down.sh" "$name"' EXIT
trap 'exit 130' INT TERM
start=$SECONDS
# No backend at first: scenario 50 shows a pod waiting; 60 opts gpu-a in and sees it released.
env_lines=$(E2E_OPT_IN_BACKENDS=false bash "$here/local-up.sh" "$name") || exit 1
eval "$env_lines"
# kwok pods have no containers to exec into.
export E2E_BACKEND_NODE=gpu-a E2E_TIMEOUT=${E2E_TIMEOUT:-90} E2E_NO_EXEC=1
export E2E_ARTIFACTS=${E2E_ARTIFACTS:-$GVIRTUS_E2E_STATE/artifacts}
passed=0 failed=0 names=()
run() {
  local scenario=$1 status
  bash "$scenario"
  status=$?
  case $status in
    0) passed=$((passed + 1)) ;;
    77) ;;
    *) failed=$((failed + 1)); names+=("$(basename "$scenario" .sh)") ;;
  esac
  printf '[e2e-local] %-36s %s\n' "$(basename "$scenario" .sh)" \
    "$(case $status in 0) echo passed ;; 77) echo skipped ;; *) echo FAILED ;; esac)" >&2
}
for scenario in "$here"/../scenarios/[0-9]*.sh; do run "$scenario"; done
# Now both GPU nodes are backends, as an operator opts them in.
kubectl label node gpu-a gpu-b gvirtus.io/backend.allowed=true --overwrite >/dev/null
two_loads() {
  [ "$(kubectl get pods -n gvirtus-system -l app.kubernetes.io/component=backend \
    -o jsonpath='{range .items[*]}{.metadata.annotations.gvirtus\.io/load}{"\n"}{end}' |
    grep -c connections)" = 2 ]
}
for _ in $(seq 1 60); do two_loads && break; sleep 1; done
for scenario in "$here"/scenarios/[0-9]*.sh; do run "$scenario"; done
if [ "$failed" != 0 ]; then
  echo "[e2e-local] failed: ${names[*]}; component logs in $GVIRTUS_E2E_STATE/logs" >&2
  tail -n 20 "$GVIRTUS_E2E_STATE"/logs/*.log >&2
fi
echo "[e2e-local] done in $((SECONDS - start))s"
echo "e2e: $passed passed, $failed failed"
[ "$failed" = 0 ]
