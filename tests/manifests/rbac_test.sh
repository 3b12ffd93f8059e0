#!/usr/bin/env bash
# The RBAC of manifests/ holds: `kubectl auth can-i --as` each ServiceAccount allows what
# the component does and refuses the rest (least privilege, see each rbac.yaml). Which
# object and which keys a patch may touch is the admission policies' (manifests/policy),
# checked with real requests by tenant_policy_test.sh.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
dra_objects=(-f "$repo/overlays/dra/deviceclass.yaml" -f "$repo/overlays/dra/rbac.yaml" -f "$repo/overlays/dra/policy.yaml")
cleanup() {
  k delete "${dra_objects[@]}" --ignore-not-found >/dev/null 2>&1 || true
  delete_manifests
}
trap cleanup EXIT
cleanup

say "kubectl apply -k manifests/"
k apply -k "$manifests" >/dev/null 2>&1 || { k apply -k "$manifests"; bad "apply -k failed"; finish; }

# expect yes|no SERVICEACCOUNT VERB RESOURCE[/NAME][#SUBRESOURCE] [NAMESPACE]
expect() {
  local want=$1 sa=$2 verb=$3 resource=$4 namespace=${5:-} args=() got
  [ -n "$namespace" ] && args=(-n "$namespace")
  if [[ $resource == *'#'* ]]; then
    args+=(--subresource "${resource#*#}")
    resource=${resource%%#*}
  fi
  got=$(k auth can-i "$verb" "$resource" "${args[@]}" --as="system:serviceaccount:$ns:$sa" 2>/dev/null || true)
  local what="$sa: $verb $resource${namespace:+ -n $namespace}"
  [ "$got" = "$want" ] && ok "$what -> $got" || bad "$what -> ${got:-error}, want $want"
}

# expect_group yes|no SERVICEACCOUNT VERB GROUP RESOURCE NAMESPACE: for a resource whose
# CRD may not be installed (kubectl auth can-i answers "no" for a type it cannot find),
# asked with a SubjectAccessReview.
expect_group() {
  local want=$1 sa=$2 verb=$3 group=$4 resource=$5 namespace=$6 got
  got=$(k create -o jsonpath='{.status.allowed}' -f - 2>/dev/null <<SAR || true
apiVersion: authorization.k8s.io/v1
kind: SubjectAccessReview
spec:
  user: system:serviceaccount:$ns:$sa
  groups: ["system:serviceaccounts", "system:serviceaccounts:$ns", "system:authenticated"]
  resourceAttributes: {verb: $verb, group: $group, resource: $resource, namespace: $namespace}
SAR
  )
  case $got in true) got=yes ;; false) got=no ;; esac
  local what="$sa: $verb $resource.$group -n $namespace"
  [ "$got" = "$want" ] && ok "$what -> $got" || bad "$what -> ${got:-error}, want $want"
}

say "gvirtus-labeler: get, list, watch, patch nodes; nothing else"
for verb in get list watch patch; do expect yes gvirtus-labeler "$verb" nodes; done
for verb in create update delete deletecollection; do expect no gvirtus-labeler "$verb" nodes; done
expect no gvirtus-labeler patch "nodes#status"
expect no gvirtus-labeler get pods default
expect no gvirtus-labeler list pods "$ns"
expect no gvirtus-labeler get secrets "$ns"
expect no gvirtus-labeler create events default
expect no gvirtus-labeler get leases.coordination.k8s.io "$ns"

