#!/usr/bin/env bash
# Runs the end-to-end scenarios (tests/e2e/scenarios/NN-*.sh, in order) against the
# cluster in KUBECONFIG, where GVirtuS is installed. Used by tests/kind/run-e2e.sh and by
# the local end-to-end tests; see scenarios/lib.sh for what a scenario may expect.
#   run-scenarios.sh [PATTERN]   (only scenarios whose file name contains PATTERN)
# Environment: E2E_SCENARIO_DIR (default tests/e2e/scenarios).
# Exit 0 when none failed (skips are reported), 1 otherwise.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
: "${KUBECONFIG:?KUBECONFIG must name the cluster under test}"
pattern=${1:-}
passed=() skipped=() failed=()
for scenario in "${E2E_SCENARIO_DIR:-$here/scenarios}"/[0-9]*.sh; do
  name=$(basename "$scenario" .sh)
  [ -z "$pattern" ] || [[ $name == *"$pattern"* ]] || continue
  start=$SECONDS
  set +e
  bash "$scenario"
  status=$?
  set -e
  case $status in
    0) passed+=("$name") ;;
    77) skipped+=("$name") ;;
    *) failed+=("$name") ;;
  esac
  printf '[e2e] %-32s %s (%ss)\n' "$name" \
    "$(case $status in 0) echo passed ;; 77) echo skipped ;; *) echo "FAILED ($status)" ;; esac)" \
    $((SECONDS - start)) >&2
done
printf '[e2e] %d passed, %d skipped, %d failed%s\n' ${#passed[@]} ${#skipped[@]} ${#failed[@]} \
  "${failed[*]:+: ${failed[*]}}" >&2
[ ${#failed[@]} = 0 ]
