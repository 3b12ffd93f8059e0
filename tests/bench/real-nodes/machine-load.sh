# shellcheck shell=bash
# The whole machine's load while a benchmark step ran (sourced by real-nodes-bench.sh), as
# the C++ benchmarks print it (tests/bench/machine_load_listener.cpp): every process counts,
# the control plane's and the nodes' too, so a figure taken on a busy machine says so.
#   load_start                 remembers /proc/stat's CPU times
#   load_line                  prints "machine: B of N CPUs busy, load average L" since then

load_start() { read -r _ load_user load_nice load_system load_idle load_iowait load_irq load_softirq load_steal _ </proc/stat; }

load_line() {
  local user nice system idle iowait irq softirq steal busy total
  read -r _ user nice system idle iowait irq softirq steal _ </proc/stat
  busy=$(((user + nice + system + irq + softirq + steal) -
    (load_user + load_nice + load_system + load_irq + load_softirq + load_steal)))
  total=$((busy + (idle + iowait) - (load_idle + load_iowait)))
  awk -v b="$busy" -v t="$total" -v n="$(nproc)" -v l="$(cut -d' ' -f1 /proc/loadavg)" \
    'BEGIN {printf "  machine: %.2f of %d CPUs busy, load average %s at the end\n", t ? n * b / t : 0, n, l}'
}
