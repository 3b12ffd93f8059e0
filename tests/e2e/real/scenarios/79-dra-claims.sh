#!/usr/bin/env bash
# Dynamic Resource Allocation on real nodes (docs/dra.md): with overlays/dra's changes
# applied to the running install, the webhook publishes each backend's GPU as a device of
# gpu.gvirtus.io, kube-scheduler allocates claims from them, and the frontend node's
# kubelet has the device plugin (--dra) prepare each claim: the properties.json in the pod
# names the backend GPU the scheduler allocated, through containerd's CDI support, and the
# pod reaches that backend (its NetworkPolicy admits gvirtus.io/dra, its peer list names
# the pod); a claimant without the label does not. A claim for more memory than any backend
# has stays Pending with the scheduler's reason. Deleting the pods unprepares the claims on
# the node. With --dra-claim-template, a pod labelled gvirtus.io/enabled alone gets its
# claim from the webhook and runs the same way. A ResourceQuota on the DeviceClass's devices
# counts those claims and refuses one more. A draining backend takes no new claim (its
# devices tainted NoSchedule on 1.37) and keeps the pods it has. A burst of 50 claims never gives a device
# more than its memory. Then the
# backends are rolled to GPUs of 80Gi (the stand-in NVML's GVIRTUS_STANDIN_GPU_GIB), which
# both removes backends mid-run and makes bigger ones appear: each old backend's slice is
# withdrawn, the waiting 64Gi claim runs on a new one, and a Deployment's pod whose claim
# was on an old backend is recreated onto a new one: on 1.37 evicted by
# kube-controller-manager for the DeviceTaintRule the webhook made (a pod whose claim
# tolerates the taint stays, and the rules go with the last claim), else deleted by the
# backend follower. The install is put back as it was at the end.
# shellcheck source=../../scenarios/lib.sh
source "$(dirname "$0")/../../scenarios/lib.sh"
# shellcheck source=../dra_lib.sh
source "$(dirname "$0")/../dra_lib.sh"
repo=$(cd "$(dirname "$0")/../../../.." && pwd)
frontend=${E2E_FRONTEND_NODE:-fe-a}
container=$(node_container "$frontend") || skip "needs the real-node harness (node containers)"
k get deviceclasses.resource.k8s.io >/dev/null 2>&1 || skip "the API server serves no resource.k8s.io/v1"
use_test_namespace
backends_rolled=false
restore() {
  dump_on_failure
  # A run that failed while a backend drained must not leave it draining for the next ones.
  [ -z "${drain_node:-}" ] || k annotate node "$drain_node" gvirtus.io/backend.draining- >/dev/null 2>&1 || true
  k delete namespace "$test_ns" --ignore-not-found --wait=true --timeout=120s >/dev/null 2>&1 || true
  if [ "$backends_rolled" = true ]; then
    k set env daemonset/gvirtus-backend -n "$system_ns" -c backend GVIRTUS_STANDIN_GPU_GIB- >/dev/null &&
      k rollout status daemonset/gvirtus-backend -n "$system_ns" --timeout=300s >/dev/null &&
      wait_until 120 "the old backend pods to go" no_backend_terminating ||
      say "could not put the backends back"
  fi
  bash "$repo/tests/e2e/real/dra.sh" off || say "could not put the install back"
}
no_backend_terminating() {
  local deleting
  deleting=$(k get pods -n "$system_ns" -l app.kubernetes.io/component=backend \
    -o jsonpath='{range .items[*]}{.metadata.deletionTimestamp}{"\n"}{end}') && [ -z "$deleting" ]
}
trap restore EXIT

say "overlays/dra's changes on the running install"
bash "$repo/tests/e2e/real/dra.sh" on gvirtus-gpu &&
  ok "webhook (--dra, --dra-claim-template=gvirtus-gpu) and device plugin (--dra) rolled out, the device plugin ready: registered as the DRA driver too" ||
  { bad "overlays/dra's changes did not roll out"; finish; }
