#!/usr/bin/env bash
# `make bench`: builds what the benchmarks need, runs them all and writes
# docs/performance.md and docs/performance.png (gnuplot). Not part of `make test`.
#   tests/bench/run.sh
# Environment: BUILD_DIR (default build), JOBS (default 2), and each benchmark's own knobs
# (BENCH_SECONDS, BENCH_CLIENTS, BENCH_PODS, BENCH_WAITING_PODS, ...: see the header of
# each tests/bench/*_bench.cpp). Every figure in the page comes from one of the commands
# it names; this script only runs them and puts their figures together.
# Exit: 0 when every benchmark ran and passed its checks; 1 otherwise (the page is written
# anyway, saying which benchmark failed).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cd "$repo" || exit 1
build=${BUILD_DIR:-build}
jobs=${JOBS:-2}
out=$repo/$build/bench
doc=$repo/docs/performance.md
chart=$repo/docs/performance.png

log_tag="bench"
# shellcheck source=../lib/log.sh
source "$repo/tests/lib/log.sh"
die() { say "FAILED: $*"; exit 1; }
start=$SECONDS

# --- What the benchmarks need -------------------------------------------------------------
if ! command -v gnuplot >/dev/null 2>&1; then
  [ "$(id -u)" = 0 ] || die "gnuplot is missing: apt-get install gnuplot-nox (as root)"
  say "installing gnuplot-nox (Debian) for the chart"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    --no-install-recommends gnuplot-nox >/dev/null || die "apt-get install gnuplot-nox"
fi
say "building into $build (RelWithDebInfo, -j$jobs)"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null || die "cmake"
cmake --build "$build" -j "$jobs" --target gvirtus-labeler gvirtus-device-plugin \
  gvirtus-webhook gvirtus-backend-shim labeler_bench webhook_compare_bench pod_create_bench \
  controller_bench spread_bench footprint_bench hostile_review_bench peer_guard_bench \
  session_host_bench \
  >"$out.build.log" 2>&1 ||
  { tail -30 "$out.build.log" >&2; die "build (log: $out.build.log)"; }
bash tests/cluster/build.sh >/dev/null || die "the local control plane (tests/cluster/build.sh)"
GVIRTUS_AGNHOST=$(bash "$here/build-agnhost.sh") || die "agnhost (tests/bench/build-agnhost.sh)"
export GVIRTUS_AGNHOST

# Our binaries run with the malloc tunables their images set (images/Dockerfile.webhook).
GLIBC_TUNABLES=$(sed -n 's/^ENV GLIBC_TUNABLES=//p' images/Dockerfile.webhook)
[ -n "$GLIBC_TUNABLES" ] || die "no GLIBC_TUNABLES in images/Dockerfile.webhook"
export GLIBC_TUNABLES
say "GLIBC_TUNABLES=$GLIBC_TUNABLES, as in the images"

rm -rf "$out" && mkdir -p "$out"
built=$SECONDS
export GVIRTUS_BENCH_OUT=$out
tests=$repo/$build/tests
failed=()

# Runs one benchmark: NAME COMMAND...; its output goes to $out/NAME.log and to stderr.
bench() {
  local name=$1; shift
  local t0=$SECONDS
  say "$name ..."
  "$@" 2>&1 | tee "$out/$name.log" >&2
  if [ "${PIPESTATUS[0]}" = 0 ]; then
    say "$name done in $((SECONDS - t0))s"
  else
    say "$name FAILED after $((SECONDS - t0))s (log: $out/$name.log)"
    failed+=("$name")
  fi
}

# 1) Admission webhook, ours against agnhost's, on loopback.
bench webhook "$tests/webhook_compare_bench"
# 2) Pod creation through the API server: none, ours, agnhost's.
bench pods bash tests/cluster/with-cluster.sh bench-pods "$tests/pod_create_bench"
# 4) Labeler scale: 1,000 fake nodes (a cluster of its own: kwok keeps those nodes busy).
bench labeler bash tests/cluster/with-cluster.sh bench-labeler "$tests/labeler_bench"
# 4) The waiting-pod controller at scale, then 3) the two node agents' memory.
bench controller bash tests/cluster/with-cluster.sh bench-ctl "$tests/controller_bench"
# 5) Least-connections spread with two webhook replicas: 8 concurrent clients (the goal's
# setting), then one (each pod created after the last).
BENCH_SPREAD_CLIENTS=8 bench spread bash tests/cluster/with-cluster.sh bench-spread "$tests/spread_bench"
BENCH_SPREAD_CLIENTS=1 bench spread-sequential bash tests/cluster/with-cluster.sh bench-spread \
  "$tests/spread_bench"
