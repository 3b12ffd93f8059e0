#!/usr/bin/env bash
# Restarts only the kube-apiserver of a kwokctl cluster of the binary runtime, the way
# kwokctl started it, and waits until it answers /readyz. etcd, the controllers and kwok
# keep running, as they would while a real API server restarts.
#
#   restart-apiserver.sh [--down SECONDS] [--graceful] NAME
#
#   --down SECONDS  stay down that long before starting again (default 0)
#   --graceful      SIGTERM and wait for exit (default: SIGKILL, as a crash)
#
# kwokctl v0.7.0 has no command for one component (`kwokctl stop cluster` stops them
# all), but its binary runtime is simple: each component runs detached (setsid) in
# the cluster folder, with its pid in pids/<component>.pid (no newline) and its output in
# logs/<component>.log, and its binary, arguments and environment are recorded in
# kwok.yaml. This script kills the pid and starts the same command the same way, then
# rewrites the pid file so that `kwokctl delete cluster` still stops it.
set -euo pipefail

down=0
signal=KILL
while [ $# -gt 1 ]; do
  case $1 in
    --down) down=$2; shift 2 ;;
    --graceful) signal=TERM; shift ;;
    *) break ;;
  esac
done
[ $# -eq 1 ] || { echo "usage: $0 [--down SECONDS] [--graceful] NAME" >&2; exit 2; }
name=$1
workdir=${KWOK_WORKDIR:-$HOME/.kwok}
dir=$workdir/clusters/$name
config=$dir/kwok.yaml
pidfile=$dir/pids/kube-apiserver.pid
[ -f "$config" ] || { echo "restart-apiserver: no cluster $name under $workdir ($config missing)" >&2; exit 1; }

log_tag="restart-apiserver"
# shellcheck source=../lib/log.sh
source "$(dirname "$0")/../lib/log.sh"

# Prints the kube-apiserver component of kwok.yaml as NUL-separated fields:
# binary, workDir, then "ENV=value" items prefixed with "env:", then the arguments.
component() {
  awk -v want=kube-apiserver '
    function unquote(s) {
      if (s ~ /^".*"$/) { s = substr(s, 2, length(s) - 2); gsub(/\\"/, "\"", s); gsub(/\\\\/, "\\", s) }
      else if (s ~ /^'\''.*'\''$/) { s = substr(s, 2, length(s) - 2); gsub(/'\'''\''/, "'\''", s) }
      return s
    }
    function flush() {
      if (cname == want) {
        printf "%s%c%s%c", binary, 0, workdir, 0
        for (i = 1; i <= nenv; i++) printf "env:%s=%s%c", envname[i], envvalue[i], 0
        for (i = 1; i <= nargs; i++) printf "%s%c", args[i], 0
        found = 1
      }
      cname = ""; binary = ""; workdir = ""; nargs = 0; nenv = 0; key = ""
    }
    /^[^ -]/ { if (incomp) flush(); incomp = ($0 ~ /^components:/); next }
    !incomp { next }
    /^- / { flush(); sub(/^- /, "  ") }
    /^  [A-Za-z]+:/ {
      key = $1; sub(/:$/, "", key)
      value = $0; sub(/^  [A-Za-z]+:[ ]*/, "", value)
      if (key == "name") cname = unquote(value)
      else if (key == "binary") binary = unquote(value)
      else if (key == "workDir") workdir = unquote(value)
      next
    }
    /^  - / && key == "args" { v = $0; sub(/^  - /, "", v); args[++nargs] = unquote(v); next }
    /^  - name:/ && key == "envs" { v = $0; sub(/^  - name:[ ]*/, "", v); envname[++nenv] = unquote(v); next }
    /^    value:/ && key == "envs" { v = $0; sub(/^    value:[ ]*/, "", v); envvalue[nenv] = unquote(v); next }
    END { if (incomp) flush(); if (!found) exit 1 }
  ' "$config"
}

fields=()
while IFS= read -r -d '' f; do fields+=("$f"); done < <(component) || true
[ ${#fields[@]} -ge 2 ] || { echo "restart-apiserver: no kube-apiserver component in $config" >&2; exit 1; }
binary=${fields[0]}
cwd=${fields[1]:-$dir}
envs=()
args=()
for f in "${fields[@]:2}"; do
  if [[ $f == env:* ]]; then envs+=("${f#env:}"); else args+=("$f"); fi
done
[ -x "$binary" ] || { echo "restart-apiserver: $binary is not executable" >&2; exit 1; }

port=""
for a in "${args[@]}"; do
  case $a in --secure-port=*) port=${a#--secure-port=} ;; esac
done
[ -n "$port" ] || { echo "restart-apiserver: no --secure-port in the kube-apiserver arguments" >&2; exit 1; }

# A killed process whose parent is gone may stay a zombie when PID 1 does not reap:
# `kill -0` still succeeds then, so look at its state.
alive() { [ -r "/proc/$1/stat" ] && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]; }

start=$SECONDS
if [ -f "$pidfile" ]; then
  pid=$(tr -d '[:space:]' <"$pidfile")
  if [ -n "$pid" ] && alive "$pid"; then
    say "stopping kube-apiserver (pid $pid, SIG$signal)"
    kill -s "$signal" "$pid" 2>/dev/null || true
    for _ in $(seq 1 600); do alive "$pid" || break; sleep 0.1; done
    if alive "$pid"; then
      say "still running after 60s; SIGKILL"
      kill -s KILL "$pid" 2>/dev/null || true
      for _ in $(seq 1 100); do alive "$pid" || break; sleep 0.1; done
    fi
  fi
  rm -f "$pidfile"
fi
# The port must be free before the new process binds it.
for _ in $(seq 1 100); do
  ss -Htln "sport = :$port" 2>/dev/null | grep -q . || break
  sleep 0.1
done
if [ "$down" != 0 ]; then
  say "down for ${down}s"
  sleep "$down"
fi

say "starting kube-apiserver on port $port"
(
  cd "$cwd"
  exec env "${envs[@]}" setsid "$binary" "${args[@]}" </dev/null >>"$dir/logs/kube-apiserver.log" 2>&1
) &
newpid=$!
printf '%s' "$newpid" >"$pidfile"

# /readyz needs a client certificate: use the admin one kwokctl generated.
for _ in $(seq 1 600); do
  if ! alive "$newpid"; then
    echo "restart-apiserver: kube-apiserver exited; see $dir/logs/kube-apiserver.log" >&2
    exit 1
  fi
  if curl -fsS --max-time 2 --cacert "$dir/pki/ca.crt" --cert "$dir/pki/admin.crt" \
      --key "$dir/pki/admin.key" "https://127.0.0.1:$port/readyz" >/dev/null 2>&1; then
    say "kube-apiserver ready (pid $newpid) after $((SECONDS - start))s"
    exit 0
  fi
  sleep 0.2
done
echo "restart-apiserver: kube-apiserver not ready after 120s; see $dir/logs/kube-apiserver.log" >&2
exit 1
