#!/usr/bin/env bash
# Runs a command against a fresh local control plane named $1, then always stops it.
#   with-cluster.sh NAME COMMAND [ARGS...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
name=${1:?usage: with-cluster.sh NAME COMMAND...}
shift
bash "$here/down.sh" "$name" 2>/dev/null || true
trap 'bash "$here/down.sh" "$name"' EXIT
trap 'exit 130' INT TERM
env_lines=$(bash "$here/up.sh" "$name")
eval "$env_lines"
"$@"
