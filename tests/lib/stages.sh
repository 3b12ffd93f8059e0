#!/usr/bin/env bash
# Runs make targets one after another, as `make test` does, and prints how long each
# took: after each stage, and as a table at the end (or where one fails). The first
# stages build and cache what the later ones share (packages, the C++, the clusters'
# parts), so a cold run shows where its time goes.
#   tests/lib/stages.sh TARGET...
# Where e2e-test follows unit-test, the image tools (registry, BuildKit, buildx: minutes of
# Go on a fresh machine) build in the background from unit-test on, at nice 19: the stages
# between leave CPU idle while their clusters wait, and e2e-test waits for what is left.
set -uo pipefail
start=$SECONDS
rows=()
prefetch_pid=""
prefetch_log=build/image-tools-prefetch.log
table() {
  printf '[test] stage times (%s):\n' "$1"
  printf '    %s\n' "${rows[@]}"
  printf '    %-20s %6ss\n' total $((SECONDS - start))
}
for target in "$@"; do
  if [ "$target" = unit-test ] && [[ " $* " == *" e2e-test "* ]]; then
    mkdir -p build
    nice -n 19 bash tests/cluster/registry/build.sh >"$prefetch_log" 2>&1 &
    prefetch_pid=$!
    echo "[test] the image tools build in the background ($prefetch_log)"
  fi
  if [ "$target" = e2e-test ] && [ -n "$prefetch_pid" ]; then
    waited=$SECONDS
    if wait "$prefetch_pid"; then
      echo "[test] the image tools were built in the background (waited $((SECONDS - waited))s more)"
    else
      echo "[test] the image tools' background build failed ($prefetch_log): e2e-test builds them"
    fi
    prefetch_pid=""
  fi
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