say "gvirtus-webhook"
# Pods and nodes through watch caches (list, watch), never one by one (get).
# delete and status: the backend follower (narrowed by gvirtus-webhook-pod-deletes and
# gvirtus-webhook-pods: tests/manifests/tenant_policy_test.sh).
for verb in list watch patch delete; do expect yes gvirtus-webhook "$verb" pods default; done
expect yes gvirtus-webhook list pods "$ns"
for verb in get create update deletecollection; do expect no gvirtus-webhook "$verb" pods default; done
expect no gvirtus-webhook create "pods#eviction" default
expect no gvirtus-webhook get "pods#log" default
expect yes gvirtus-webhook patch "pods#status" default
expect no gvirtus-webhook update "pods#status" default
for verb in list watch; do expect yes gvirtus-webhook "$verb" nodes; done
expect no gvirtus-webhook get nodes
expect no gvirtus-webhook patch nodes
expect yes gvirtus-webhook create events default
expect yes gvirtus-webhook patch events default
expect no gvirtus-webhook delete events default
expect_group yes gvirtus-webhook list scheduling.run.ai podgroups default
expect_group yes gvirtus-webhook watch scheduling.run.ai podgroups default
expect_group no gvirtus-webhook patch scheduling.run.ai podgroups default
# Its own Secret through a watch cache by name (the TLS bootstrap's), never one by one.
# The own CA's Secret and configuration are read only: the CA step (gvirtus-ca) writes them.
for verb in list watch; do expect yes gvirtus-webhook "$verb" secrets/gvirtus-webhook-tls "$ns"; done
for verb in get update patch; do expect no gvirtus-webhook "$verb" secrets/gvirtus-webhook-tls "$ns"; done
expect no gvirtus-webhook create secrets "$ns"
expect no gvirtus-webhook get secrets/other "$ns"
expect no gvirtus-webhook list secrets "$ns"
expect no gvirtus-webhook delete secrets/gvirtus-webhook-tls "$ns"
expect no gvirtus-webhook get secrets/gvirtus-webhook-tls default
expect no gvirtus-webhook create secrets default
expect yes gvirtus-webhook get leases.coordination.k8s.io/gvirtus-webhook "$ns"
expect yes gvirtus-webhook update leases.coordination.k8s.io/gvirtus-webhook "$ns"
expect yes gvirtus-webhook create leases.coordination.k8s.io "$ns"
expect no gvirtus-webhook update leases.coordination.k8s.io/other "$ns"
expect no gvirtus-webhook delete leases.coordination.k8s.io/gvirtus-webhook "$ns"
expect no gvirtus-webhook create leases.coordination.k8s.io default
for verb in list watch; do
  expect yes gvirtus-webhook "$verb" mutatingwebhookconfigurations.admissionregistration.k8s.io/gvirtus-webhook
done
for verb in get patch update; do
  expect no gvirtus-webhook "$verb" mutatingwebhookconfigurations.admissionregistration.k8s.io/gvirtus-webhook
done
expect no gvirtus-webhook list mutatingwebhookconfigurations.admissionregistration.k8s.io
expect no gvirtus-webhook patch mutatingwebhookconfigurations.admissionregistration.k8s.io/other
expect no gvirtus-webhook delete mutatingwebhookconfigurations.admissionregistration.k8s.io/gvirtus-webhook
expect no gvirtus-webhook create mutatingwebhookconfigurations.admissionregistration.k8s.io
expect no gvirtus-webhook patch validatingwebhookconfigurations.admissionregistration.k8s.io/gvirtus-webhook
expect no gvirtus-webhook get configmaps "$ns"
expect no gvirtus-webhook create resourceslices.resource.k8s.io

say "gvirtus-ca: its Secret and the caBundle of its configuration; nothing else"
for verb in list watch update; do expect yes gvirtus-ca "$verb" secrets/gvirtus-webhook-tls "$ns"; done
for verb in get delete; do expect no gvirtus-ca "$verb" secrets/gvirtus-webhook-tls "$ns"; done
expect yes gvirtus-ca create secrets "$ns"
expect no gvirtus-ca list secrets "$ns"
expect no gvirtus-ca get secrets/other "$ns"
expect no gvirtus-ca create secrets default
for verb in list watch patch; do
  expect yes gvirtus-ca "$verb" mutatingwebhookconfigurations.admissionregistration.k8s.io/gvirtus-webhook
