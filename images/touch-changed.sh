#!/usr/bin/env bash
# The builder's build folder is a BuildKit cache kept across builds, and ninja rebuilds by
# modification time. A checkout whose files are older than the cache's objects (edited
# before another checkout's build filled the cache) would be taken as built, and its
# images would hold the other checkout's binaries. So the content decides:
#   touch-changed.sh SRC BUILD          before the build: touches every file of SRC whose
#                                       content differs from the last successful build's
#                                       (all of them when there is no record)
#   touch-changed.sh --record SRC BUILD after it: records the contents it was built from
# The record is BUILD/.source-digests (sha1 and path, one line per file).
set -euo pipefail
record=false
if [ "${1:-}" = --record ]; then
  record=true
  shift
fi
src=${1:?touch-changed.sh: SRC} build=${2:?touch-changed.sh: BUILD}
export LC_ALL=C
# One "SHA1  ./PATH" line per file, the lines sorted whole (as comm compares them).
digests() { (cd "$src" && find . -type f -print0 | xargs -0 sha1sum | sort); }
if [ "$record" = true ]; then
  digests >"$build/.source-digests"
  exit 0
fi
now=$(mktemp)
digests >"$now"
if [ -f "$build/.source-digests" ]; then
  # Sorted again: a record may come from an older version of this script.
  changed=$(comm -13 <(sort "$build/.source-digests") "$now" | cut -c43-)
else
  changed=$(cut -c43- "$now")
fi
count=0
while IFS= read -r file; do
  [ -n "$file" ] || continue
  touch "$src/$file"
  count=$((count + 1))
done <<<"$changed"
echo "[touch-changed] $count files changed since the last build of this cache"
rm -f "$now"
