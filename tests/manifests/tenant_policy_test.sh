#!/usr/bin/env bash
# The ValidatingAdmissionPolicies of manifests/policy hold on the real API server, each
# request made with that account's own token (docs/security.md):
#   tenant   a ServiceAccount with the "edit" role in its namespace only: cannot label a
#            pod gvirtus.io/enabled after creation, change what the webhook wrote or what
#            is counted (gvirtus.io/ annotations, KAI shares), remove the gate, or create a
#            pod carrying the gate or the webhook's annotations it was not given, or write
#            gvirtus.io/peers anywhere; cannot label any object with a KAI queue that
#            ConfigMap gvirtus-kai-queues gives other namespaces;
#   webhook  releases a GVirtuS pod (annotations, gate, zone preference), writes
#            gvirtus.io/peers and gvirtus.io/peer-memory of backend pods (the peer
#            publisher) and, with the autoscale overlay's RBAC, writes the backend keys of
#            nodes; nothing else;
#   labeler  its own node (the token's node-name claim), its three labels only;
#   backend  its own pod (the token's pod-name claim), gvirtus.io/load only (never
#            gvirtus.io/peers, the list of addresses it lets connect, nor
#            gvirtus.io/peer-memory, their caps); reads its own pod;
#   ca       the CA step: Secret gvirtus-webhook-tls of type kubernetes.io/tls only (never
#            a token Secret of another account).
# Allowed requests pass; refused ones are refused by the expected policy, whose message is
# printed. No webhook runs here (fake nodes): the MutatingWebhookConfiguration is removed
# and the test writes on pods what the webhook would. Also checks that the scheduler's
# binding and kwok's status updates still go through.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
tenant_ns=mf-tenant
scratch=""
cleanup() {
  k delete namespace "$tenant_ns" --ignore-not-found --wait=true --timeout=120s >/dev/null 2>&1 || true
  k delete -f "$repo/overlays/autoscale/rbac.yaml" --ignore-not-found >/dev/null 2>&1 || true
  delete_manifests
  delete_test_nodes
  [ -z "$scratch" ] || rm -rf "$scratch"
}
trap cleanup EXIT
cleanup
scratch=$(mktemp -d)

F=gvirtus.io/frontend.allowed B=gvirtus.io/backend.allowed G=gvirtus.io/gpu.present
say "fake nodes and kubectl apply -k manifests/"
bash "$add_node" mf-pol-bare 2>/dev/null
bash "$add_node" mf-pol-fe $F=true $B=false $G=false 2>/dev/null
bash "$add_node" mf-pol-gpu1 $F=false $B=true $G=true --capacity nvidia.com/gpu=1 2>/dev/null
bash "$add_node" mf-pol-gpu2 $F=false $B=true $G=true --capacity nvidia.com/gpu=1 2>/dev/null
k apply -k "$manifests" >/dev/null 2>&1 || { k apply -k "$manifests"; bad "apply -k failed"; finish; }
# Fake nodes run no webhook: with failurePolicy Fail, it would refuse every GVirtuS pod.
k delete mutatingwebhookconfiguration gvirtus-webhook >/dev/null

server=$(k config view --minify --raw -o jsonpath='{.clusters[0].cluster.server}')
ca_file=$(k config view --minify --raw -o jsonpath='{.clusters[0].cluster.certificate-authority}')
ca_data=$(k config view --minify --raw -o jsonpath='{.clusters[0].cluster.certificate-authority-data}')
if [ -z "$ca_file" ]; then ca_file=$scratch/ca.crt; base64 -d <<<"$ca_data" >"$ca_file"; fi
# raw_patch TOKEN pod|node NAME [-n NS] [--type=json|merge] -p BODY: one PATCH request, as
# the components send it (kubectl patch reads the object first, which the webhook and the
# shim may not); prints the refusal's message.
raw_patch() {
  local token=$1 kind=$2 name=$3 ns="" type=strategic body="" ct code; shift 3
  while [ $# -gt 0 ]; do
    case $1 in
      -n) ns=$2; shift 2 ;;
      --type=*) type=${1#--type=}; shift ;;
      -p) body=$2; shift 2 ;;
      *) echo "raw_patch: unknown argument $1" >&2; return 2 ;;
    esac
  done
  case $type in
    json) ct=application/json-patch+json ;;
    merge) ct=application/merge-patch+json ;;
    *) ct=application/strategic-merge-patch+json ;;
  esac
  code=$(curl -sS -o "$scratch/response" -w '%{http_code}' --max-time 30 --cacert "$ca_file" \
    -H "Authorization: Bearer $token" -H "Content-Type: $ct" -X PATCH --data-binary "$body" \
    "$server/api/v1/${ns:+namespaces/$ns/}${kind}s/$name") || return 1
  [ "$code" = 200 ] && return 0
  jq -r '.message // .' "$scratch/response" 2>/dev/null || cat "$scratch/response"
  return 1
}
# as TOKEN kubectl-args...: a request with that token and nothing else of the kubeconfig
# (`patch` goes through raw_patch).
as() {
  local token=$1; shift
  if [ "$1" = patch ]; then raw_patch "$token" "${@:2}"; return; fi
  kubectl --kubeconfig=/dev/null --server="$server" --certificate-authority="$ca_file" \
    --token="$token" --request-timeout=30s "$@"
}
# allowed WHAT TOKEN kubectl-args...
allowed() {
  local what=$1 token=$2 out; shift 2
  if out=$(as "$token" "$@" 2>&1); then ok "$what: allowed"; else bad "$what: refused: $out"; fi
}
# refused WHAT POLICY FRAGMENT TOKEN kubectl-args...: refused by POLICY with a message
# matching FRAGMENT (both extended regular expressions: where two policies refuse, the API
# server names either); the message is printed.
refused() {
  local what=$1 policy=$2 fragment=$3 token=$4 out; shift 4
  if out=$(as "$token" "$@" 2>&1); then bad "$what: allowed"; return; fi
  if grep -qE "ValidatingAdmissionPolicy '($policy)'" <<<"$out" && grep -qE -- "$fragment" <<<"$out"; then
    ok "$what: refused: ${out##*denied request: }"
  else
    bad "$what: $out (want $policy: ...$fragment...)"
  fi
}
# forbidden WHAT TOKEN kubectl-args...: refused by RBAC.
forbidden() {
  local what=$1 token=$2 out; shift 2
  if out=$(as "$token" "$@" 2>&1); then bad "$what: allowed"
  elif grep -q 'cannot' <<<"$out" && ! grep -q ValidatingAdmissionPolicy <<<"$out"; then ok "$what: forbidden by RBAC"
  else bad "$what: $out"; fi
}