done
for verb in get update delete; do
  expect no gvirtus-ca "$verb" mutatingwebhookconfigurations.admissionregistration.k8s.io/gvirtus-webhook
done
expect no gvirtus-ca patch mutatingwebhookconfigurations.admissionregistration.k8s.io/other
expect no gvirtus-ca patch validatingwebhookconfigurations.admissionregistration.k8s.io/gvirtus-webhook
for check in "get pods $ns" "list pods default" "list nodes" "create events $ns" \
    "get leases.coordination.k8s.io $ns" "get configmaps $ns"; do
  # shellcheck disable=SC2086
  expect no gvirtus-ca $check
done

say "gvirtus-backend: patch pods in $ns (its own pod: policy gvirtus-backend-pods), read them (its pod's gvirtus.io/peers); nothing else"
for verb in get list watch patch; do expect yes gvirtus-backend "$verb" pods "$ns"; done
for verb in create update delete; do expect no gvirtus-backend "$verb" pods "$ns"; done
expect no gvirtus-backend patch "pods#status" "$ns"
expect no gvirtus-backend get pods default
expect no gvirtus-backend list pods default
expect no gvirtus-backend watch pods default
expect no gvirtus-backend patch pods default
expect no gvirtus-backend get nodes
expect no gvirtus-backend get secrets "$ns"

say "gvirtus-device-plugin: no API access at all"
for check in "get pods $ns" "list pods default" "get nodes" "patch nodes" "get secrets $ns" \
    "create events $ns" "get configmaps $ns" "get leases.coordination.k8s.io $ns"; do
  # shellcheck disable=SC2086
  expect no gvirtus-device-plugin $check
done
# What every ServiceAccount may do (discovery, self reviews, and what the API server's
# version grants all authenticated users, e.g. reading ClusterTrustBundles) is all that is
# left: the grants of an account that has no binding at all are subtracted.
grants() { k auth can-i --list --as="system:serviceaccount:$ns:$1" -n "$ns" 2>/dev/null | awk 'NR > 1' | sort || true; }
granted=$(comm -23 <(grants gvirtus-device-plugin) <(grants gvirtus-nobody))
[ -z "$granted" ] && ok "gvirtus-device-plugin: nothing beyond what every account may do" ||
  bad "gvirtus-device-plugin has grants: $granted"
token=$(k get serviceaccount gvirtus-device-plugin -n "$ns" -o jsonpath='{.automountServiceAccountToken}')
pod_token=$(k get daemonset gvirtus-device-plugin -n "$ns" -o jsonpath='{.spec.template.spec.automountServiceAccountToken}')
[ "$token $pod_token" = "false false" ] && ok "no token mounted (ServiceAccount and pod)" ||
  bad "automountServiceAccountToken: ServiceAccount $token, pod $pod_token"

say "real requests with gvirtus-webhook's token (not only access reviews)"
# Its MutatingWebhookConfiguration is watched by name (a field selector), which is what
# makes resourceNames apply to list and watch.
server=$(k config view --minify --raw -o jsonpath='{.clusters[0].cluster.server}')
ca_file=$(k config view --minify --raw -o jsonpath='{.clusters[0].cluster.certificate-authority}')
ca_data=$(k config view --minify --raw -o jsonpath='{.clusters[0].cluster.certificate-authority-data}')
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"; cleanup' EXIT
if [ -z "$ca_file" ]; then ca_file=$scratch/ca.crt; base64 -d <<<"$ca_data" >"$ca_file"; fi
token=$(k create token gvirtus-webhook -n "$ns" --duration=10m)
as_webhook() {
  kubectl --kubeconfig=/dev/null --server="$server" --certificate-authority="$ca_file" \
    --token="$token" --request-timeout=30s "$@"
}
if as_webhook get mutatingwebhookconfigurations --field-selector metadata.name=gvirtus-webhook -o name >/dev/null 2>&1; then
  ok "list mutatingwebhookconfigurations with fieldSelector metadata.name=gvirtus-webhook"
