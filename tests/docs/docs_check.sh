#!/usr/bin/env bash
# The documentation stays true and self-contained:
# 1. docs/flags.md is what tests/docs/flags-reference.sh makes from the built binaries;
# 2. every relative link in a tracked Markdown file points at a file or folder inside the
#    repository (a user who clones it has nothing else);
# 3. nothing tracked points at the workspace outside the repository (its shared folder, a design page that only lives there, ...).
#   docs_check.sh [BIN_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
bin=${1:-$repo/build/bin}
cd "$repo"
failures=0
bad() { printf '  FAIL  %s\n' "$*" >&2; failures=$((failures + 1)); }

generated=$(mktemp)
trap 'rm -f "$generated"' EXIT
if bash "$here/flags-reference.sh" "$bin" >"$generated"; then
  if ! diff -u docs/flags.md "$generated" >&2; then
    bad "docs/flags.md differs from the binaries' --help (above): run make docs and commit it"
  fi
else
  bad "could not generate the flags reference"
fi

links=0
while IFS= read -r file; do
  dir=$(dirname "$file")
  # [text](target) and [text](target "title"); images too.
  while IFS= read -r target; do
    target=${target%% *}
    target=${target%%#*}
    case $target in
      '' | http://* | https://* | mailto:*) continue ;;
    esac
    links=$((links + 1))
    resolved=$(realpath -m "$dir/$target")
    case $resolved in
      "$repo" | "$repo"/*) [ -e "$resolved" ] || bad "$file: link to $target: no such file" ;;
      *) bad "$file: link to $target points outside the repository" ;;
    esac
  done < <(grep -oE '\]\([^)]+\)' "$file" | sed -E 's/^\]\((.*)\)$/\1/')
done < <(git ls-files --cached --others --exclude-standard '*.md')

if hits=$(git grep --untracked -nE '\.\./shared|/work/(shared|main|wt-)|DESIGN\.md' -- . ':!tests/docs/docs_check.sh'); then
  bad "tracked files point outside the repository:"
  printf '%s\n' "$hits" >&2
fi

if [ "$failures" != 0 ]; then
  echo "[docs-check] FAILED: $failures" >&2
  exit 1
fi
echo "[docs-check] flags reference current, $links relative links inside the repository"
