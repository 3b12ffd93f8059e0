#!/usr/bin/env bash
# No function of the product's C++ is longer than MAX lines (80 unless given), counted from
# the first line of its signature to its closing brace, lambdas within it included. A
# definition is a line ending in '{' whose signature (the lines since the last ';', '{' or
# '}') holds a parameter list and starts with no statement keyword; a lambda or an
# initialiser ('= ... {') is part of the function around it. Braces are counted as
# characters, so a brace in a string or a character literal counts too: none of ours is
# unbalanced on one line. Prints the longest few, and fails naming each one over MAX.
#   function_length_check.sh ROOT [MAX]
set -euo pipefail
root=${1:?function_length_check.sh ROOT [MAX]} max=${2:-80}
cd "$root"
folders=(common webhook backend-shim device-plugin labeler kai-reservation kubectl-gvirtus)
mapfile -t files < <(find "${folders[@]}" -type f \( -name '*.cpp' -o -name '*.h' \) | sort)
[ "${#files[@]}" -gt 0 ] || { echo "function_length_check.sh: no C++ under $root"; exit 1; }
awk -v max="$max" '
function braces(text,   opened, closed) {
  opened = gsub(/\{/, "{", text); closed = gsub(/\}/, "}", text)
  return opened - closed
}
FNR == 1 { signature = ""; first = 0; inside = 0 }
inside {
  depth += braces($0)
  if (depth <= 0) {
    length_ = FNR - first + 1
    total++
    if (length_ > max) { over++; printf "%s:%d %s: %d lines (more than %d)\n", FILENAME, first, name, length_, max }
    if (length_ > longest) { longest = length_; where = FILENAME ":" first " " name }
    inside = 0; signature = ""
  }
  next
}
{
  line = $0
  trimmed = line; sub(/^[ \t]+/, "", trimmed); sub(/[ \t]+$/, "", trimmed)
  if (trimmed == "" || trimmed ~ /^(\/\/|#)/) { signature = ""; next }
  if (signature == "") { first = FNR }
  signature = signature " " trimmed
  if (trimmed ~ /\{$/) {
    head = signature; sub(/\(.*/, "", head)
    if (signature ~ /\(.*\)/ && signature !~ /^ *(if|for|while|switch|else|do|try|catch|return|namespace|struct|class|enum|union)[^A-Za-z0-9_]/ &&
        head !~ /=/ && trimmed !~ /^[\[}]/ && trimmed !~ /\][ \t]*(\(.*\))?[ \t]*(mutable[ \t]*)?(->[^{]*)?\{$/) {
      name = head; sub(/.*[ \t*&]/, "", name)
      inside = 1; depth = braces(line)
      if (depth <= 0) { inside = 0; signature = "" }
      next
    }
    signature = ""
    next
  }
  if (trimmed ~ /[;}]$/) { signature = "" }
}
END {
  printf "function length: %d functions, the longest %d lines (%s); %d over %d\n", total, longest, where, over, max
  exit over > 0
}
' "${files[@]}"