else
  bad "cannot list its own MutatingWebhookConfiguration by field selector"
fi
if as_webhook get mutatingwebhookconfigurations --field-selector metadata.name=gvirtus-webhook \
    --watch --request-timeout=2s >/dev/null 2>"$scratch/watch.err" || ! grep -qi forbidden "$scratch/watch.err"; then
  ok "watch it by field selector"
else
  bad "cannot watch its own MutatingWebhookConfiguration: $(cat "$scratch/watch.err")"
fi
if as_webhook get mutatingwebhookconfigurations -o name >/dev/null 2>&1; then
  bad "lists every MutatingWebhookConfiguration"
else
  ok "cannot list MutatingWebhookConfigurations without the field selector"
fi
# config_patch TOKEN: one JSON patch of the configuration (a test of its name only), as the
# CA step sends it: kubectl patch would read the object first, which neither account may.
# Prints the object's kind when it is written, else the refusal's message.
config_patch() {
  curl -sS --max-time 30 --cacert "$ca_file" -H "Authorization: Bearer $1" -X PATCH \
    -H 'Content-Type: application/json-patch+json' \
    --data-binary '[{"op":"test","path":"/metadata/name","value":"gvirtus-webhook"}]' \
    "$server/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/gvirtus-webhook" |
    jq -r 'if .kind == "Status" then .message else .kind end'
}
out=$(config_patch "$token")
grep -q 'cannot patch resource "mutatingwebhookconfigurations"' <<<"$out" &&
  ok "cannot patch its MutatingWebhookConfiguration (the CA step's right): $out" ||
  bad "gvirtus-webhook patches its MutatingWebhookConfiguration: $out"
# A Secret of type service-account-token would be filled with another account's token.
if out=$(as_webhook create -n "$ns" -f - 2>&1 <<SECRET
apiVersion: v1
kind: Secret
metadata: {name: stolen-token, annotations: {kubernetes.io/service-account.name: gvirtus-backend}}
type: kubernetes.io/service-account-token
SECRET
); then
  bad "creates a service-account-token Secret"
  k delete secret stolen-token -n "$ns" --ignore-not-found >/dev/null
else
  grep -q 'cannot create resource "secrets"' <<<"$out" &&
    ok "cannot create a Secret (a token of another account): $out" || bad "create refused otherwise: $out"
fi
ca_token=$(k create token gvirtus-ca -n "$ns" --duration=10m)
out=$(config_patch "$ca_token")
[ "$out" = MutatingWebhookConfiguration ] && ok "gvirtus-ca: patch the MutatingWebhookConfiguration" ||
  bad "gvirtus-ca cannot patch the MutatingWebhookConfiguration: $out"
if as_webhook get secrets -n "$ns" --field-selector metadata.name=gvirtus-webhook-tls -o name >/dev/null 2>&1; then
  ok "list its own Secret with fieldSelector metadata.name=gvirtus-webhook-tls"
else
  bad "cannot list its own Secret by field selector"
fi
if as_webhook get secrets -n "$ns" >/dev/null 2>&1; then bad "lists Secrets"; else ok "cannot list Secrets"; fi
if as_webhook get secrets -n "$ns" --field-selector metadata.name=other >/dev/null 2>&1; then
  bad "lists another Secret by field selector"
else
  ok "cannot list another Secret by field selector"
fi