bench footprint bash tests/cluster/with-cluster.sh bench-agents "$tests/footprint_bench"
# 3) The webhook's memory under bursts of crafted AdmissionReviews.
bench hostile "$tests/hostile_review_bench"
# 6) The backend's peer guard (--peer-check): round trips and sessions, without and with it.
bench peer-guard "$tests/peer_guard_bench"
bench session-host "$tests/session_host_bench"

# 3) Image sizes, when a Docker engine answers and holds our images.
images=
if command -v docker >/dev/null 2>&1 && timeout 20 docker info >/dev/null 2>&1; then
  images=$(docker images --format '{{.Repository}}:{{.Tag}} {{.Size}}' 2>/dev/null |
    grep -E '^(localhost:5000/)?gvirtus-k8s/(labeler|device-plugin|webhook|backend):' | sort)
fi

# --- The chart -------------------------------------------------------------------------------
plot_lines() {  # FILE TITLE STYLE ...: a gnuplot "plot" clause for the files that exist
  local clause="" file title style
  while [ $# -gt 0 ]; do
    file=$1 title=$2 style=$3; shift 3
    [ -s "$out/$file" ] || continue
    clause+="${clause:+, }'$out/$file' using 1:2 with lines $style title '$title'"
  done
  echo "$clause"
}
ours="lw 2 lc rgb '#1f4e9c'" peer="lw 2 lc rgb '#d9730d'" none="lw 2 lc rgb '#6b6b6b'"
webhook_plot=$(plot_lines webhook-ours-1000.cdf "gvirtus-webhook, 1,000/s" "$ours" \
  webhook-agnhost-1000.cdf "agnhost webhook, 1,000/s" "$peer" \
  webhook-ours-500.cdf "gvirtus-webhook, 500/s" "$ours dt 2" \
  webhook-agnhost-500.cdf "agnhost webhook, 500/s" "$peer dt 2")
pods_plot=$(plot_lines pods-none.cdf "no webhook" "$none" pods-ours.cdf "gvirtus-webhook" "$ours" \
  pods-agnhost.cdf "agnhost webhook" "$peer")
release_plot=$(plot_lines release.cdf "waiting pods released" "$ours")
panels=0
for p in "$webhook_plot" "$pods_plot" "$release_plot"; do [ -n "$p" ] && panels=$((panels + 1)); done
if [ "$panels" -gt 0 ]; then
  {
    echo "set terminal pngcairo size $((640 * panels)),480 font 'sans,10'"
    echo "set output '$chart'"
    echo "set multiplot layout 1,$panels title 'gvirtus-k8s latency distributions (docs/performance.md)'"
    echo "set key bottom right; set grid; set ylabel 'fraction of requests at or below'"
    echo "set yrange [0:1]"
    if [ -n "$webhook_plot" ]; then
      echo "set title 'Admission review over TLS keep-alive (loopback)'"
      echo "set logscale x; set xlabel 'latency (microseconds, log scale)'"
      echo "plot $webhook_plot"
      echo "unset logscale x"
    fi
    if [ -n "$pods_plot" ]; then
      echo "set title 'Pod creation through the API server'"
      echo "set logscale x; set xlabel 'latency (ms, log scale)'"
      echo "plot $pods_plot"
      echo "unset logscale x"
    fi
    if [ -n "$release_plot" ]; then
      echo "set title 'Waiting pods released after the first backend is Ready'"
      echo "set xlabel 'seconds'; set ylabel 'fraction of pods released'"
      echo "plot $release_plot"
    fi
    echo "unset multiplot"
  } >"$out/chart.gp"
  gnuplot "$out/chart.gp" 2>"$out/gnuplot.log" || { cat "$out/gnuplot.log" >&2; failed+=(chart); }
fi

# --- The page --------------------------------------------------------------------------------
section() {  # FILE FALLBACK
  if [ -s "$out/$1" ]; then cat "$out/$1"; else echo "$2"; fi
}
mem_kib=$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)
cpu=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
# The chart was just redrawn: only other changes make the figures not the commit's.
git diff --quiet HEAD -- . ':!docs/performance.md' ':!docs/performance.png' 2>/dev/null ||
  commit+=" with uncommitted changes"