say "a tenant: ServiceAccount $tenant_ns/tenant with the edit role in $tenant_ns"
k create namespace "$tenant_ns" >/dev/null
k create serviceaccount tenant -n "$tenant_ns" >/dev/null
k create rolebinding tenant-edit --clusterrole=edit --serviceaccount="$tenant_ns:tenant" -n "$tenant_ns" >/dev/null
tenant=$(k create token tenant -n "$tenant_ns" --duration=30m)
webhook=$(k create token gvirtus-webhook -n "$ns" --duration=30m)

# pod NAME LABELS-JSON ANNOTATIONS-JSON GATES-JSON: a pod for mf-pol-fe.
pod() {
  cat <<JSON
{"apiVersion": "v1", "kind": "Pod",
 "metadata": {"name": "$1", "namespace": "$tenant_ns", "labels": $2, "annotations": $3},
 "spec": {"nodeSelector": {"kubernetes.io/hostname": "mf-pol-fe"}, "schedulingGates": $4,
          "containers": [{"name": "app", "image": "example.com/app:1"}]}}
JSON
}
gate='[{"name": "gvirtus.io/backend"}]'
gv='{"gvirtus.io/enabled": "true"}'

say "waiting for the policies to be in force (up to 60s)"
for _ in $(seq 1 60); do
  out=$(pod probe '{}' '{}' "$gate" | as "$tenant" create --dry-run=server -f - 2>&1 || true)
  grep -q "ValidatingAdmissionPolicy 'gvirtus-pod-keys'" <<<"$out" && break
  sleep 1
done
grep -q "ValidatingAdmissionPolicy" <<<"$out" && ok "policies in force" || bad "policies not in force: $out"

say "tenant: pods created as the webhook would leave them pass"
allowed "create a plain pod" "$tenant" create -f - < <(pod plain '{}' '{}' '[]')
# What the webhook writes when it assigns a backend at admission.
assigned_annotations='{"gvirtus.io/backend": "10.0.0.1:9999", "gvirtus.io/backend-pod": "gvirtus-system/be-1",
  "gvirtus.io/backend-gpu": "0", "gvirtus.io/properties": "{}", "gvirtus.io/assigned-by": "webhook-a",
  "gvirtus.io/gpu-memory": "1024", "gpu-fraction": "0.5"}'
allowed "create an assigned GVirtuS pod" "$tenant" create -f - < <(pod assigned "$gv" "$assigned_annotations" '[]')
# What it writes when no backend can take the pod.
allowed "create a waiting GVirtuS pod (gate, backend-status)" "$tenant" create -f - \
  < <(pod waiting "$gv" '{"gvirtus.io/backend-status": "waiting"}' "$gate")
allowed "tenant's own annotation on a GVirtuS pod" "$tenant" annotate pod assigned -n "$tenant_ns" example.com/note=mine
allowed "tenant's own label on a waiting pod" "$tenant" label pod waiting -n "$tenant_ns" team=a

say "tenant: refused"
P=gvirtus-pod-keys
refused "label gvirtus.io/enabled=true after creation" $P "cannot be added to an existing pod" "$tenant" \
  label pod plain -n "$tenant_ns" gvirtus.io/enabled=true
refused "edit gvirtus.io/gpu-memory" $P "refused: gvirtus.io/gpu-memory" "$tenant" \
  annotate pod assigned -n "$tenant_ns" gvirtus.io/gpu-memory=80000 --overwrite
refused "edit gvirtus.io/backend-pod" $P "refused: gvirtus.io/backend-pod" "$tenant" \
  annotate pod assigned -n "$tenant_ns" gvirtus.io/backend-pod=gvirtus-system/be-2 --overwrite
refused "edit gvirtus.io/backend-gpu" $P "refused: gvirtus.io/backend-gpu" "$tenant" \
  annotate pod assigned -n "$tenant_ns" gvirtus.io/backend-gpu=1 --overwrite
refused "remove gvirtus.io/assigned-by" $P "refused: gvirtus.io/assigned-by" "$tenant" \
  annotate pod assigned -n "$tenant_ns" gvirtus.io/assigned-by-
