#!/usr/bin/env bash
# Writes the flags reference (docs/flags.md) from each binary's --help, so that it cannot
# say anything the binaries do not.
#   flags-reference.sh [BIN_DIR] > docs/flags.md
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
bin=${1:-$repo/build/bin}
# Every binary the project ships, in the order of the README.
binaries=(gvirtus-labeler gvirtus-device-plugin gvirtus-webhook gvirtus-backend-shim gvirtus-kai-reservation
  kubectl-gvirtus)

cat <<'HEAD'
# Flags of every binary

Generated from each binary's `--help` by `tests/docs/flags-reference.sh` (`make docs`);
`make docs-check` fails when this page and the binaries disagree. Do not edit by hand.

Every component also takes `--help` and `--version`, and exits 0 on a clean shutdown
(SIGTERM, SIGINT), 2 on a bad flag or configuration (with a one-line reason naming the
flag), 1 on other fatal errors. Durations take units: `500ms`, `2s`, `1m`. Booleans take
`--flag`, `--flag=true` or `--flag=false`.

HEAD
for b in "${binaries[@]}"; do
  [ -x "$bin/$b" ] || { echo "flags-reference.sh: $bin/$b is not built (make build)" >&2; exit 1; }
  echo "- [\`$b\`](#$b)"
done
for b in "${binaries[@]}"; do
  printf '\n## %s\n\n```\n' "$b"
  # Help goes to stdout and exits 0; the environment must not leak into the defaults shown.
  env -i PATH=/usr/bin:/bin "$bin/$b" --help
  printf '```\n'
done
