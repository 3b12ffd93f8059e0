#!/usr/bin/env bash
# GPU fractions on a remote GPU, under KAI-Scheduler: two GVirtuS pods asking for
# gpu-fraction 0.5 run on a GPU-less frontend node, sharing one virtual GPU there (KAI's
# binder places one reservation pod, our gvirtus-kai-reservation, which names the virtual
# device it was given) and, through our accounting, one GPU of the backend (the GVirtuS
# stand-in's NVML reports one GPU of 16 GiB: no GPU is measured here). A third waits,
# gated, for as long as the two hold their shares (past the chooser's one-minute window
# for its own recent assignments), and is released when one of them ends.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
sole_backend_node
half_pod() {
  test_pod "$1" '  labels: {gvirtus.io/enabled: "true"}
  annotations: {gpu-fraction: "0.5"}' "" | k apply -f - >/dev/null 2>&1
}

k label node "$node" gvirtus.io/backend.allowed=true --overwrite >/dev/null
backend_gpu() {
  k get pods -n "$system_ns" -l app.kubernetes.io/component=backend --field-selector "spec.nodeName=$node" \
    -o 'jsonpath={.items[*].metadata.annotations.gvirtus\.io/load}' | grep -q '"memoryTotalMiB":16384'
}
eventually "the backend on $node publishes its GPU (16 GiB)" backend_gpu || finish

say "two pods, 0.5 of a GPU each"
half_pod half-1
half_pod half-2
[ -z "$(field half-1 '{.spec.containers[0].resources.limits}')" ] &&
  ok "no nvidia.com/gpu limit added (KAI refuses it beside gpu-fraction)" ||
  bad "limits: $(field half-1 '{.spec.containers[0].resources.limits}')"
# At admission, or from the waiting-pod controller when the earlier scenarios' pods still
# count as sessions (the chooser counts its own assignments for a minute).
given_gpu() {
  [ -n "$(field "$1" '{.metadata.annotations.gvirtus\.io/backend}')" ] &&
    [ "$(field "$1" '{.metadata.annotations.gvirtus\.io/backend-gpu}')" = 0 ]
}
for p in half-1 half-2; do
  eventually "$p: a backend, and its GPU 0 for the share" given_gpu "$p"
  assigned_by=$(date +%s)
  [ -n "$(field "$p" '{.metadata.annotations.runai/shared-gpu-configmap}')" ] &&
    ok "$p: mutated by KAI's admission webhook too" || bad "$p: no runai/shared-gpu-configmap"
done
for p in half-1 half-2; do eventually "$p bound by KAI and running" running "$p"; done
n1=$(field half-1 '{.spec.nodeName}') n2=$(field half-2 '{.spec.nodeName}')
g1=$(field half-1 '{.metadata.labels.runai-gpu-group}') g2=$(field half-2 '{.metadata.labels.runai-gpu-group}')
[ -n "$g1" ] && [ "$n1" = "$n2" ] && [ "$g1" = "$g2" ] &&
  ok "both on $n1, in one GPU group" || bad "nodes $n1/$n2, GPU groups '$g1'/'$g2'"
[ "$(k get node "$n1" -o 'jsonpath={.metadata.labels.gvirtus\.io/gpu\.present}')" = false ] &&
  ok "$n1 has no GPU of its own" || bad "$n1 gvirtus.io/gpu.present is not false"
reservations=$(k get pods -n kai-resource-reservation -l "runai-gpu-group=$g1" \
  -o 'jsonpath={range .items[*]}{.spec.nodeName} {.metadata.annotations.run\.ai/reserve_for_gpu_index}{"\n"}{end}')
device=$(awk '{print $2}' <<<"$reservations")
[ "$(grep -c . <<<"$reservations")" = 1 ] && [ "$(awk '{print $1}' <<<"$reservations")" = "$n1" ] &&
  [[ $device == vgpu-* ]] && ok "one reservation pod on $n1 holds virtual GPU $device" ||
  bad "reservation pods of group $g1: '$reservations'"
visible() { k exec -n "$test_ns" "$1" -- printenv NVIDIA_VISIBLE_DEVICES 2>/dev/null | grep -q "$device"; }
for p in half-1 half-2; do eventually "$p is given $device (KAI's NVIDIA_VISIBLE_DEVICES)" visible "$p"; done

say "a third half waits: the backend's GPU is taken by the two shares"
half_pod half-3
[ "$(field half-3 '{.spec.schedulingGates[*].name}')" = gvirtus.io/backend ] &&
  ok "half-3 gated at admission" || bad "half-3 gates: $(field half-3 '{.spec.schedulingGates}')"
why() {
  k get events -n "$test_ns" --field-selector involvedObject.name=half-3,reason=WaitingForBackend \
    -o 'jsonpath={.items[*].message}' | grep -q "0.5 of its memory"
}
eventually "half-3 is told why (no GPU with 0.5 of its memory free)" why
# The chooser counts its own assignments for one minute; the shares must hold after it:
# wait for a pass of the waiting-pod controller (the Lease holder's) that began after the
# minute, the pass that no longer counts them.
window_closed=$((assigned_by + 61))
leader_passes() {
  local leader
  leader=$(jp lease gvirtus-webhook -n "$system_ns" -o jsonpath='{.spec.holderIdentity}')
  [ -n "$leader" ] && k get --raw "/api/v1/namespaces/$system_ns/pods/$leader:8080/proxy/metrics" |
    awk '$1 == "gvirtus_webhook_release_passes_total" {print $2}' | grep .
}
passes_then=
pass_after_window() {
  [ "$(date +%s)" -ge "$window_closed" ] || return 1
  local now
  now=$(leader_passes) || return 1
  [ -n "$passes_then" ] || { passes_then=$now; return 1; }
  awk -v a="$now" -v b="$passes_then" 'BEGIN {exit !(a > b)}'
}
timeout_s=$((timeout_s + 60)) eventually "a controller pass after the one-minute window" pass_after_window
[ "$(field half-3 '{.spec.schedulingGates[*].name}')" = gvirtus.io/backend ] &&
  [ -z "$(field half-3 '{.metadata.annotations.gvirtus\.io/backend}')" ] &&
  ok "half-3 still waits after the one-minute assignment window" ||
  bad "half-3 released while the two shares run: $(field half-3 '{.metadata.annotations}')"

say "half-1 ends: its share is free"
k delete pod half-1 -n "$test_ns" --wait=false >/dev/null
released() { [ -n "$(field half-3 '{.metadata.annotations.gvirtus\.io/backend}')" ]; }
eventually "half-3 released" released
eventually "half-3 bound by KAI and running" running half-3
finish