refused "add gvirtus.io/assigned-by to a waiting pod" $P "refused: gvirtus.io/assigned-by" "$tenant" \
  annotate pod waiting -n "$tenant_ns" gvirtus.io/assigned-by=webhook-b
refused "edit KAI's gpu-fraction of a GVirtuS pod" $P "fixed at its creation" "$tenant" \
  annotate pod assigned -n "$tenant_ns" gpu-fraction=0.1 --overwrite
refused "remove the label gvirtus.io/enabled" $P "refused: gvirtus.io/enabled" "$tenant" \
  label pod assigned -n "$tenant_ns" gvirtus.io/enabled-
refused "remove the gate gvirtus.io/backend" $P "only the GVirtuS webhook may remove the scheduling gate" "$tenant" \
  patch pod waiting -n "$tenant_ns" --type=json -p '[{"op": "remove", "path": "/spec/schedulingGates/0"}]'
refused "create a pod with the gate but no label" $P "only a pod labelled gvirtus.io/enabled=true may carry it" "$tenant" \
  create -f - < <(pod gated-unlabelled '{}' '{}' "$gate")
refused "create a pod with the webhook's annotations but no label" $P "gvirtus.io/backend-pod" "$tenant" \
  create -f - < <(pod forged-unlabelled '{}' '{"gvirtus.io/backend-pod": "gvirtus-system/be-1", "gvirtus.io/backend-gpu": "0"}' '[]')
refused "create a waiting GVirtuS pod with a forged assignment" $P "cannot carry the annotations of an assignment" "$tenant" \
  create -f - < <(pod forged-waiting "$gv" '{"gvirtus.io/backend-status": "waiting",
    "gvirtus.io/backend-pod": "gvirtus-system/be-1", "gvirtus.io/backend-gpu": "0",
    "gvirtus.io/assigned-by": "webhook-a"}' "$gate")

say "webhook: releases a waiting pod (annotations, gate, zone preference)"
release='[
  {"op": "remove", "path": "/metadata/annotations/gvirtus.io~1backend-status"},
  {"op": "add", "path": "/metadata/annotations/gvirtus.io~1backend", "value": "10.0.0.1:9999"},
  {"op": "add", "path": "/metadata/annotations/gvirtus.io~1backend-pod", "value": "gvirtus-system/be-1"},
  {"op": "add", "path": "/metadata/annotations/gvirtus.io~1properties", "value": "{}"},
  {"op": "add", "path": "/metadata/annotations/gvirtus.io~1assigned-by", "value": "webhook-a"},
  {"op": "add", "path": "/spec/affinity", "value": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution":
    [{"weight": 100, "preference": {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["z1"]}]}}]}}},
  {"op": "remove", "path": "/spec/schedulingGates/0"}]'
W=gvirtus-webhook-pods
refused "a required node affinity term" $W "may add only a preferred node affinity term" "$webhook" \
  patch pod waiting -n "$tenant_ns" --type=json -p '[{"op": "add", "path": "/spec/affinity", "value": {"nodeAffinity":
    {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions":
    [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["mf-pol-fe"]}]}]}}}}]'
allowed "release: backend annotations, gate removed, zone preference" "$webhook" \
  patch pod waiting -n "$tenant_ns" --type=json -p "$release"
# The scheduler binds the released pod and kwok marks it Running (status updates).
for _ in $(seq 1 60); do
  phase=$(k get pod waiting -n "$tenant_ns" -o jsonpath='{.spec.nodeName} {.status.phase}')
  [ "$phase" = "mf-pol-fe Running" ] && break
  sleep 1
done
[ "$phase" = "mf-pol-fe Running" ] && ok "released pod bound and Running (binding, status updates pass)" ||
  bad "released pod: node and phase \"$phase\""

say "webhook: refused"
refused "change a container's image" $W "not its containers, images" "$webhook" \
  patch pod assigned -n "$tenant_ns" --type=json -p '[{"op": "replace", "path": "/spec/containers/0/image", "value": "evil:1"}]'
refused "add a toleration" $W "tolerations" "$webhook" \
  patch pod assigned -n "$tenant_ns" --type=json -p '[{"op": "add", "path": "/spec/tolerations/-", "value": {"operator": "Exists"}}]'
refused "a label of a GVirtuS pod" $W "does not change the labels" "$webhook" \
  patch pod assigned -n "$tenant_ns" --type=merge -p '{"metadata": {"labels": {"team": "b"}}}'
refused "another annotation of a GVirtuS pod" $W "refused: example.com/note" "$webhook" \
  patch pod assigned -n "$tenant_ns" --type=merge -p '{"metadata": {"annotations": {"example.com/note": "theirs"}}}'
refused "a gvirtus.io/ annotation of a pod that is not a GVirtuS pod" $W "only GVirtuS pods" "$webhook" \
  patch pod plain -n "$tenant_ns" --type=merge -p '{"metadata": {"annotations": {"gvirtus.io/backend": "10.0.0.1:9999"}}}'
refused "label gvirtus.io/enabled=true after creation" "$P|$W" \
  "cannot be added to an existing pod|may change only GVirtuS pods" "$webhook" \
  patch pod plain -n "$tenant_ns" --type=merge -p '{"metadata": {"labels": {"gvirtus.io/enabled": "true"}}}'
webhook_pod=$(k get pods -n "$ns" -l app.kubernetes.io/name=gvirtus-webhook -o jsonpath='{.items[0].metadata.name}')
refused "its own replica's image" $W "only GVirtuS pods" "$webhook" \
  patch pod "$webhook_pod" -n "$ns" --type=json -p '[{"op": "replace", "path": "/spec/containers/0/image", "value": "evil:1"}]'

