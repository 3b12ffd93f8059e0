#!/usr/bin/env bash
# A real `kubectl apply -k manifests/` puts each DaemonSet's pods exactly on the nodes
# whose labels allow it (docs/install.md, "Opting GPU nodes in"):
#   labeler        every node, whatever its taints
#   device plugin  gvirtus.io/frontend.allowed=true AND no GPU (neither
#                  nvidia.com/gpu.present=true nor gvirtus.io/gpu.present=true)
#   backend        gvirtus.io/backend.allowed=true AND a GPU (either label)
# and the webhook Deployment runs its 2 replicas, its CA step 1. Fake nodes (kwok) with each label
# combination; kwok marks the bound pods Running (images are never pulled).
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
cleanup() { delete_manifests; delete_test_nodes; }
trap cleanup EXIT
cleanup

F=gvirtus.io/frontend.allowed B=gvirtus.io/backend.allowed
G=gvirtus.io/gpu.present N=nvidia.com/gpu.present
# node | labels | expected components (sorted, comma-separated)
cases=(
  "mf-bare||labeler"
  "mf-fe|$F=true $G=false|device-plugin,labeler"
  "mf-fe-nogpu-label|$F=true|device-plugin,labeler"
  "mf-fe-nvgpu|$F=true $N=true|labeler"
  "mf-fe-gvgpu|$F=true $G=true|labeler"
  "mf-fe-off|$F=false $G=false|labeler"
  "mf-fe-nvfalse|$F=true $N=false $G=false|device-plugin,labeler"
  "mf-be-nvgpu|$F=false $B=true $N=true|backend,labeler"
  "mf-be-gvgpu|$F=false $B=true $G=true|backend,labeler"
  "mf-be-bothgpu|$B=true $N=true $G=true|backend,labeler"
  "mf-be-nogpu|$F=true $B=true $G=false|device-plugin,labeler"
  "mf-be-nvfalse|$B=true $N=false $G=false|labeler"
  "mf-be-off-gpu|$F=false $B=false $N=true $G=true|labeler"
  "mf-both-gpu|$F=true $B=true $G=true|backend,labeler"
  "mf-tainted-fe|$F=true $G=false|device-plugin,labeler"
  "mf-tainted-gpu|$F=false $B=true $N=true|backend,labeler"
)

say "creating ${#cases[@]} fake nodes"
declare -A want
for c in "${cases[@]}"; do
  IFS='|' read -r node labels expected <<<"$c"
  # A node with a GPU has NVIDIA's device plugin's nvidia.com/gpu, which the backend asks for.
  gpus=()
  [[ $labels == *gpu.present=true* ]] && gpus=(--capacity nvidia.com/gpu=2)
  # shellcheck disable=SC2086  # labels are words
  bash "$add_node" "$node" $labels "${gpus[@]}" 2>/dev/null
  want[$node]=$expected
done
# Taints: the labeler and the device plugin tolerate every taint; the backend tolerates
# the nvidia.com/gpu taint GPU nodes commonly carry.
k taint nodes mf-tainted-fe dedicated=frontend:NoSchedule example.com/drain=true:NoExecute >/dev/null
k taint nodes mf-tainted-gpu nvidia.com/gpu=present:NoSchedule >/dev/null

say "kubectl apply -k manifests/"
k apply -k "$manifests" >/dev/null 2>&1 || { k apply -k "$manifests"; bad "apply -k failed"; finish; }

# Running DaemonSet pods on mf-* nodes, as "node component" lines (the Deployments'
# pods, the webhook's replicas and its CA step, land anywhere and are checked below).
placement() {
  k get pods -n "$ns" -o jsonpath='{range .items[?(@.status.phase=="Running")]}{.spec.nodeName} {.metadata.labels.app\.kubernetes\.io/component}{"\n"}{end}' |
    awk '$1 ~ /^mf-/ && $2 != "webhook" && $2 != "ca"' | sort -u
}
expected_placement() {
  local node component
  for node in "${!want[@]}"; do
    for component in ${want[$node]//,/ }; do echo "$node $component"; done
  done | sort -u
}
expected=$(expected_placement)

say "waiting for the DaemonSet pods to run where they may (up to 120s)"
got=""
for _ in $(seq 1 120); do
  got=$(placement)
  [ "$got" = "$expected" ] && break
  sleep 1
done
k get pods -n "$ns" -o wide --sort-by=.spec.nodeName 2>/dev/null | awk 'NR == 1 || / mf-/' >&2
if [ "$got" = "$expected" ]; then
  ok "every component on exactly its nodes ($(wc -l <<<"$got") pods on ${#cases[@]} nodes)"
else
  bad "placement differs from the labels' rules (- expected, + running):"
  diff <(echo "$expected") <(echo "$got") | grep '^[<>]' | sed 's/^</  -/; s/^>/  +/' >&2 || true
fi
# Per node, for the log: what each label combination got.
for c in "${cases[@]}"; do
  IFS='|' read -r node labels expected <<<"$c"
  actual=$(awk -v n="$node" '$1 == n {print $2}' <<<"$got" | paste -sd, -)
  [ "$actual" = "$expected" ] && ok "$node [${labels:-no labels}]: $actual" ||
    bad "$node [${labels:-no labels}]: got ${actual:-nothing}, want $expected"
done

# Nothing more than one pod per node and component (DaemonSet), and no pod stuck.
dupes=$(k get pods -n "$ns" -o jsonpath='{range .items[*]}{.spec.nodeName} {.metadata.labels.app\.kubernetes\.io/component}{"\n"}{end}' |
  awk '$1 ~ /^mf-/' | sort | uniq -d)
[ -z "$dupes" ] && ok "one pod per node and component" || bad "duplicate pods: $dupes"

say "webhook Deployment"
if k rollout status deployment/gvirtus-webhook -n "$ns" --timeout=90s >/dev/null 2>&1; then
  ok "gvirtus-webhook: $(k get deployment gvirtus-webhook -n "$ns" -o jsonpath='{.status.availableReplicas}') replicas available"
else
  bad "gvirtus-webhook did not roll out: $(k get deployment gvirtus-webhook -n "$ns" -o wide 2>&1 | tail -1)"
fi
replicas=$(k get deployment gvirtus-webhook -n "$ns" -o jsonpath='{.spec.replicas}')
[ "$replicas" = 2 ] && ok "2 replicas" || bad "replicas: $replicas"
pdb=$(k get pdb gvirtus-webhook -n "$ns" -o jsonpath='{.status.expectedPods} {.status.disruptionsAllowed}' 2>/dev/null)
[ "$pdb" = "2 1" ] && ok "PodDisruptionBudget: 2 pods, 1 disruption allowed" ||
  bad "PodDisruptionBudget status: \"$pdb\" (want \"2 1\")"
if k rollout status deployment/gvirtus-ca -n "$ns" --timeout=90s >/dev/null 2>&1; then
  ok "gvirtus-ca (the own CA's step): 1 replica available"
else
  bad "gvirtus-ca did not roll out: $(k get deployment gvirtus-ca -n "$ns" -o wide 2>&1 | tail -1)"
fi
endpoints=$(k get endpointslices -n "$ns" -l kubernetes.io/service-name=gvirtus-webhook \
  -o jsonpath='{range .items[*].endpoints[*]}{.addresses[0]}{"\n"}{end}' | grep -c . || true)
[ "$endpoints" = 2 ] && ok "Service gvirtus-webhook has 2 endpoints" || bad "Service endpoints: $endpoints"
finish
