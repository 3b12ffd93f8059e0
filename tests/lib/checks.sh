# shellcheck shell=bash
# The check vocabulary of the shell tests (sourced): say a step, ok or bad a check
# (bad counts a failure), finish with the verdict (exit 0 or 1).
failures=0
# shellcheck source=log.sh
source "$(dirname "${BASH_SOURCE[0]}")/log.sh"
ok() { printf '  ok    %s\n' "$*" >&2; }
bad() { printf '  FAIL  %s\n' "$*" >&2; failures=$((failures + 1)); }
finish() {
  if [ "$failures" = 0 ]; then
    say "passed"
    exit 0
  fi
  say "FAILED: $failures checks"
  exit 1
}