say "webhook as the backend follower: the condition gvirtus.io/BackendLost, deletes of owned pods"
lost='{"status": {"conditions": [{"type": "gvirtus.io/BackendLost", "status": "True",
  "reason": "BackendGone", "message": "backend pod gvirtus-system/be-1 is gone"}]}}'
allowed "condition gvirtus.io/BackendLost of a GVirtuS pod" "$webhook" \
  patch pod assigned/status -n "$tenant_ns" -p "$lost"
refused "another condition of a pod" $W "only the condition gvirtus.io/BackendLost" "$webhook" \
  patch pod assigned/status -n "$tenant_ns" -p '{"status": {"conditions": [{"type": "Ready", "status": "False"}]}}'
refused "the phase of a pod" $W "only the condition gvirtus.io/BackendLost" "$webhook" \
  patch pod assigned/status -n "$tenant_ns" -p '{"status": {"phase": "Failed"}}'
k create configmap owner -n "$tenant_ns" >/dev/null
owner_uid=$(k get configmap owner -n "$tenant_ns" -o jsonpath='{.metadata.uid}')
# owned NAME CONTROLLER KIND: a GVirtuS pod given a backend pod, owned by the ConfigMap as
# if it were an object of KIND (the policy reads the reference, not the owner).
owned() {
  pod "$1" "$gv" "$assigned_annotations" '[]' | jq --arg uid "$owner_uid" --argjson controller "$2" \
    --arg kind "$3" '.metadata.ownerReferences = [{"apiVersion": "v1", "kind": $kind,
      "name": "owner", "uid": $uid, "controller": $controller}]'
}
allowed "create an owned GVirtuS pod" "$tenant" create -f - < <(owned owned true ReplicaSet)
allowed "create a GVirtuS pod with an owner that is no controller" "$tenant" create -f - < <(owned loose false ReplicaSet)
allowed "create a GVirtuS pod owned by a controller that does not replace it" "$tenant" create -f - \
  < <(owned workflow true Workflow)
D=gvirtus-webhook-pod-deletes
refused "delete a bare GVirtuS pod" $D "no bare pod" "$webhook" delete pod assigned -n "$tenant_ns" --wait=false
refused "delete a GVirtuS pod whose owner is no controller" $D "no bare pod" "$webhook" \
  delete pod loose -n "$tenant_ns" --wait=false
refused "delete a GVirtuS pod whose owner does not replace it" $D "no bare pod" "$webhook" \
  delete pod workflow -n "$tenant_ns" --wait=false
refused "delete a pod that is not a GVirtuS pod" $D "no other pod" "$webhook" \
  delete pod plain -n "$tenant_ns" --wait=false
refused "delete its own replica" $D "no other pod" "$webhook" delete pod "$webhook_pod" -n "$ns" --wait=false
allowed "delete an owned GVirtuS pod given a backend pod" "$webhook" delete pod owned -n "$tenant_ns" --wait=false

say "webhook as the backend follower of DRA claimants (pods labelled gvirtus.io/dra): status, deletes"
# claimant NAME CLAIM CONTROLLER: a pod labelled gvirtus.io/dra with the one claim entry
# CLAIM, owned by the ConfigMap as if it were a ReplicaSet (its controller when CONTROLLER).
claimant() {
  pod "$1" '{"gvirtus.io/dra": "true"}' '{}' '[]' | jq --argjson claim "$2" --arg uid "$owner_uid" \
    --argjson controller "$3" '.spec.resourceClaims = [$claim] |
      .spec.containers[0].resources = {claims: [{name: $claim.name}]} |
      .metadata.ownerReferences = [{"apiVersion": "v1", "kind": "ReplicaSet", "name": "owner",
        "uid": $uid, "controller": $controller}]'
}
from_template='{"name": "gpu", "resourceClaimTemplateName": "gpu-4gi"}'
allowed "create an owned claimant, its claim from a template" "$tenant" create -f - \
  < <(claimant from-template "$from_template" true)
allowed "create an owned claimant of a claim by name" "$tenant" create -f - \
  < <(claimant by-name '{"name": "gpu", "resourceClaimName": "shared"}' true)
allowed "create a bare claimant" "$tenant" create -f - < <(claimant lone "$from_template" false)
allowed "condition gvirtus.io/BackendLost of a claimant" "$webhook" patch pod lone/status -n "$tenant_ns" -p "$lost"
refused "another condition of a claimant" $W "only the condition gvirtus.io/BackendLost" "$webhook" \
  patch pod lone/status -n "$tenant_ns" -p '{"status": {"conditions": [{"type": "Ready", "status": "False"}]}}'
refused "an annotation of a claimant" $W "the status of pods labelled gvirtus.io/dra" "$webhook" \
  patch pod lone -n "$tenant_ns" --type=merge -p '{"metadata": {"annotations": {"gvirtus.io/backend": "10.0.0.1:9999"}}}'
refused "an annotation of a claimant through its status" $W "the status of pods labelled gvirtus.io/dra" "$webhook" \
  patch pod lone/status -n "$tenant_ns" -p '{"metadata": {"annotations": {"gvirtus.io/backend": "10.0.0.1:9999"}}}'
