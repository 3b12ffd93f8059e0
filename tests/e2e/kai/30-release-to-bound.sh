#!/usr/bin/env bash
# How long KAI-Scheduler takes to bind a GVirtuS pod once our controller released it:
# 50 pods (gpu-fraction 0.01 each, queue team-a) wait, gated, with no backend; one backend
# of 64 sessions appears; a watch records, per pod, when its release patch landed (its
# backend annotation appears, the gate goes in the same patch) and when KAI bound it
# (spec.nodeName). Prints p50/p99 of release -> bound and backend Ready -> released; the
# checks are that every pod is given one backend and bound (figures are not asserted).
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
count=${E2E_KAI_LATENCY_PODS:-50}
watch_log=$(mktemp)
sessions_arg=$(jp daemonset gvirtus-backend -n "$system_ns" -o 'jsonpath={.spec.template.spec.containers[0].args[0]}')
cleanup() {
  [ -z "${watcher:-}" ] || kill "$watcher" 2>/dev/null
  rm -f "$watch_log"
  [[ $sessions_arg != --max-sessions=* ]] ||
    k patch daemonset gvirtus-backend -n "$system_ns" --type json \
      -p "[{\"op\":\"replace\",\"path\":\"/spec/template/spec/containers/0/args/0\",\"value\":\"$sessions_arg\"}]" >/dev/null 2>&1
}
sole_backend_node
[[ $sessions_arg == --max-sessions=* ]] || skip "the backend's first argument is not --max-sessions (overlay-kai)"

say "no backend; its next pod takes 64 sessions"
k label node "$node" gvirtus.io/backend.allowed=false --overwrite >/dev/null
k patch daemonset gvirtus-backend -n "$system_ns" --type json \
  -p '[{"op":"replace","path":"/spec/template/spec/containers/0/args/0","value":"--max-sessions=64"}]' >/dev/null
eventually "no backend pod left" no_backend || finish

say "$count GVirtuS pods with gpu-fraction 0.01"
for i in $(seq 1 "$count"); do
  test_pod "p-$i" '  labels: {gvirtus.io/enabled: "true"}
  annotations: {gpu-fraction: "0.01"}' ""
  echo ---
done | k apply -f - >/dev/null 2>&1
all_gated() {
  [ "$(k get pods -n "$test_ns" -o 'jsonpath={range .items[*]}{.spec.schedulingGates[*].name}{"\n"}{end}' |
    grep -c gvirtus.io/backend)" = "$count" ]
}
eventually "all $count wait, gated" all_gated || finish

# One line per observed change: TIME NAME|BACKEND|NODE (the time this host saw it).
kubectl get pods -n "$test_ns" -w \
  -o 'jsonpath={.metadata.name}|{.metadata.annotations.gvirtus\.io/backend}|{.spec.nodeName}{"\n"}' 2>/dev/null |
  while IFS= read -r line; do printf '%s %s\n' "$EPOCHREALTIME" "$line"; done >"$watch_log" &
watcher=$!
# A watch lists what exists first: once all pods are listed, it sees every change after.
watching() { [ "$(wc -l <"$watch_log")" -ge "$count" ]; }
eventually "the watch lists the $count pods" watching || finish
say "a backend appears on $node"
k label node "$node" gvirtus.io/backend.allowed=true --overwrite >/dev/null
backend_ready_at() {
  k get pods -n "$system_ns" -l app.kubernetes.io/component=backend \
    -o 'jsonpath={.items[0].status.conditions[?(@.type=="Ready")].lastTransitionTime}'
}
all_bound() {
  [ "$(awk -F'|' '$3 != "" {split($1, a, " "); print a[2]}' "$watch_log" | sort -u | grep -c .)" = "$count" ]
}
eventually "all $count released and bound by KAI" all_bound
ready=$(date -d "$(backend_ready_at)" +%s 2>/dev/null || echo 0)
# Released once: no pod was seen with two backends.
twice=$(awk -F'|' '$2 != "" {split($1, a, " "); print a[2], $2}' "$watch_log" | sort -u | awk '{print $1}' | uniq -d)
[ -z "$twice" ] && ok "each pod given one backend, once" || bad "given a second backend: $twice"
# Per pod: latency (ms) and release time, from the first line showing each.
awk -F'|' '
  { split($1, a, " "); t = a[1]; pod = a[2]
    if ($2 != "" && !(pod in released)) released[pod] = t
    if ($3 != "" && !(pod in bound)) bound[pod] = t }
  END { for (pod in bound) if (pod in released) printf "%.1f %.3f\n", (bound[pod] - released[pod]) * 1000, released[pod] }' \
  "$watch_log" | sort -n >"$watch_log.lat"
n=$(grep -c . "$watch_log.lat")
rank() { sed -n "$(( ($1 * n + 99) / 100 ))p" "$watch_log.lat" | cut -d' ' -f1; }
if [ "$n" -gt 0 ]; then
  say "bench: release -> bound by KAI, $n pods: p50 $(rank 50) ms, p99 $(rank 99) ms, max $(tail -1 "$watch_log.lat" | cut -d' ' -f1) ms"
  first=$(cut -d' ' -f2 "$watch_log.lat" | sort -n | head -1) last=$(cut -d' ' -f2 "$watch_log.lat" | sort -n | tail -1)
  [ "$ready" = 0 ] ||
    say "bench: backend Ready (1 s resolution) -> first released $(awk -v a="$first" -v r="$ready" 'BEGIN{printf "%.1f", a - r}') s, -> last released $(awk -v a="$last" -v r="$ready" 'BEGIN{printf "%.1f", a - r}') s"
fi
rm -f "$watch_log.lat"
finish
