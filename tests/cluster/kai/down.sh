#!/usr/bin/env bash
# Stops what kai/up.sh NAME started.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
state=$repo/build/cluster/${1:?usage: kai/down.sh NAME}/kai
# Its webhooks fail closed: unregister them before their server stops (when the cluster
# still answers; KUBECONFIG is the cluster's).
if [ -n "${KUBECONFIG:-}" ] && [ -e "$state/admission.pid" ]; then
  # shellcheck source=../versions.sh
  source "$here/../versions.sh"
  "$CLUSTER_BIN/kubectl" delete mutatingwebhookconfiguration,validatingwebhookconfiguration \
    kai-admission --ignore-not-found --request-timeout=10s >/dev/null 2>&1
fi
for pidfile in "$state"/*.pid; do
  [ -e "$pidfile" ] || continue
  pid=$(cat "$pidfile")
  kill -TERM "$pid" 2>/dev/null
  for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null
  rm -f "$pidfile"
done