registered() { docker exec "$container" test -S /var/lib/kubelet/plugins_registry/gpu.gvirtus.io-reg.sock; }
eventually "the driver's registration socket is in $frontend's plugins_registry" registered
slices() {
  k get resourceslices -o json | jq '[.items[] | select(.spec.driver == "gpu.gvirtus.io")] | length'
}
two_slices() { [ "$(slices)" = 2 ]; }
eventually "both backends' GPUs are published" two_slices || finish

{ claim_template gpu-4gi 4Gi; claim_template gvirtus-gpu 2Gi; claim_template gpu-64gi 64Gi; } |
  k apply -f - >/dev/null
# claim_pod NAME TEMPLATE [LABELS]: a pod on the frontend node that uses a claim made from
# TEMPLATE; labelled gvirtus.io/dra unless LABELS says otherwise.
claim_pod() {
  test_pod "$1" "  labels: {${3:-gvirtus.io/dra: \"true\"}}" "      resources: {claims: [{name: gpu}]}
  nodeSelector: {kubernetes.io/hostname: $frontend}
  resourceClaims: [{name: gpu, resourceClaimTemplateName: $2}]"
}
for pod in claim-1 claim-2; do claim_pod "$pod" gpu-4gi | k apply -f - >/dev/null; done
claim_pod unlabelled gpu-4gi "app: unlabelled" | k apply -f - >/dev/null
# A GVirtuS pod as on the label path: the webhook gives it the claim (--dra-claim-template).
test_pod wired '  labels: {gvirtus.io/enabled: "true"}' "  nodeSelector: {kubernetes.io/hostname: $frontend}" |
  k apply -f - >/dev/null
wiring=$(k get pod wired -n "$test_ns" -o json | jq -c '{dra: .metadata.labels["gvirtus.io/dra"],
  template: .spec.resourceClaims[0].resourceClaimTemplateName, uses: .spec.containers[0].resources.claims[0].name,
  gpu: .spec.containers[0].resources.limits["nvidia.com/gpu"], gates: .spec.schedulingGates}')
[ "$wiring" = '{"dra":"true","template":"gvirtus-gpu","uses":"gvirtus-gpu","gpu":null,"gates":null}' ] &&
  ok "a pod labelled gvirtus.io/enabled got the claim from the webhook, and nothing of the label path" ||
  bad "the webhook wired: $wiring"
claim_pod too-big gpu-64gi | k apply -f - >/dev/null
uids=()
for pod in claim-1 claim-2 wired; do
  running() { [ "$(jp pod "$pod" -n "$test_ns" -o 'jsonpath={.status.phase}')" = Running ]; }
  eventually "$pod (with a claim) runs on $frontend" running || continue
  claim=$(jp pod "$pod" -n "$test_ns" -o 'jsonpath={.status.resourceClaimStatuses[0].resourceClaimName}')
  # Through the backend's NetworkPolicy (the label) and its shim's peer list (the claim's
  # reservation, published by the webhook): the echo backend answers.
  check_allocated "$pod" "$claim"
  uid=$(k get resourceclaim "$claim" -n "$test_ns" -o jsonpath='{.metadata.uid}')
  docker exec "$container" test -f "/etc/cdi/gvirtus.io-claim_$uid.json" &&
    ok "$pod: the claim's CDI spec is on $frontend" || bad "$pod: no CDI spec for claim $uid on $frontend"
  uids+=("$uid")
done
# A pod that holds a claim but not the label: prepared and running, but neither the
# NetworkPolicy nor the peer list lets it reach a backend.
running_unlabelled() { [ "$(jp pod unlabelled -n "$test_ns" -o 'jsonpath={.status.phase}')" = Running ]; }
if eventually "a claimant without the label runs too" running_unlabelled && [ "${E2E_BACKEND_ECHO:-0}" = 1 ]; then
  claim=$(jp pod unlabelled -n "$test_ns" -o 'jsonpath={.status.resourceClaimStatuses[0].resourceClaimName}')
  pool=$(k get resourceclaim "$claim" -n "$test_ns" -o jsonpath='{.status.allocation.devices.results[0].pool}')
  backend_ip=$(k get pod "${pool#*/}" -n "${pool%%/*}" -o jsonpath='{.status.podIP}')
  reply=$(k exec -n "$test_ns" unlabelled -- timeout 5 tcp-echo-probe "$backend_ip" 9999 2>&1 || true)
  [ "$reply" != gvirtus ] && ok "it cannot reach its backend $backend_ip:9999" ||
    bad "a claimant without gvirtus.io/dra reached its backend"