say "overlays/dra: gvirtus-webhook writes ResourceSlices, of the driver gpu.gvirtus.io only"
k apply -k "$repo/overlays/dra" >/dev/null 2>&1 || { k apply -k "$repo/overlays/dra"; bad "apply -k overlays/dra failed"; }
for verb in list watch create update delete; do expect yes gvirtus-webhook "$verb" resourceslices.resource.k8s.io; done
for verb in get patch deletecollection; do expect no gvirtus-webhook "$verb" resourceslices.resource.k8s.io; done
for verb in list watch; do expect yes gvirtus-webhook "$verb" resourceclaims.resource.k8s.io default; done
for verb in get create update patch delete; do expect no gvirtus-webhook "$verb" resourceclaims.resource.k8s.io default; done
expect no gvirtus-webhook update "resourceclaims.resource.k8s.io#status" default
# The claim binder's answers (binding conditions): a patch of a claim's status, where the
# policy gvirtus-webhook-claim-status lets only its own devices' conditions change.
expect yes gvirtus-webhook patch "resourceclaims.resource.k8s.io#status" default
expect no gvirtus-webhook update deviceclasses.resource.k8s.io/gpu.gvirtus.io
slice() {
  printf '{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"%s"},' "$1"
  printf '"spec":{"driver":"%s","pool":{"name":"p","generation":1,"resourceSliceCount":1},"allNodes":true}}' "$2"
}
# refusal POLICY OBJECT CLIENT...: what the API server answers CLIENT's server-side dry run
# of a create of OBJECT, once POLICY refuses it. A new policy is in force within seconds:
# until the answer names it, it is asked again (every half second, 30 s at most).
refusal() {
  local policy=$1 object=$2 out; shift 2
  for _ in $(seq 1 60); do
    out=$("$@" create --dry-run=server -f - <<<"$object" 2>&1 || true)
    grep -q "ValidatingAdmissionPolicy '$policy'" <<<"$out" && break
    sleep 0.5
  done
  printf '%s' "$out"
}
out=$(refusal gvirtus-webhook-slices "$(slice gvirtus-rbac-other other.example.com)" as_webhook)
grep -q "ValidatingAdmissionPolicy 'gvirtus-webhook-slices'" <<<"$out" &&
  ok "a slice of another driver is refused: $(tail -1 <<<"$out")" ||
  bad "a slice of another driver was not refused by the policy: $out"
# Another driver's slice that exists: neither deleted nor changed by the webhook's account.
slice gvirtus-rbac-foreign other.example.com | k create -f - >/dev/null
out=$(as_webhook delete resourceslice gvirtus-rbac-foreign 2>&1 || true)
grep -q "ValidatingAdmissionPolicy 'gvirtus-webhook-slices'" <<<"$out" &&
  ok "another driver's slice is not deleted" || bad "another driver's slice: delete not refused: $out"
out=$(k get resourceslice gvirtus-rbac-foreign -o json | sed 's/"generation": 1/"generation": 2/' |
  as_webhook replace -f - 2>&1 || true)
grep -q "ValidatingAdmissionPolicy 'gvirtus-webhook-slices'" <<<"$out" &&
  ok "another driver's slice is not changed" || bad "another driver's slice: update not refused: $out"
k delete resourceslice gvirtus-rbac-foreign --ignore-not-found >/dev/null
# Anyone else (here a cluster admin, as another driver's account would be) writing a slice
# of gpu.gvirtus.io: refused by gvirtus-slices-writer.
out=$(refusal gvirtus-slices-writer "$(slice gvirtus-rbac-forged gpu.gvirtus.io)" k)
grep -q "ValidatingAdmissionPolicy 'gvirtus-slices-writer'" <<<"$out" &&
  ok "a slice of gpu.gvirtus.io written by another account is refused: $(tail -1 <<<"$out")" ||
  bad "a slice of gpu.gvirtus.io written by another account was not refused: $out"
if out=$(slice gvirtus-rbac-own gpu.gvirtus.io | as_webhook create -f - 2>&1); then
  ok "a slice of gpu.gvirtus.io is created"
  as_webhook delete resourceslice gvirtus-rbac-own >/dev/null 2>&1 && ok "and deleted" || bad "cannot delete its own slice"
