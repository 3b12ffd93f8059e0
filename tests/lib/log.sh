# shellcheck shell=bash
# Logging and waiting for the shell scripts (sourced):
#   say MESSAGE...                          prints "[TAG HH:MM:SS] MESSAGE" to stderr; TAG is
#                                           log_tag, read at each call (set it before or after
#                                           sourcing; default: the script's name without .sh)
#   wait_until SECONDS DESCRIPTION CMD...   runs CMD quietly once a second until it succeeds
#                                           (returns 0); after SECONDS, says "timed out after
#                                           SECONDSs waiting for DESCRIPTION" and returns 1
say() { printf '[%s %s] %s\n' "${log_tag:-$(basename "$0" .sh)}" "$(date +%H:%M:%S)" "$*" >&2; }

wait_until() {
  local seconds=$1 what=$2 deadline
  shift 2
  deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      say "timed out after ${seconds}s waiting for $what"
      return 1
    fi
    sleep 1
  done
}