# Labelled both ways, which a GVirtuS pod of --dra-claim-template is: what the webhook path
# writes is refused all the same.
refused "create a claimant that names a backend of the webhook path" $P "through its DRA claim.*gvirtus.io/backend" \
  "$tenant" create -f - < <(claimant forged "$from_template" true | jq '.metadata.labels["gvirtus.io/enabled"] = "true" |
    .metadata.annotations = {"gvirtus.io/backend": "10.0.0.1:9999", "gvirtus.io/backend-pod": "gvirtus-system/be-1"}')
refused "create a claimant with the webhook's gate" $P "through its DRA claim" "$tenant" create -f - \
  < <(claimant gated "$from_template" true | jq --argjson gate "$gate" \
    '.metadata.labels["gvirtus.io/enabled"] = "true" | .spec.schedulingGates = $gate')
refused "delete a bare claimant" $D "no bare pod" "$webhook" delete pod lone -n "$tenant_ns" --wait=false
refused "delete a claimant of a claim by name (recreating it would not help)" $D "no bare pod" "$webhook" \
  delete pod by-name -n "$tenant_ns" --wait=false
allowed "delete an owned claimant whose claim came from a template" "$webhook" \
  delete pod from-template -n "$tenant_ns" --wait=false

say "webhook as the backend autoscaler (overlays/autoscale's RBAC): the backend keys of nodes"
k apply -f "$repo/overlays/autoscale/rbac.yaml" >/dev/null
N=gvirtus-webhook-nodes
for _ in $(seq 1 30); do
  as "$webhook" auth can-i patch nodes 2>/dev/null | grep -q yes && break
  sleep 1
done
allowed "opt in: backend.allowed=true, autoscaled" "$webhook" patch node mf-pol-fe --type=json -p \
  '[{"op": "replace", "path": "/metadata/labels/gvirtus.io~1backend.allowed", "value": "true"},
    {"op": "add", "path": "/metadata/annotations/gvirtus.io~1autoscaled", "value": "2026-01-01T00:00:00Z"}]'
allowed "drain: backend.draining" "$webhook" patch node mf-pol-fe --type=merge \
  -p '{"metadata": {"annotations": {"gvirtus.io/backend.draining": "2026-01-01T00:10:00Z"}}}'
allowed "opt out: backend.allowed=false, annotations removed" "$webhook" patch node mf-pol-fe --type=json -p \
  '[{"op": "replace", "path": "/metadata/labels/gvirtus.io~1backend.allowed", "value": "false"},
    {"op": "remove", "path": "/metadata/annotations/gvirtus.io~1autoscaled"},
    {"op": "remove", "path": "/metadata/annotations/gvirtus.io~1backend.draining"}]'
refused "another gvirtus.io/ label" $N "refused: gvirtus.io/frontend.allowed" "$webhook" \
  patch node mf-pol-fe --type=merge -p '{"metadata": {"labels": {"gvirtus.io/frontend.allowed": "false"}}}'
refused "another label" $N "refused: example.com/pool" "$webhook" \
  patch node mf-pol-fe --type=merge -p '{"metadata": {"labels": {"example.com/pool": "x"}}}'
refused "cordon" $N "does not change a node's spec" "$webhook" \
  patch node mf-pol-fe -p '{"spec": {"unschedulable": true}}'
refused "remove backend.allowed" $N "never removes it" "$webhook" \
  patch node mf-pol-fe --type=merge -p '{"metadata": {"labels": {"gvirtus.io/backend.allowed": null}}}'
k delete -f "$repo/overlays/autoscale/rbac.yaml" >/dev/null

# pod_on KIND NODE: the name of that component's pod on NODE, once bound (up to 120s).
pod_on() {
  local name
  for _ in $(seq 1 120); do
    name=$(k get pods -n "$ns" -l "app.kubernetes.io/name=$1" --field-selector "spec.nodeName=$2" \
      -o jsonpath='{.items[0].metadata.name}' 2>/dev/null || true)
    [ -n "$name" ] && { echo "$name"; return; }
    sleep 1
  done
}

say "labeler: token bound to its pod on mf-pol-bare"
labeler_pod=$(pod_on gvirtus-labeler mf-pol-bare)
[ -n "$labeler_pod" ] || { bad "no labeler pod on mf-pol-bare"; finish; }
labeler=$(k create token gvirtus-labeler -n "$ns" --bound-object-kind Pod --bound-object-name "$labeler_pod" --duration=30m)
L=gvirtus-labeler-nodes
allowed "its node: the missing role labels and gpu.present" "$labeler" patch node mf-pol-bare --type=merge -p \
  '{"metadata": {"labels": {"gvirtus.io/frontend.allowed": "true", "gvirtus.io/backend.allowed": "false", "gvirtus.io/gpu.present": "false"}}}'
allowed "its node: gpu.present changes with the truth" "$labeler" label node mf-pol-bare gvirtus.io/gpu.present=true --overwrite
refused "its node: change an existing role label" $L "refused: gvirtus.io/backend.allowed" "$labeler" \
  label node mf-pol-bare gvirtus.io/backend.allowed=true --overwrite
refused "its node: remove gpu.present" $L "refused: gvirtus.io/gpu.present" "$labeler" \
  label node mf-pol-bare gvirtus.io/gpu.present-
refused "its node: another label" $L "refused: example.com/pool" "$labeler" label node mf-pol-bare example.com/pool=x
refused "its node: an annotation" $L "changes only labels of its node" "$labeler" annotate node mf-pol-bare example.com/a=b
refused "its node: a taint" $L "changes only labels of its node" "$labeler" \
  taint node mf-pol-bare example.com/evict=true:NoExecute
