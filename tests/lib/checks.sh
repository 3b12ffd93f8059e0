# shellcheck shell=bash
# The check vocabulary of the shell tests (sourced), the one every test script uses: say a
# step and wait_until a fact (log.sh), ok or bad a check (bad counts a failure), k for
# kubectl with a bound on each request, finish with the verdict (exit 0 or 1).
failures=0
# shellcheck source=log.sh
source "$(dirname "${BASH_SOURCE[0]}")/log.sh"
ok() { printf '  ok    %s\n' "$*" >&2; }
bad() { printf '  FAIL  %s\n' "$*" >&2; failures=$((failures + 1)); }
k() { kubectl --request-timeout=30s "$@"; }
finish() {
  if [ "$failures" = 0 ]; then
    say "passed"
    exit 0
  fi
  say "FAILED: $failures checks"
  exit 1
}