# Sections 6 and 7 come from make bench-scale and make bench-real, each far longer than
# this script and never run by it: the page keeps them, and their summary rows, as they were.
kept_sections=$(awk '/^## 6\. /{keep=1} /^## (8\.|Rerunning)/{keep=0} keep' "$doc" 2>/dev/null)
kept_rows=$(awk '/^\|.*\| (6|7) \|$/' "$doc" 2>/dev/null)
status_line="All benchmarks ran and passed their checks."
[ ${#failed[@]} -eq 0 ] || status_line="**Failed: ${failed[*]}** (logs under \`$build/bench/\`); their figures are missing or partial."
{
  cat <<EOF
# Performance

Generated by \`make bench\` (\`bash tests/bench/run.sh\`) on $(date -u +%Y-%m-%d) from commit
$commit; the benchmarks took $(( (SECONDS - built + 30) / 60 )) min. $status_line

**Machine:** $(nproc) CPUs ($cpu), $((mem_kib / 1048576)) GiB memory, $(uname -sr). The
machine was **shared** with other engineers' builds and tests while this ran, so absolute
figures are noisy: compare the **ratios**, which come from runs side by side in the same
minute (the webhook phases alternate between the two webhooks; the pod variants are
interleaved). The control plane is the local one of \`tests/cluster\` (kube-apiserver
$(source tests/cluster/versions.sh && echo "$K8S_VERSION"), etcd, kwok fake nodes), on the same machine.
Our binaries run with \`GLIBC_TUNABLES=$GLIBC_TUNABLES\`, as their images set it: glibc's
default per-thread cache of 7 freed blocks per size sends most of a review's small JSON
allocations to the slower arena paths.

The peer is **agnhost** (\`k8s.io/kubernetes/test/images/agnhost\`, the Kubernetes
project's own test webhook, its \`webhook\` subcommand), built at the control plane's
version from the Go module proxy by \`tests/bench/build-agnhost.sh\` (wrapper module
\`tests/bench/agnhost\`). Its \`/mutating-pods-sidecar\` endpoint mutates every pod (adds a
container), which is less work per review than ours: it is a floor, not a like-for-like
product.

![latency distributions](performance.png)

## Summary

Details and the command that measured each figure in the section named. A ratio or a share
(ours against a peer, a path against the direct one, a rate against the API server's
ceiling) comes from runs side by side in one run: it compares across machines. Every other
figure is absolute: this machine's, under the load beside it, and it does not compare.

| figure | value | section |
|---|---|---|
$(section summary.rows "| (no figures) | | |")
$kept_rows

The machine's load while each benchmark ran (all its processes, ours and the control
plane's; printed by each benchmark, \`tests/bench/machine_load_listener.cpp\`): an absolute
figure taken near 100% busy measured the machine's queue as much as the code.

| benchmark | ran | CPUs busy | load average at its end |
|---|---|---|---|
$(section load.rows "| (no figures) | | | |")

## 1. Admission webhook: ours against agnhost's

$(section webhook.md "Not measured (webhook_compare_bench failed: see its log).")

Command: \`GVIRTUS_AGNHOST=\$(bash tests/bench/build-agnhost.sh) $build/tests/webhook_compare_bench\`

## 2. Pod creation through the API server

$(section pods.md "Not measured (pod_create_bench failed: see its log).")

Command: \`GVIRTUS_AGNHOST=\$(bash tests/bench/build-agnhost.sh) bash tests/cluster/with-cluster.sh bench-pods $build/tests/pod_create_bench\`

## 3. Resident memory and image sizes

$(section hostile.md "Not measured (hostile_review_bench failed: see its log).")

Command: \`$build/tests/hostile_review_bench\`

VmRSS (from \`/proc/PID/status\`, or the binary's own \`process_resident_memory_bytes\`) of
each process, idle and the highest seen under the load named.

| binary | idle | under load | load |
|---|---|---|---|
$(section memory.rows "| (no figures) | | | |")

EOF
  if [ -n "$images" ]; then
    echo "Image sizes, as \`docker images\` lists them (built by \`make images\`):"
    echo
    echo "| image | size |"
    echo "|---|---|"
    while read -r name size; do echo "| \`$name\` | $size |"; done <<<"$images"
    echo
    echo "A \`-standin\` backend image is built on a GPU-less stand-in for GVirtuS, not on the"
    echo "real GVirtuS image, which is several GB (CUDA)."
  else
    echo "Image sizes: not measured (no Docker engine answered, or it holds no"
    echo "\`gvirtus-k8s/*\` images: run \`make images\` first)."
  fi
  echo
  echo "Binary sizes (\`$build/bin\`: RelWithDebInfo, with debug information; in brackets"
  echo "stripped):"
  echo
  echo "| binary | size |"
  echo "|---|---|"
  mib() { awk '{printf "%.1f MiB", $1 / 1048576}' <<<"$(stat -c %s "$1")"; }
  for b in gvirtus-labeler gvirtus-device-plugin gvirtus-webhook gvirtus-backend-shim; do
    [ -f "$build/bin/$b" ] || continue
    strip -o "$out/stripped" "$build/bin/$b"
    echo "| $b | $(mib "$build/bin/$b") (stripped: $(mib "$out/stripped")) |"
  done
  rm -f "$out/stripped"
  echo "| agnhost (peer, stripped) | $(mib "$GVIRTUS_AGNHOST") |"
  cat <<EOF

Commands: \`bash tests/cluster/with-cluster.sh bench-agents $build/tests/footprint_bench\` (device
plugin, backend shim), and the commands of sections 1, 2 and 4 (webhook, labeler).

## 4. Labeler and controller at scale

### Labeler: 1,000 fake nodes

$(section labeler.md "Not measured (labeler_bench failed: see its log).")

Command: \`bash tests/cluster/with-cluster.sh bench-labeler $build/tests/labeler_bench\`

### Webhook: 1,000 waiting pods released when backends appear

$(section controller.md "Not measured (controller_bench failed: see its log).")

Command: \`bash tests/cluster/with-cluster.sh bench-ctl $build/tests/controller_bench\`

## 5. Spread over backends with two webhook replicas

$(section spread.md "Not measured (spread_bench failed: see its log).")

A replica counts its own choices from memory at once, and the other replica's from the pods
it watches (\`gvirtus.io/assigned-by\`), which it sees only once the pod is created: while
several creations are in flight, the two replicas choose without seeing each other's last
choices. Among backends with as many connections the leader takes the first by endpoint and
the other replica the last, so two such choices never land on the same one of several equal
backends; they can still both take a backend that is alone in having the fewest. One client
at a time leaves no such gap.

Command: \`BENCH_SPREAD_CLIENTS=8 bash tests/cluster/with-cluster.sh bench-spread $build/tests/spread_bench\`
(and \`BENCH_SPREAD_CLIENTS=1\`)

$kept_sections

## 8. Backend peer guard (\`--peer-check\`)

$(section peer-guard.md "Not measured (peer_guard_bench failed: see its log).")

The guard (\`libgvirtus-peer-guard.so\`, preloaded into the backend) acts only when the
backend accepts a connection: it asks the shim whether the peer's address is listed in the
pod's \`gvirtus.io/peers\`. Round trips on an open session do not pass through it, so their
figures differ only by noise; a session pays one question to the shim.

Command: \`$build/tests/peer_guard_bench\`

### One process per pod (\`--sessions=per-pod\`)

$(section session-host.md "Not measured (session_host_bench failed: see its log).")

The shim accepts and hands each connection (its descriptor) to the pod's own process;
the bytes of a session never pass through the shim, so round trips cost what they cost in
one shared process. A new pod's first session takes a process from the pool. The shared
backend's accept loop waits on each unlisted address in turn (\`--peer-wait\`); the shim's
does not.

Command: \`$build/tests/session_host_bench\`

## Rerunning

\`make bench\` runs all of the above (about 5 minutes on 2 CPUs once built; the first run
also builds agnhost, a few minutes more). Each command above runs one benchmark alone, after \`make bench-build\` (or
\`BUILD_DIR=$build make bench-build\`) and \`make cluster-build\`; the benchmarks' knobs are in the
header comment of each \`tests/bench/*_bench.cpp\`.
EOF
} >"$doc"
say "wrote $doc$([ -f "$chart" ] && echo " and $chart") in $((SECONDS - start))s"
if [ ${#failed[@]} -gt 0 ]; then
  say "FAILED: ${failed[*]}"
  exit 1
fi
