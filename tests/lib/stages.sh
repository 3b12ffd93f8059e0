#!/usr/bin/env bash
# Runs make targets one after another, as `make test` does, and prints how long each
# took: after each stage, and as a table at the end (or where one fails). The first
# stages build and cache what the later ones share (packages, the C++, the clusters'
# parts), so a cold run shows where its time goes.
#   tests/lib/stages.sh TARGET...
set -uo pipefail
start=$SECONDS
rows=()
table() {
  printf '[test] stage times (%s):\n' "$1"
  printf '    %s\n' "${rows[@]}"
  printf '    %-20s %6ss\n' total $((SECONDS - start))
}
for target in "$@"; do
  began=$SECONDS
  echo "[test] stage $target ..."
  make --no-print-directory "$target"
  status=$?
  rows+=("$(printf '%-20s %6ss' "$target" $((SECONDS - began)))")
  echo "[test] stage $target $([ $status = 0 ] && echo passed || echo FAILED) in $((SECONDS - began))s"
  if [ $status != 0 ]; then
    table "stopped at $target"
    exit $status
  fi
done
table "all passed"
