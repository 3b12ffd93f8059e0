#!/usr/bin/env bash
# images/touch-changed.sh against a real ninja: the builder's build folder outlives every
# checkout, and what ninja compiles again must follow the sources' content, not the
# checkout's modification times.
set -euo pipefail
script=${1:?touch_changed_test.sh: path of images/touch-changed.sh}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
src=$work/src build=$work/build
mkdir -p "$build"
failures=0
ok() { echo "ok    $*"; }
bad() { echo "FAIL  $*"; failures=$((failures + 1)); }

# A checkout: every file written anew, as a fresh clone writes it (newer than any object).
checkout() {
  rm -rf "$src" && mkdir -p "$src"
  printf '%s\n' "$1" >"$src/a.cpp"
  printf '%s\n' "$2" >"$src/b.cpp"
}
cat >"$build/build.ninja" <<NINJA
rule copy
  command = cp \$in \$out
build a.o: copy $src/a.cpp
build b.o: copy $src/b.cpp
NINJA
build_once() { bash "$script" "$src" "$build" >/dev/null && ninja -C "$build" | grep -c '^\[' || true; }
record() { bash "$script" --record "$src" "$build"; }
# What ninja would compile now, after touch-changed.sh has run.
pending() {
  bash "$script" "$src" "$build" >/dev/null
  ninja -C "$build" -n | grep -o '[ab]\.o' | sort | tr '\n' ' ' || true
}

checkout A1 B1
[ "$(build_once)" = 2 ] && ok "no record: everything is compiled" || bad "no record: not everything compiled"
record
checkout A1 B1
[ -z "$(pending)" ] && ok "a fresh checkout of the same content compiles nothing" ||
  bad "a fresh checkout of the same content compiles: $(pending)"
checkout A2 B1
[ "$(pending)" = "a.o " ] && ok "one changed file: only it is compiled" ||
  bad "one changed file: compiled $(pending)"
ninja -C "$build" >/dev/null # a build that fails at the end: its objects are not recorded
checkout A1 B1
[ "$(pending)" = "a.o " ] && ok "after a failed build, its changed file is compiled again" ||
  bad "after a failed build of A2, going back to A1 compiles: '$(pending)' (a.o holds A2)"
ninja -C "$build" >/dev/null
[ "$(cat "$build/a.o")" = A1 ] && ok "a.o holds the checkout's content" || bad "a.o holds $(cat "$build/a.o")"
[ "$failures" = 0 ]
