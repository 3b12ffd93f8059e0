#!/usr/bin/env bash
# Stops the component processes of local-up.sh and, unless --keep-cluster, the cluster.
#   local-down.sh NAME [--keep-cluster]
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
name=${1:?usage: local-down.sh NAME [--keep-cluster]}
state=$repo/build/e2e/$name
if [ -f "$state/pod-runner.pid" ]; then
  pid=$(cat "$state/pod-runner.pid")
  kill -TERM "$pid" 2>/dev/null
  for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  kill -KILL -- "-$pid" 2>/dev/null
  rm -f "$state/pod-runner.pid"
fi
for f in "$state"/procs/*.pid; do
  [ -e "$f" ] && kill -KILL -- "-$(cat "$f")" 2>/dev/null
  rm -f "$f"
done
[ "${2:-}" = --keep-cluster ] || bash "$repo/tests/cluster/down.sh" "$name"