else
  bad "cannot create a slice of gpu.gvirtus.io: $out"
fi

# A claim's status through the binder's right: its allocation is the scheduler's, never the
# webhook's (refused by the policy, or first by the API server's own check on 1.36 and later).
k apply -f - >/dev/null <<'CLAIM'
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: gvirtus-rbac-claim, namespace: default}
spec:
  devices:
    requests: [{name: gpu, exactly: {deviceClassName: gpu.gvirtus.io}}]
CLAIM
allocation='{"status":{"allocation":{"devices":{"results":[{"request":"gpu","driver":"gpu.gvirtus.io","pool":"p","device":"d"}]}}}}'
# One PATCH of the status, as the binder sends it (kubectl patch would GET the status first,
# which the account may not); prints the refusal's message.
claim_status_patch() {
  curl -sS --max-time 30 --cacert "$ca_file" -H "Authorization: Bearer $token" -X PATCH \
    -H 'Content-Type: application/merge-patch+json' --data-binary "$allocation" \
    "$server/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/gvirtus-rbac-claim/status" |
    jq -r 'if .kind == "Status" then .message else .kind end'
}
for _ in $(seq 1 60); do
  out=$(claim_status_patch)
  grep -q "never changes a claim's allocation\\|resourceclaims/binding" <<<"$out" && break
  sleep 0.5
done
grep -q "never changes a claim's allocation\\|resourceclaims/binding" <<<"$out" &&
  ok "a claim's allocation written with the webhook's token is refused: $out" ||
  bad "a claim's allocation written with the webhook's token was not refused as it should be: $out"
[ "$(k get resourceclaim gvirtus-rbac-claim -n default -o jsonpath='{.status.allocation}')" = "" ] &&
  ok "the claim is not allocated" || bad "the webhook's token allocated a claim"
k delete resourceclaim gvirtus-rbac-claim -n default --ignore-not-found >/dev/null

# DeviceTaintRules (Kubernetes 1.37): a lost backend's devices tainted NoExecute. A rule the
# account could write for another driver's devices, or for every device, would have
# kube-controller-manager evict any DRA pod of the cluster.
# (grep reads it all: with pipefail, grep -q could end the pipeline before kubectl, and fail it)
if k api-resources --api-group=resource.k8s.io -o name | grep -x devicetaintrules.resource.k8s.io >/dev/null; then
  for verb in list create delete; do expect yes gvirtus-webhook "$verb" devicetaintrules.resource.k8s.io; done
  for verb in get watch update patch; do expect no gvirtus-webhook "$verb" devicetaintrules.resource.k8s.io; done
  # taint_rule NAME [SELECTOR]: a NoExecute rule of the devices SELECTOR picks (none: every).
  taint_rule() {
    printf '{"apiVersion":"resource.k8s.io/v1","kind":"DeviceTaintRule","metadata":{"name":"%s"},"spec":{' "$1"
    [ -z "${2:-}" ] || printf '"deviceSelector":%s,' "$2"
    printf '"taint":{"key":"gpu.gvirtus.io/backend-lost","effect":"NoExecute"}}}'
  }
  for selector in '{"driver":"other.example.com"}' ''; do
    out=$(refusal gvirtus-webhook-slices "$(taint_rule gvirtus-rbac-rule "$selector")" as_webhook)
    grep -q "ValidatingAdmissionPolicy 'gvirtus-webhook-slices'" <<<"$out" &&
      ok "a taint rule of ${selector:-every device} is refused: $(tail -1 <<<"$out")" ||
      bad "a taint rule of ${selector:-every device} was not refused by the policy: $out"
  done
  if out=$(taint_rule gvirtus-rbac-rule '{"driver":"gpu.gvirtus.io","pool":"gvirtus-system/be-0"}' |
    as_webhook create --dry-run=server -f - 2>&1); then
    ok "a taint rule of gpu.gvirtus.io's devices is let through (server-side dry run)"
  else
    bad "a taint rule of gpu.gvirtus.io's devices was refused: $out"
  fi