fi
# The namespace's quota counts the claim path: Kubernetes counts the devices claims ask of a
# DeviceClass (docs/security.md). At the devices the claims above hold, one more claim of
# gpu.gvirtus.io is refused; the webhook's claim (pod wired) is among those counted.
device_quota=gpu.gvirtus.io.deviceclass.resource.k8s.io/devices
claims_made=$(k get resourceclaims -n "$test_ns" -o json |
  jq '[.items[] | select(.spec.devices.requests[0].exactly.deviceClassName == "gpu.gvirtus.io")] | length')
k create quota dra-gpus -n "$test_ns" --hard="$device_quota=$claims_made" >/dev/null
quota_used() { jp resourcequota dra-gpus -n "$test_ns" -o json | jq -r --arg r "$device_quota" '.status.used[$r] // empty'; }
counted() { [ "$(quota_used)" = "$claims_made" ]; }
if eventually "the quota counts the $claims_made claims of gpu.gvirtus.io (claim-1, claim-2, wired, ...)" counted; then
  if refusal=$(k create -n "$test_ns" -f - 2>&1 <<YAML
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: one-more}
spec:
  devices:
    requests: [{name: gpu, exactly: {deviceClassName: gpu.gvirtus.io}}]
YAML
  ); then
    bad "a claim beyond the quota was created: $refusal"
  else
    [[ $refusal == *"exceeded quota: dra-gpus"* ]] &&
      ok "one more claim of gpu.gvirtus.io is refused: ${refusal##*forbidden: }" ||
      bad "one more claim: $refusal"
  fi
fi
k delete quota dra-gpus -n "$test_ns" >/dev/null
# A draining backend (its node annotated gvirtus.io/backend.draining, as the autoscaler
# marks one it is about to opt out) takes no new claim: where the API server serves device
# taints (1.37) its devices stay published, tainted NoSchedule, and the pods already on
# them stay; elsewhere its slice is withdrawn.
# The backend holding most of the claims above is the one drained: kube-scheduler may have
# put them all on one GPU, and the two 4Gi claims below must fit on the other.
busiest=$(k get resourceclaims -n "$test_ns" -o json |
  jq -r '[.items[].status.allocation.devices.results[0].pool // empty] | group_by(.) | max_by(length) | .[0] // empty')
drain_node=""
[ -z "$busiest" ] || drain_node=$(jp pod "${busiest#*/}" -n "${busiest%%/*}" -o 'jsonpath={.spec.nodeName}')
drain_node=${drain_node:-${E2E_BACKEND2_NODE:-gpu-b}}
drain_pool=$(jp pods -n "$system_ns" -l app.kubernetes.io/component=backend \
  --field-selector "spec.nodeName=$drain_node" -o 'jsonpath={.items[0].metadata.namespace}/{.items[0].metadata.name}')
