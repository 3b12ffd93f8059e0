#!/usr/bin/env bash
# Stops what real/up.sh started: the real nodes and the control plane (tests/cluster).
#   real/down.sh NAME
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
bash "$repo/tests/cluster/down.sh" "${1:?usage: real/down.sh NAME}"
