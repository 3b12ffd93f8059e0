#!/usr/bin/env bash
# Stops the local control plane $1, every process it started and its real nodes.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=versions.sh
source "$here/versions.sh"
name=${1:?usage: down.sh NAME}
export PATH=$CLUSTER_BIN:$PATH
export KWOK_WORKDIR=${KWOK_WORKDIR:-$repo/build/cluster/kwok}
bash "$here/kai/down.sh" "$name"
# Real nodes first (their routes and cgroups live on this host), then the control plane.
if command -v docker >/dev/null && { docker network inspect "gvirtus-$name" >/dev/null 2>&1 ||
    [ -n "$(docker ps -aq --filter "label=gvirtus.io/cluster=$name" 2>/dev/null)" ]; }; then
  bash "$here/node/network.sh" delete "$name"
fi
if [ -d "$KWOK_WORKDIR/clusters/$name" ]; then
  kwokctl --name "$name" delete cluster >/dev/null 2>&1 ||
    echo "[cluster $name] kwokctl delete failed; killing leftovers" >&2
fi
# Belt and braces: nothing of this cluster may outlive it.
pkill -f -- "$KWOK_WORKDIR/clusters/$name/" 2>/dev/null || true
rm -rf "$KWOK_WORKDIR/clusters/$name"
echo "[cluster $name] stopped" >&2
