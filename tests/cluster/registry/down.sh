#!/usr/bin/env bash
# Stops what registry/up.sh started: the registry container and the BuildKit daemon.
# Their storage (pushed images, the layer cache) stays in the cache for the next start.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../versions.sh
source "$here/../versions.sh"
state=$CLUSTER_CACHE/image-build
docker rm -f gvirtus-registry >/dev/null 2>&1 || true
if [ -f "$state/buildkitd.pid" ]; then
  pid=$(cat "$state/buildkitd.pid")
  if kill "$pid" 2>/dev/null; then
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  fi
  rm -f "$state/buildkitd.pid"
fi
echo "[registry] stopped" >&2