# The devices of the drained backend's slice, as JSON.
drain_devices() {
  k get resourceslices -o json | jq -c --arg pool "$drain_pool" \
    '[.items[] | select(.spec.driver == "gpu.gvirtus.io" and .spec.pool.name == $pool) | .spec.devices[]]'
}
k annotate node "$drain_node" gvirtus.io/backend.draining=true --overwrite >/dev/null
if k get devicetaintrules.resource.k8s.io >/dev/null 2>&1; then
  tainted() {
    drain_devices | jq -e 'length > 0 and all(.[]; any(.taints[]?;
      .key == "gpu.gvirtus.io/draining" and .effect == "NoSchedule"))' >/dev/null
  }
  eventually "$drain_pool's devices stay published, tainted NoSchedule" tainted
  for pod in after-drain-1 after-drain-2; do claim_pod "$pod" gpu-4gi | k apply -f - >/dev/null; done
  for pod in after-drain-1 after-drain-2; do
    pool_of() {
      local claim
      claim=$(jp pod "$pod" -n "$test_ns" -o 'jsonpath={.status.resourceClaimStatuses[0].resourceClaimName}')
      [ -n "$claim" ] && k get resourceclaim "$claim" -n "$test_ns" -o jsonpath='{.status.allocation.devices.results[0].pool}'
    }
    allocated() { [ -n "$(pool_of)" ]; }
    eventually "$pod's claim is allocated" allocated
    [ "$(pool_of)" != "$drain_pool" ] && ok "$pod's claim went to $(pool_of), not to the draining $drain_pool" ||
      bad "$pod's claim was allocated on the draining $drain_pool"
  done
  k delete pod after-drain-1 after-drain-2 -n "$test_ns" --wait=false >/dev/null
else
  withdrawn() { [ "$(drain_devices)" = "[]" ]; }
  eventually "$drain_pool's slice is withdrawn (no device taints on this API server)" withdrawn
fi
for pod in claim-1 claim-2 wired; do
  [ "$(jp pod "$pod" -n "$test_ns" -o 'jsonpath={.status.phase}')" = Running ] &&
    ok "$pod still runs while $drain_node drains" || bad "$pod is no longer running"
done
k annotate node "$drain_node" gvirtus.io/backend.draining- >/dev/null
untainted() { drain_devices | jq -e 'length > 0 and all(.[]; (.taints // []) == [])' >/dev/null; }
eventually "$drain_pool's devices are offered again once the drain is called off" untainted
# The extended-resource path: an unchanged Deployment asks for gvirtus.io/gpu, which the
# DeviceClass names and no device plugin advertises; kube-scheduler makes its claim.
if [ "$(k get deviceclass gpu.gvirtus.io -o 'jsonpath={.spec.extendedResourceName}')" != gvirtus.io/gpu ]; then
  say "the extended-resource path: not tested, the API server dropped the DeviceClass's extendedResourceName (DRAExtendedResource off: Kubernetes 1.34-1.35 without the feature gate)"
else
  # plain_spec QUANTITY: a pod spec, indented for a Deployment's template, that asks for
  # QUANTITY of gvirtus.io/gpu and carries nothing of GVirtuS.
  plain_spec() {
    cat <<YAML
    spec:
      terminationGracePeriodSeconds: 1
      nodeSelector: {kubernetes.io/hostname: $frontend}
      containers:
        - {name: app, image: $test_image, command: ["sleep", "3600"], resources: {limits: {gvirtus.io/gpu: "$1"}}}
YAML
  }
  if refusal=$({ printf 'apiVersion: v1\nkind: Pod\nmetadata: {name: two, namespace: %s}\n' "$test_ns"
    plain_spec 2 | sed 's/^    //'; } | k apply -f - 2>&1); then
    bad "a pod asking for 2 gvirtus.io/gpu was created: $refusal"
  else
    [[ $refusal == *"a GVirtuS frontend talks to one remote GPU; ask for 1"* ]] &&
      ok "a pod asking for 2 gvirtus.io/gpu is refused: ${refusal##*denied the request: }" ||
      bad "a pod asking for 2 gvirtus.io/gpu: $refusal"
  fi
  cat <<YAML | k apply -f - >/dev/null
apiVersion: apps/v1
kind: Deployment
metadata: {name: plain, namespace: $test_ns}
spec:
  replicas: 1
  selector: {matchLabels: {app: plain}}
  template:
    metadata: {labels: {app: plain}}