refused "another node" $L "may change only that node, not mf-pol-fe" "$labeler" \
  label node mf-pol-fe gvirtus.io/gpu.present=true --overwrite
unbound=$(k create token gvirtus-labeler -n "$ns" --duration=10m)
refused "a token bound to no pod" $L "this token names no node" "$unbound" \
  label node mf-pol-bare gvirtus.io/gpu.present=false --overwrite
# A node taken over holds its labeler's token: where the label is missing, it must not
# add it as "true" (the labeler's default is "false"; operators opt nodes in).
k label node mf-pol-bare gvirtus.io/backend.allowed- >/dev/null
refused "its node: add gvirtus.io/backend.allowed=true where missing" $L "refused: gvirtus.io/backend.allowed" \
  "$labeler" label node mf-pol-bare gvirtus.io/backend.allowed=true
allowed "its node: add gvirtus.io/backend.allowed=false where missing" "$labeler" \
  label node mf-pol-bare gvirtus.io/backend.allowed=false

say "backend shim: token bound to its pod on mf-pol-gpu1"
backend_pod=$(pod_on gvirtus-backend mf-pol-gpu1)
other_backend=$(pod_on gvirtus-backend mf-pol-gpu2)
[ -n "$backend_pod" ] && [ -n "$other_backend" ] || { bad "no backend pods on mf-pol-gpu1/2"; finish; }
shim=$(k create token gvirtus-backend -n "$ns" --bound-object-kind Pod --bound-object-name "$backend_pod" --duration=30m)
S=gvirtus-backend-pods
load='{"metadata": {"annotations": {"gvirtus.io/load":
  "{\"connections\":0,\"maxSessions\":16,\"gpus\":[],\"updated\":\"2026-01-01T00:00:00Z\"}"}}}'
allowed "its pod: gvirtus.io/load (merge patch, as the shim writes it)" "$shim" patch pod "$backend_pod" -n "$ns" \
  --type=merge -p "$load"
refused "its pod: another annotation" "$S|$P" "refused: gvirtus.io/backend-pod" "$shim" \
  patch pod "$backend_pod" -n "$ns" --type=merge -p '{"metadata": {"annotations": {"gvirtus.io/backend-pod": "x"}}}'
refused "its pod: a label" $S "not its labels, spec" "$shim" \
  patch pod "$backend_pod" -n "$ns" --type=merge -p '{"metadata": {"labels": {"example.com/x": "y"}}}'
refused "its pod: the image" $S "not its labels, spec" "$shim" patch pod "$backend_pod" -n "$ns" --type=json \
  -p '[{"op": "replace", "path": "/spec/containers/0/image", "value": "evil:1"}]'
refused "another backend's gvirtus.io/load" $S "may change only that pod, not $ns/$other_backend" "$shim" \
  patch pod "$other_backend" -n "$ns" --type=merge -p "$load"
refused "the webhook's image" $S "may change only that pod, not $ns/$webhook_pod" "$shim" \
  patch pod "$webhook_pod" -n "$ns" --type=json -p '[{"op": "replace", "path": "/spec/containers/0/image", "value": "evil:1"}]'
peers='{"metadata": {"annotations": {"gvirtus.io/peers": "10.244.0.5,10.244.0.6"}}}'
refused "its pod: gvirtus.io/peers (the addresses it lets connect)" "$S|$P" "refused: gvirtus.io/peers" "$shim" \
  patch pod "$backend_pod" -n "$ns" --type=merge -p "$peers"
refused "another backend's gvirtus.io/peers" "$S|$P" "may change only that pod, not $ns/$other_backend|refused: gvirtus.io/peers" \
  "$shim" patch pod "$other_backend" -n "$ns" --type=merge -p "$peers"
refused "its pod: gvirtus.io/peer-memory (the GPU memory caps of its pods)" "$S|$P" "refused: gvirtus.io/peer-memory" \
  "$shim" patch pod "$backend_pod" -n "$ns" --type=merge \
  -p '{"metadata": {"annotations": {"gvirtus.io/peer-memory": "10.244.0.5=999999"}}}'
allowed "read its pod (gvirtus.io/peers)" "$shim" get pod "$backend_pod" -n "$ns"
allowed "list its pod by name, as the shim's watch starts" "$shim" get pods -n "$ns" \
  --field-selector "metadata.name=$backend_pod"
allowed "watch pods in $ns" "$shim" auth can-i watch pods -n "$ns"
forbidden "read pods outside $ns" "$shim" get pods -n "$tenant_ns"
forbidden "a pod outside $ns" "$shim" patch pod plain -n "$tenant_ns" --type=merge -p "$load"
unbound=$(k create token gvirtus-backend -n "$ns" --duration=10m)
refused "a token bound to no pod" $S "this token names no pod" "$unbound" \
  patch pod "$backend_pod" -n "$ns" --type=merge -p "$load"
refused "tenant: gvirtus.io/load of its own pod" $P "refused: gvirtus.io/load" "$tenant" \
  annotate pod assigned -n "$tenant_ns" gvirtus.io/load=x
refused "tenant: gvirtus.io/peers of its own pod" $P "refused: gvirtus.io/peers" "$tenant" \
  annotate pod assigned -n "$tenant_ns" gvirtus.io/peers=10.6.6.6
forbidden "tenant: a backend pod's gvirtus.io/peers" "$tenant" \
  patch pod "$backend_pod" -n "$ns" --type=merge -p "$peers"