else
  say "DeviceTaintRules: not served here (Kubernetes 1.36 or older), not tried"
fi

say "overlays/dra: gvirtus-device-plugin reads a claim by name and the driver's slices; nothing else"
expect yes gvirtus-device-plugin get resourceclaims.resource.k8s.io default
for verb in list watch create update patch delete; do
  expect no gvirtus-device-plugin "$verb" resourceclaims.resource.k8s.io default
done
expect no gvirtus-device-plugin update "resourceclaims.resource.k8s.io#status" default
expect yes gvirtus-device-plugin list resourceslices.resource.k8s.io
for verb in get watch create update delete; do expect no gvirtus-device-plugin "$verb" resourceslices.resource.k8s.io; done
expect no gvirtus-device-plugin get pods default
expect no gvirtus-device-plugin get secrets "$ns"
pod_token=$(k get daemonset gvirtus-device-plugin -n "$ns" -o jsonpath='{.spec.template.spec.automountServiceAccountToken} {.spec.template.spec.containers[0].args}')
[[ $pod_token == "true "*"--dra"* ]] && ok "its pod mounts a token and runs --dra" ||
  bad "overlays/dra device plugin: automountServiceAccountToken and args: $pod_token"

say "overlays/dra: a claim naming what the devices of gpu.gvirtus.io lack is refused, naming it"
claim() {
  printf '{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"c","namespace":"default"},'
  printf '"spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"%s",%s}}]}}}' "$1" "$2"
}
out=$(refusal gvirtus-claims "$(claim gpu.gvirtus.io '"capacity":{"requests":{"memroy":"1Gi"}}')" k)
grep -q 'capacity "memroy"' <<<"$out" && ok "capacity memroy: $(sed 's/.*denied request: //' <<<"$out")" ||
  bad "a claim for capacity memroy was not refused by gvirtus-claims: $out"
out=$(claim gpu.gvirtus.io '"count":2' | k create --dry-run=server -f - 2>&1 || true)
grep -q 'one device of DeviceClass gpu.gvirtus.io' <<<"$out" && ok "count 2: refused, one backend per claim" ||
  bad "a claim for 2 devices was not refused: $out"
selector='"selectors":[{"cel":{"expression":"device.attributes[\"gpu.gvirtus.io\"].modle == \"x\""}}]'
out=$(claim gpu.gvirtus.io "$selector" | k create --dry-run=server -f - 2>&1 || true)
grep -q 'names "modle"' <<<"$out" && ok "selector naming modle: refused" || bad "a selector naming modle was not refused: $out"
selector='"selectors":[{"cel":{"expression":"device.attributes[\"gpu.gvirtus.io\"].model == \"x\""}}],"capacity":{"requests":{"memory":"1Gi"}}'
out=$(claim gpu.gvirtus.io "$selector" | k create --dry-run=server -f - 2>&1) && ok "model and memory: accepted" ||
  bad "a claim for model and memory was refused: $out"
out=$(claim other.example.com '"capacity":{"requests":{"memroy":"1Gi"}}' | k create --dry-run=server -f - 2>&1) &&
  ok "another class's claim: not ours to judge" || bad "another class's claim was refused: $out"

say "every component runs as its own ServiceAccount"
for pair in daemonset/gvirtus-labeler=gvirtus-labeler daemonset/gvirtus-device-plugin=gvirtus-device-plugin \
    deployment/gvirtus-webhook=gvirtus-webhook daemonset/gvirtus-backend=gvirtus-backend; do
  got=$(k get "${pair%%=*}" -n "$ns" -o jsonpath='{.spec.template.spec.serviceAccountName}')
  [ "$got" = "${pair#*=}" ] && ok "${pair%%=*}: $got" || bad "${pair%%=*}: serviceAccountName $got"
done
finish