$(plain_spec 1)
YAML
  plain_pod() { jp pods -n "$test_ns" -l app=plain -o 'jsonpath={.items[0].metadata.name}'; }
  plain_runs() { [ "$(jp pods -n "$test_ns" -l app=plain -o 'jsonpath={.items[0].status.phase}')" = Running ]; }
  if eventually "an unchanged Deployment asking for gvirtus.io/gpu: 1 runs on $frontend" plain_runs; then
    pod=$(plain_pod)
    facts=$(k get pod "$pod" -n "$test_ns" -o json | jq -c '{dra: .metadata.labels["gvirtus.io/dra"],
      claims: .spec.resourceClaims, claim: .status.extendedResourceClaimStatus.resourceClaimName}')
    claim=$(jq -r .claim <<<"$facts")
    [ "$(jq -c '{dra, claims}' <<<"$facts")" = '{"dra":"true","claims":null}' ] && [ "$claim" != null ] &&
      ok "$pod: labelled gvirtus.io/dra by the webhook, no claim in its spec; kube-scheduler made $claim" ||
      bad "$pod: $facts"
    check_allocated "$pod" "$claim" gvirtus.io/gpu
  fi
  k delete deployment plain -n "$test_ns" --wait=true --timeout=120s >/dev/null
fi

unschedulable() {
  [ "$(jp pod too-big -n "$test_ns" -o 'jsonpath={.status.conditions[?(@.type=="PodScheduled")].reason}')" = Unschedulable ]
}
eventually "a claim of 64Gi (no backend has it) stays Pending, Unschedulable" unschedulable &&
  say "its reason: $(jp pod too-big -n "$test_ns" -o 'jsonpath={.status.conditions[?(@.type=="PodScheduled")].message}')"

# too-big waits on, for a bigger backend.
k delete pod claim-1 claim-2 wired unlabelled -n "$test_ns" --wait=true --timeout=120s >/dev/null
for uid in "${uids[@]}"; do
  unprepared() { ! docker exec "$container" test -e "/etc/cdi/gvirtus.io-claim_$uid.json"; }
  eventually "claim $uid unprepared: its CDI spec is gone from $frontend" unprepared
done

# The claims made for those pods go with them: the burst starts on free GPUs.
released() { [ "$(k get resourceclaims -n "$test_ns" -o name | grep -vc too-big)" = 0 ]; }
eventually "the claims made for those pods are deleted with them" released

# A burst: 50 pods with a claim of 3Gi each, created at once. Each backend GPU has 16Gi, so
# 5 fit on each of the two and 40 stay Pending; no device is ever given more than its memory.
claim_template gpu-3gi 3Gi | k apply -f - >/dev/null
burst=""
for i in $(seq 1 50); do burst+="---
$(claim_pod "burst-$i" gpu-3gi 'gvirtus.io/dra: "true", burst: "true"')
"; done
k apply -f - <<<"$burst" >/dev/null
# "POOL/DEVICE" of every allocated claim of the burst, one per line.
allocated() {
  k get resourceclaims -n "$test_ns" -o json | jq -r '.items[] | select(.metadata.name | startswith("burst-")) |
    .status.allocation.devices.results[0]? | select(. != null) | "\(.pool)/\(.device)"'
}
pending() {
  k get pods -n "$test_ns" -o json | jq '[.items[] | select(.metadata.name | startswith("burst-")) |
    select(any(.status.conditions[]?; .type == "PodScheduled" and .reason == "Unschedulable"))] | length'
}
placed_and_refused() { [ "$(allocated | grep -c .)" = 10 ] && [ "$(pending)" = 40 ]; }
eventually "50 claims at once: 10 allocated, 40 Pending Unschedulable" placed_and_refused
per_device=$(allocated | sort | uniq -c | awk '{print $2 "=" $1}' | tr '\n' ' ')
most=$(allocated | sort | uniq -c | awk '{print $1}' | sort -n | tail -1)
[ "${most:-0}" -le 5 ] && ok "no device holds more than its 16Gi (5 of 3Gi): $per_device" ||
  bad "a device was given more than its memory: $per_device"
k delete pods -n "$test_ns" -l burst=true --wait=true --timeout=120s >/dev/null

# claim_deployment NAME TEMPLATE: a Deployment of one pod on the frontend node, labelled
# gvirtus.io/dra, whose claim is made from TEMPLATE.
claim_deployment() {
  cat <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: $1, namespace: $test_ns}