say "webhook: gvirtus.io/peers of a backend pod (the peer publisher), nothing else of it"
allowed "a backend pod's gvirtus.io/peers (merge patch, as the publisher writes it)" "$webhook" \
  patch pod "$backend_pod" -n "$ns" --type=merge -p "$peers"
allowed "the peers' GPU memory shares with them (one merge patch, as the publisher writes them)" \
  "$webhook" patch pod "$backend_pod" -n "$ns" --type=merge \
  -p '{"metadata": {"annotations": {"gvirtus.io/peers": "10.244.0.5,10.244.0.6", "gvirtus.io/peer-memory": "10.244.0.5=4096"}}}'
allowed "an empty list" "$webhook" \
  patch pod "$other_backend" -n "$ns" --type=merge -p '{"metadata": {"annotations": {"gvirtus.io/peers": ""}}}'
# Another value than the shim wrote above: an unchanged key is no change.
refused "a backend pod's gvirtus.io/load" $W "gvirtus.io/peer-memory annotations of a backend pod; refused: gvirtus.io/load" \
  "$webhook" patch pod "$backend_pod" -n "$ns" --type=merge \
  -p '{"metadata": {"annotations": {"gvirtus.io/load": "{\"connections\":0,\"maxSessions\":1}"}}}'
refused "gvirtus.io/peers and another annotation at once" $W "refused: example.com/note" "$webhook" \
  patch pod "$backend_pod" -n "$ns" --type=merge \
  -p '{"metadata": {"annotations": {"gvirtus.io/peers": "10.6.6.6", "example.com/note": "x"}}}'
refused "a backend pod's label" $W "does not change the labels" "$webhook" \
  patch pod "$backend_pod" -n "$ns" --type=merge -p '{"metadata": {"labels": {"example.com/x": "y"}}}'
refused "a backend pod's image" $W "not its (containers|spec)" "$webhook" \
  patch pod "$backend_pod" -n "$ns" --type=json -p '[{"op": "replace", "path": "/spec/containers/0/image", "value": "evil:1"}]'
refused "gvirtus.io/peers of its own replica" $W "only GVirtuS pods" "$webhook" \
  patch pod "$webhook_pod" -n "$ns" --type=merge -p "$peers"
[ "$(k get pod "$backend_pod" -n "$ns" -o jsonpath='{.metadata.annotations.gvirtus\.io/peers}')" = "10.244.0.5,10.244.0.6" ] &&
  ok "the backend pod carries the list written" || bad "the backend pod's gvirtus.io/peers is not the list written"

say "a node's own credentials (user system:node:mf-pol-bare in group system:nodes)"
# Impersonated by the admin: the API server authorizes and the policies judge that user,
# as for the kubelet's client certificate (tests/e2e/real/scenarios/96-tenant-attacks.sh
# uses a real kubelet's).
as_node() { k --as="system:node:$1" --as-group=system:nodes --as-group=system:authenticated "${@:2}" 2>&1; }
# node_refused WHAT FRAGMENT NODE kubectl-args...
node_refused() {
  local what=$1 fragment=$2 out; shift 2
  if out=$(as_node "$@"); then bad "$what: allowed"; return; fi
  if grep -q "ValidatingAdmissionPolicy 'gvirtus-kubelet-nodes'" <<<"$out" && grep -qE -- "$fragment" <<<"$out"; then
    ok "$what: refused: ${out##*denied request: }"
  else
    bad "$what: $out (want gvirtus-kubelet-nodes: ...$fragment...)"
  fi
}
if out=$(as_node mf-pol-bare label node mf-pol-bare example.com/rack=r1); then
  ok "its node: a label of its own (example.com/rack): allowed"
else
  bad "its node: a label of its own: refused: $out"
fi
node_refused "its node: opt in as a backend" "refused: gvirtus.io/backend.allowed" mf-pol-bare \
  label node mf-pol-bare gvirtus.io/backend.allowed=true --overwrite
node_refused "its node: remove the opt-out" "refused: gvirtus.io/backend.allowed" mf-pol-bare \
  label node mf-pol-bare gvirtus.io/backend.allowed-
node_refused "its node: mark itself a GPU node" "refused: gvirtus.io/gpu.present" mf-pol-fe \
  label node mf-pol-fe gvirtus.io/gpu.present=true --overwrite
node_refused "an opted-in node: lift the autoscaler's drain" "refused: gvirtus.io/backend.draining" mf-pol-gpu1 \
  annotate node mf-pol-gpu1 gvirtus.io/backend.draining=x
# Through nodes/status (a kubelet may patch it, not read it: kubectl cannot send that
# patch): tests/e2e/real/scenarios/96-tenant-attacks.sh, with a kubelet's certificate.
[ "$(k get node mf-pol-bare -o jsonpath='{.metadata.labels.gvirtus\.io/backend\.allowed}')" = false ] &&
  ok "mf-pol-bare is still opted out" || bad "mf-pol-bare's gvirtus.io/backend.allowed changed"
# A restarted kubelet registers again: that must fail as AlreadyExists, never be refused.
registration='{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "mf-pol-gpu1",
  "labels": {"gvirtus.io/backend.allowed": "true"}}}'
if out=$(as_node mf-pol-gpu1 create -f - <<<"$registration"); then
  bad "an opted-in node registers again: created"
elif grep -q AlreadyExists <<<"$out"; then
  ok "an opted-in node registers again (--node-labels): AlreadyExists, as the kubelet expects"
