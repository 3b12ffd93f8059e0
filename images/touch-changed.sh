#!/usr/bin/env bash
# The builder's build folder is a BuildKit cache kept across builds, and ninja rebuilds by
# modification time, which says nothing across checkouts: a checkout older than the cache's
# objects (edited before another checkout's build filled the cache) would be taken as
# built, and its images would hold the other checkout's binaries; a fresh clone, newer than
# every object, would compile everything again. So the content decides:
#   touch-changed.sh SRC BUILD          before the build: touches every file of SRC whose
#                                       content differs from the last successful build's
#                                       (all of them when there is no record), and dates
#                                       every other file back to 2000, before any object
#   touch-changed.sh --record SRC BUILD after it: records the contents it was built from
# The record is BUILD/.source-digests (sha1 and path, one line per file). Before the build
# it loses the lines of the changed files: a build that fails after compiling some of them
# leaves objects the record does not vouch for, and the next build touches those files
# again.
set -euo pipefail
record=false
if [ "${1:-}" = --record ]; then
  record=true
  shift
fi
src=${1:?touch-changed.sh: SRC} build=${2:?touch-changed.sh: BUILD}
export LC_ALL=C
# One "SHA1  ./PATH" line per file, the lines sorted whole (as comm compares them); a BUILD
# inside SRC is not a source.
inside=${build#"$src"/}
[ "$inside" != "$build" ] || inside=""
digests() {
  (cd "$src" && find . ${inside:+-path "./$inside" -prune -o} -type f -print0 | xargs -0 sha1sum | sort)
}
if [ "$record" = true ]; then
  digests >"$build/.source-digests"
  exit 0
fi
now=$(mktemp)
digests >"$now"
kept=$(mktemp)
if [ -f "$build/.source-digests" ]; then
  # Sorted again: a record may come from an older version of this script.
  comm -12 <(sort "$build/.source-digests") "$now" >"$kept"
fi
changed=$(comm -13 "$kept" "$now" | cut -c43-)
cp "$kept" "$build/.source-digests"
count=0
while IFS= read -r file; do
  [ -n "$file" ] || continue
  touch "$src/$file"
  count=$((count + 1))
done <<<"$changed"
# Unchanged files: older than every object built from them, whenever they were checked out.
cut -c43- "$kept" | (cd "$src" && xargs -r -d '\n' touch -d 2000-01-01T00:00:00Z)
echo "[touch-changed] $count files changed since the last build of this cache," \
  "$(wc -l <"$kept") unchanged"
rm -f "$now" "$kept"
