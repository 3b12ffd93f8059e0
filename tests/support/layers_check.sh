#!/usr/bin/env bash
# A layered folder (common/, webhook/): each of its subfolders may include only the
# subfolders its row of FOLDER/README.md names under "may include", and never a file at
# FOLDER's own top (the binary's main, run and options sit above every subfolder). Fails
# on any include that runs elsewhere, and on a subfolder the table does not list.
#   layers_check.sh ROOT FOLDER
set -euo pipefail
root=${1:?layers_check.sh ROOT FOLDER} folder=${2:?layers_check.sh ROOT FOLDER}
table=$root/$folder/README.md
status=0
declare -A allowed
# The table's rows: | `part/` | ... | may include |
# shellcheck disable=SC2016  # the backquotes are the table's, not a command
row='^\| `[a-z_]+/` \|'
while IFS='|' read -r _ part _ _ may _; do
  part=$(tr -d ' `/' <<<"$part")
  may=$(tr -d ' ' <<<"$may")
  [ "$may" = nothingofours ] && may=""
  allowed[$part]=",$part,$may,"
done < <(grep -E "$row" "$table")
for dir in "$root/$folder"/*/; do
  part=$(basename "$dir")
  if [ -z "${allowed[$part]:-}" ]; then
    echo "$folder/$part/ is not in $folder/README.md's table"
    status=1
    continue
  fi
  while IFS=: read -r file _ include; do
    target=$(sed -E "s|.*\"$folder/([a-z_]+)/.*|\\1|; s|.*\"$folder/[a-z_]+\\.h\".*|(top)|" <<<"$include")
    if [[ ${allowed[$part]} != *",$target,"* ]]; then
      echo "${file#"$root"/} includes $folder/$target, which $folder/$part/ may not"
      status=1
    fi
  done < <(grep -HnE "^#include \"$folder/" "$dir"*.h "$dir"*.cpp 2>/dev/null || true)
done
[ "$status" = 0 ] && echo "$folder/: ${#allowed[@]} folders, every include within its layer"
exit "$status"
