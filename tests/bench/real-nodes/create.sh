# shellcheck shell=bash disable=SC2154  # ns, name, repo, pods: real-nodes-bench.sh's
# Create -> Running, batch by batch (sourced by real-nodes-bench.sh with name, ns, pods,
# repo, E2E_TEST_IMAGE, now_ms, percentile and tests/lib/log.sh): plain pods, GVirtuS pods
# on the label path, on the claim path, asking for the extended resource, and on the claim
# path with binding conditions; and the node containers' memory before any of them.
#   create_batches

# run_batch KIND LABELS [SPEC] [CONTAINER]: creates $pods pods at once, polls until all
# Running; prints one create->Running latency (ms) per pod. SPEC and CONTAINER: more fields
# of the pod's spec and of its container, in flow style, each with a leading ", ".
run_batch() {
  local kind=$1 labels=$2 spec=${3:-} container=${4:-} i manifest="" created
  for i in $(seq 1 "$pods"); do
    manifest+="---
apiVersion: v1
kind: Pod
metadata: {name: $kind-$i, namespace: $ns, labels: {bench: $kind$labels}}
spec:
  terminationGracePeriodSeconds: 1
  containers: [{name: app, image: $E2E_TEST_IMAGE, command: [sleep, '3600']$container}]
  ${spec#, }
"
  done
  declare -A seen=()
  created=$(now_ms)
  kubectl apply -f - <<<"$manifest" >/dev/null
  local deadline=$((SECONDS + 180))
  while [ ${#seen[@]} -lt "$pods" ] && [ $SECONDS -lt $deadline ]; do
    local t line
    t=$(now_ms)
    while read -r line; do
      [ -n "$line" ] && [ -z "${seen[$line]:-}" ] && seen[$line]=$((t - created))
    done < <(kubectl -n "$ns" get pods -l "bench=$kind" --field-selector status.phase=Running \
      -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}')
    sleep 0.1
  done
  if [ ${#seen[@]} != "$pods" ]; then
    say "only ${#seen[@]} of $pods $kind pods ran within 180 s"
    # With may_fall_short=1 (a batch whose shortfall is a figure), the ones that ran.
    [ "${may_fall_short:-0}" = 1 ] || exit 1
  fi
  printf '%s\n' "${seen[@]}"
}

create_batches() {
  # Before any workload: kubelet, containerd, kube-proxy and GVirtuS's own pods.
  mapfile -t node_containers < <(docker ps -q --filter "label=gvirtus.io/cluster=$name")
  idle=$(docker stats --no-stream --format '  {{.Name}}\t{{.MemUsage}}' "${node_containers[@]}")
  say "warming the nodes (image present, first sandbox)"
  run_batch warm "" >/dev/null
  kubectl -n "$ns" delete pods -l bench=warm --wait=true >/dev/null
  say "$pods plain pods"
  plain=$(run_batch plain "")
  kubectl -n "$ns" delete pods -l bench=plain --wait=true >/dev/null
  say "$pods GVirtuS pods"
  gvirtus=$(run_batch gvirtus ', gvirtus.io/enabled: "true"')
  kubectl -n "$ns" delete pods -l bench=gvirtus --wait=true >/dev/null
  # The DRA path (docs/dra.md) on the same nodes: each pod's claim allocated by kube-scheduler
  # from the published backend GPUs and prepared by the device plugin (--dra).
  say "$pods GVirtuS pods with a DRA claim each"
  bash "$repo/tests/e2e/real/dra.sh" on || { say "DRA could not be turned on"; exit 1; }
  two_slices() {
    [ "$(kubectl get resourceslices -o json | jq '[.items[] | select(.spec.driver == "gpu.gvirtus.io")] | length')" = 2 ]
  }
  wait_until 120 "both backends' GPUs published" two_slices || exit 1
  kubectl apply -f - >/dev/null <<YAML
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: gpu, namespace: $ns}
spec: {spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.gvirtus.io}}]}}}
YAML
  # devices_conditioned: how many published devices name binding conditions (1.36 and later,
  # with --dra-binding-timeout).
  devices_conditioned() {
    kubectl get resourceslices -o json |
      jq '[.items[] | select(.spec.driver == "gpu.gvirtus.io") | .spec.devices[] | select(.bindingConditions)] | length'
  }
  dra=$(run_batch dra ', gvirtus.io/dra: "true"' \
    ', resourceClaims: [{name: gpu, resourceClaimTemplateName: gpu}]' ', resources: {claims: [{name: gpu}]}')
  kubectl -n "$ns" delete pods -l bench=dra --wait=true >/dev/null
  # The extended-resource path: an unchanged manifest asking for gvirtus.io/gpu, its claim made
  # by kube-scheduler (docs/dra.md, "Asking for an extended resource").
  say "$pods pods asking for the extended resource gvirtus.io/gpu"
  extended=$(run_batch extended '' '' ', resources: {limits: {gvirtus.io/gpu: 1}}')
  kubectl -n "$ns" delete pods -l bench=extended --wait=true >/dev/null
  # The claim path again with binding conditions on (--dra-binding-timeout, off by default):
  # what the claim binder's answer costs (kube-scheduler looks for it every 5 s).
  bound=""
  say "$pods GVirtuS pods with a DRA claim each, binding conditions on (--dra-binding-timeout=60s)"
  kubectl -n gvirtus-system patch deployment gvirtus-webhook --type=json -p \
    '[{"op":"add","path":"/spec/template/spec/containers/0/args/-","value":"--dra-binding-timeout=60s"}]' >/dev/null
  kubectl -n gvirtus-system rollout status deployment/gvirtus-webhook --timeout=180s >/dev/null
  conditioned() { [ "$(devices_conditioned)" != 0 ]; }
  if wait_until 120 "the devices published with binding conditions" conditioned; then
    # kube-scheduler 1.37.2 counts a waiting claim's memory twice (docs/dra.md): some may
    # wait minutes; how many ran within 180 s is part of the figure.
    bound=$(may_fall_short=1 run_batch bound ', gvirtus.io/dra: "true"' \
      ', resourceClaims: [{name: gpu, resourceClaimTemplateName: gpu}]' ', resources: {claims: [{name: gpu}]}')
    kubectl -n "$ns" delete pods -l bench=bound --wait=true >/dev/null
  fi
  bash "$repo/tests/e2e/real/dra.sh" off || say "DRA could not be turned off"

  p50p=$(percentile 50 <<<"$plain") p95p=$(percentile 95 <<<"$plain")
  p50g=$(percentile 50 <<<"$gvirtus") p95g=$(percentile 95 <<<"$gvirtus")
  p50d=$(percentile 50 <<<"$dra") p95d=$(percentile 95 <<<"$dra")
  p50e=$(percentile 50 <<<"$extended") p95e=$(percentile 95 <<<"$extended")
  printf '\nreal nodes: %d pods each, create -> Running (client-side, polled every ~0.1 s)\n' "$pods"
  printf '  %-26s p50 %6s ms   p95 %6s ms\n' plain "$p50p" "$p95p" GVirtuS "$p50g" "$p95g" \
    "GVirtuS (DRA claim)" "$p50d" "$p95d" "extended resource" "$p50e" "$p95e"
  if [ -n "$bound" ]; then
    p50b=$(percentile 50 <<<"$bound") p95b=$(percentile 95 <<<"$bound")
    printf '  %-26s p50 %6s ms   p95 %6s ms   (%d of %d ran within 180 s)\n' \
      "DRA claim, binding cond." "$p50b" "$p95b" "$(grep -c . <<<"$bound")" "$pods"
  fi
  awk -v a="$p50g" -v b="$p50p" -v c="$p95g" -v d="$p95p" \
    'BEGIN {printf "  ratio GVirtuS/plain: p50 %.2fx, p95 %.2fx\n", a / b, c / d}'
  awk -v a="$p50d" -v b="$p50g" -v c="$p95d" -v d="$p95g" \
    'BEGIN {printf "  ratio DRA path/webhook path: p50 %.2fx, p95 %.2fx\n", a / b, c / d}'
  awk -v a="$p50e" -v b="$p50d" -v c="$p95e" -v d="$p95d" \
    'BEGIN {printf "  ratio extended resource/DRA claim: p50 %.2fx, p95 %.2fx\n", a / b, c / d}'
  if [ -n "$bound" ]; then
    awk -v a="$p50b" -v b="$p50d" -v c="$p95b" -v d="$p95d" \
      'BEGIN {printf "  ratio DRA claim with/without binding conditions: p50 %.2fx, p95 %.2fx\n", a / b, c / d}'
  else
    printf '  (binding conditions not served: no batch with them)\n'
  fi
  printf '\nnode container memory before any workload (docker stats):\n%s\n' "$idle"

}