spec:
  replicas: 1
  selector: {matchLabels: {app: $1}}
  template:
    metadata: {labels: {app: $1, gvirtus.io/dra: "true"}}
    spec:
      terminationGracePeriodSeconds: 1
      nodeSelector: {kubernetes.io/hostname: $frontend}
      resourceClaims: [{name: gpu, resourceClaimTemplateName: $2}]
      containers:
        - {name: app, image: $test_image, command: ["sleep", "3600"], resources: {claims: [{name: gpu}]}}
YAML
}
# A Deployment's pod with a claim, on a backend that is about to go.
claim_deployment infer gpu-4gi | k apply -f - >/dev/null
# With device taints (Kubernetes 1.37), a Deployment whose claims tolerate the lost-backend
# taint: its pod stays on the lost backend.
taints=false
# (grep reads it all: with pipefail, grep -q could end the pipeline before kubectl, and fail it)
if k api-resources --api-group=resource.k8s.io -o name | grep -x devicetaintrules.resource.k8s.io >/dev/null; then
  taints=true
  cat <<YAML | k apply -f - >/dev/null
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: gpu-tolerant, namespace: $test_ns}
spec:
  spec:
    devices:
      requests:
        - name: gpu
          exactly:
            deviceClassName: gpu.gvirtus.io
            tolerations: [{key: gpu.gvirtus.io/backend-lost, operator: Exists, effect: NoExecute}]
---
$(claim_deployment tolerant gpu-tolerant)
YAML
  tolerant_runs() { [ "$(jp pods -n "$test_ns" -l app=tolerant -o 'jsonpath={.items[0].status.phase}')" = Running ]; }
  eventually "a Deployment's pod whose claim tolerates gpu.gvirtus.io/backend-lost runs" tolerant_runs
  tolerant_uid=$(jp pods -n "$test_ns" -l app=tolerant -o 'jsonpath={.items[0].metadata.uid}')
else
  say "device taints: the API server serves no DeviceTaintRules (Kubernetes 1.36 or older): the follower deletes"
fi
# "POD UID POOL" of the infer pod that runs (not being deleted), its claim's pool.
infer_pod() {
  local line name uid claim
  line=$(jp pods -n "$test_ns" -l app=infer -o 'jsonpath={range .items[*]}{.metadata.name} {.metadata.uid} {.status.phase} {.metadata.deletionTimestamp}{"\n"}{end}' |
    awk '$3 == "Running" && NF == 3' | head -1)
  read -r name uid _ <<<"$line"
  [ -n "$name" ] || return 1
  claim=$(jp pod "$name" -n "$test_ns" -o 'jsonpath={.status.resourceClaimStatuses[0].resourceClaimName}')
  echo "$name $uid $(k get resourceclaim "$claim" -n "$test_ns" -o 'jsonpath={.status.allocation.devices.results[0].pool}')"
}
infer_runs() { [ -n "$(infer_pod | awk '$3 != ""')" ]; }
eventually "a Deployment's pod with a claim of 4Gi runs" infer_runs || finish
read -r old_pod old_uid old_pool <<<"$(infer_pod)"
say "$old_pod runs with its claim on $old_pool"

# The backends rolled to GPUs of 80Gi: every backend pod of now goes, and bigger ones come.
mapfile -t old_backends < <(k get pods -n "$system_ns" -l app.kubernetes.io/component=backend \
  -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}')