else
  bad "an opted-in node registers again: $out"
fi

say "the CA step (gvirtus-ca): its own Secret, of type kubernetes.io/tls, and nothing else"
ca=$(k create token gvirtus-ca -n "$ns" --duration=30m)
# secret NAME TYPE [METADATA-JSON-TAIL]: a Secret in $ns (a TLS one needs both keys).
secret() {
  printf '{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "%s", "namespace": "%s"%s},' "$1" "$ns" "${3:-}"
  printf ' "type": "%s", "data": {"tls.crt": "", "tls.key": ""}}' "$2"
}
allowed "gvirtus-ca: create Secret gvirtus-webhook-tls (dry run)" "$ca" \
  create --dry-run=server -f - <<<"$(secret gvirtus-webhook-tls kubernetes.io/tls)"
stolen=', "annotations": {"kubernetes.io/service-account.name": "gvirtus-backend"}'
refused "gvirtus-ca: a service-account-token Secret for gvirtus-backend" gvirtus-ca-secrets \
  "writes only Secret gvirtus-webhook-tls" "$ca" \
  create --dry-run=server -f - <<<"$(secret stolen-token kubernetes.io/service-account-token "$stolen")"
refused "gvirtus-ca: its Secret's name with another type" gvirtus-ca-secrets \
  "not gvirtus-webhook-tls of type Opaque" "$ca" \
  create --dry-run=server -f - <<<"$(secret gvirtus-webhook-tls Opaque)"
forbidden "webhook: the same token Secret (it creates no Secret)" "$webhook" \
  create --dry-run=server -f - <<<"$(secret stolen-token kubernetes.io/service-account-token "$stolen")"

say "KAI queues: a queue listed in ConfigMap $ns/gvirtus-kai-queues is only for its namespaces"
Q=gvirtus-kai-queues
k create configmap gvirtus-kai-queues -n "$ns" --from-literal=team-other=other-ns,second-ns \
  --from-literal="team-own=$tenant_ns" >/dev/null
# labelled NAME QUEUE [KEY]: a ConfigMap of the tenant's labelled with a KAI queue (KAI reads
# the label of a workload's top owner, whatever its kind), under KEY (default KAI's).
labelled() {
  printf '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "%s", "namespace": "%s",' "$1" "$tenant_ns"
  printf ' "labels": {"%s": "%s"}}}' "${3:-kai.scheduler/queue}" "$2"
}
deployment() {
  cat <<JSON
{"apiVersion": "apps/v1", "kind": "Deployment",
 "metadata": {"name": "$1", "namespace": "$tenant_ns", "labels": {"kai.scheduler/queue": "$2"}},
 "spec": {"selector": {"matchLabels": {"app": "$1"}},
          "template": {"metadata": {"labels": {"app": "$1"}},
                       "spec": {"containers": [{"name": "app", "image": "example.com/app:1"}]}}}}
JSON
}
# in_force LABELLED-ARGS...: a new parameter is in force within seconds: until the policy
# refuses the tenant's object labelled so, asked again.
in_force() {
  local out
  for _ in $(seq 1 60); do
    out=$(as "$tenant" create --dry-run=server -f - <<<"$(labelled "$@")" 2>&1 || true)
    grep -q "ValidatingAdmissionPolicy '$Q'" <<<"$out" && return 0
    sleep 0.5
  done
}
in_force probe team-other
refused "an object labelled another namespace's queue" $Q \
  "KAI queue team-other is only for namespace.s. other-ns,second-ns, not $tenant_ns" "$tenant" \
  create -f - <<<"$(labelled foreign team-other)"
refused "a Deployment labelled another namespace's queue" $Q "KAI queue team-other" "$tenant" \
  create -f - <<<"$(deployment foreign team-other)"
refused "a pod labelled another namespace's queue" $Q "KAI queue team-other" "$tenant" \
  create -f - < <(pod kai-foreign '{"kai.scheduler/queue": "team-other"}' '{}' '[]')
allowed "an object labelled its own namespace's queue" "$tenant" create -f - <<<"$(labelled own team-own)"
allowed "a Deployment labelled a queue no namespace owns" "$tenant" create -f - <<<"$(deployment open team-open)"
refused "relabel its own object to another namespace's queue" $Q "KAI queue team-other" "$tenant" \
  label configmap own -n "$tenant_ns" kai.scheduler/queue=team-other --overwrite
# A KAI installed with --queue-label-key=example.com/queue: the operator names the key.
k patch configmap gvirtus-kai-queues -n "$ns" --type=merge \
  -p '{"data": {"QUEUE_LABEL_KEY": "example.com/queue"}}' >/dev/null
in_force probe team-other example.com/queue
refused "an object labelled another namespace's queue under the key KAI was given" $Q \
  "KAI queue team-other is only for" "$tenant" \
  create -f - <<<"$(labelled foreign-key team-other example.com/queue)"
allowed "the same queue under kai.scheduler/queue, which that KAI does not read" "$tenant" \
  create -f - <<<"$(labelled default-key team-other)"
k delete configmap gvirtus-kai-queues -n "$ns" >/dev/null

say "the DaemonSet pods still run (kwok's status updates pass the policies)"
running=$(k get pods -n "$ns" --field-selector status.phase=Running -o name | wc -l)
[ "$running" -ge 6 ] && ok "$running pods Running in $ns" || bad "only $running pods Running in $ns"
finish