[ ${#old_backends[@]} = 2 ] || { bad "2 backend pods expected, found: ${old_backends[*]}"; finish; }
backends_rolled=true
k set env daemonset/gvirtus-backend -n "$system_ns" -c backend GVIRTUS_STANDIN_GPU_GIB=80 >/dev/null
slice_of() {
  k get resourceslices -o json | jq -r --arg pool "$system_ns/$1" \
    '.items[] | select(.spec.driver == "gpu.gvirtus.io" and .spec.pool.name == $pool) | .metadata.name'
}
for backend in "${old_backends[@]}"; do
  withdrawn() { [ -z "$(slice_of "$backend")" ]; }
  timeout_s=300 eventually "backend pod $backend gone: its slice is withdrawn" withdrawn
done
k rollout status daemonset/gvirtus-backend -n "$system_ns" --timeout=300s >/dev/null ||
  bad "the backends did not roll out"
big_slices() {
  [ "$(k get resourceslices -o json | jq '[.items[] | select(.spec.driver == "gpu.gvirtus.io") |
    .spec.devices[] | select(.capacity.memory.value == "80Gi")] | length')" = 2 ]
}
eventually "the new backends' GPUs of 80Gi are published" big_slices
too_big_runs() { [ "$(jp pod too-big -n "$test_ns" -o 'jsonpath={.status.phase}')" = Running ]; }
if eventually "the claim of 64Gi that waited runs on a bigger backend" too_big_runs; then
  claim=$(jp pod too-big -n "$test_ns" -o 'jsonpath={.status.resourceClaimStatuses[0].resourceClaimName}')
  pool=$(k get resourceclaim "$claim" -n "$test_ns" -o jsonpath='{.status.allocation.devices.results[0].pool}')
  [[ " ${old_backends[*]} " != *" ${pool#*/} "* ]] && ok "its device is on the new backend pod $pool" ||
    bad "the 64Gi claim was allocated on $pool, an old backend"
fi
# The Deployment's pod was deleted once its backend was gone (by kube-controller-manager for
# the device taint where DeviceTaintRules are served, else by the backend follower); the
# pod its ReplicaSet made has a claim on a new backend.
recreated() {
  local name uid pool
  read -r name uid pool <<<"$(infer_pod)"
  [ -n "$pool" ] && [ "$uid" != "$old_uid" ] && [[ " ${old_backends[*]} " != *" ${pool#*/} "* ]]
}
eventually "$old_pod (claim on $old_pool, gone) is recreated, its new claim on a new backend" recreated &&
  say "now: $(infer_pod)"
# event_on POD REASON: an Event of REASON names POD.
event_on() {
  k get events -n "$test_ns" --field-selector reason="$2" \
    -o jsonpath='{range .items[*]}{.involvedObject.name}{"\n"}{end}' | grep -qx "$1"
}
if [ "$taints" = true ]; then
  eventually "an Event DeviceTaintManagerEviction (kube-controller-manager's) on $old_pod" \
    event_on "$old_pod" DeviceTaintManagerEviction
  eventually "the webhook's Event BackendLost on $old_pod names the taint" event_on "$old_pod" BackendLost &&
    say "$(k get events -n "$test_ns" --field-selector reason=BackendLost,involvedObject.name="$old_pod" \
      -o jsonpath='{.items[0].message}')"
  ! event_on "$old_pod" BackendLostRecreated && ok "the backend follower did not delete $old_pod itself" ||
    bad "the backend follower deleted $old_pod although the device taint was served"
  rules=$(k get devicetaintrules -l app.kubernetes.io/managed-by=gvirtus-webhook -o name | sort | tr '\n' ' ')
  [ -n "$rules" ] && ok "the lost backends' DeviceTaintRules: $rules" || bad "no DeviceTaintRule of a lost backend"
  now_uid=$(jp pods -n "$test_ns" -l app=tolerant -o 'jsonpath={.items[0].metadata.uid}')
  [ -n "$tolerant_uid" ] && [ "$now_uid" = "$tolerant_uid" ] &&
    ok "the pod whose claim tolerates the taint stays (uid $now_uid)" ||
    bad "the tolerating pod was replaced: $tolerant_uid, now $now_uid"
  k delete deployment tolerant -n "$test_ns" --wait=true --timeout=120s >/dev/null
  rules_gone() { [ -z "$(k get devicetaintrules -l app.kubernetes.io/managed-by=gvirtus-webhook -o name)" ]; }
  eventually "the rules go once no claim holds the lost devices" rules_gone
else
  eventually "an Event BackendLostRecreated on $old_pod says why" event_on "$old_pod" BackendLostRecreated
fi
finish
