#!/usr/bin/env bash
# Runs NVIDIA KAI-Scheduler (scheduler, binder, podgrouper, admission webhook;
# tests/cluster/kai/build.sh) against a running local cluster, as host processes, the way
# its chart deploys them: its CRDs from the module, namespace kai-scheduler, and a queue
# hierarchy:
#   gvirtus (department)  ->  team-a (gpu limit 8), team-b (gpu limit 1)
# GPU sharing (gpu-fraction pods) is on: the admission webhook runs with its own serving
# certificate, registered by URL, and no RuntimeClass (virtual GPUs need none); the binder
# places its GPU reservation pods in kai-resource-reservation with RESERVATION_IMAGE
# (default: our gvirtus-kai-reservation image in the local registry), which can annotate
# itself with its virtual GPU.
# Logs and pids in build/cluster/NAME/kai/; stopped by kai/down.sh NAME (and by
# tests/cluster/down.sh).
#   kai/up.sh NAME       (KUBECONFIG: the cluster's)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
# shellcheck source=../versions.sh
source "$here/../versions.sh"
name=${1:?usage: kai/up.sh NAME}
: "${KUBECONFIG:?KUBECONFIG must name the cluster}"
export PATH=$CLUSTER_BIN:$PATH
log_tag="kai $name"
# shellcheck source=../../lib/log.sh
source "$repo/tests/lib/log.sh"
kai=$(bash "$here/build.sh")
state=$repo/build/cluster/$name/kai
mkdir -p "$state"
bash "$here/down.sh" "$name" 2>/dev/null || true

kubectl apply --server-side -f "$kai/crds" >/dev/null
# A CRD read before the API server wrote its first status has no conditions, and kubectl
# wait then fails at once ("accessor error: <nil>") instead of waiting: try again.
for attempt in $(seq 1 60); do
  kubectl wait --for condition=established --timeout=60s -f "$kai/crds" >/dev/null 2>&1 && break
  [ "$attempt" = 60 ] && { say "KAI CRDs not established after 60 tries"; exit 1; }
  sleep 1
done
kubectl apply -f - >/dev/null <<'YAML'
apiVersion: v1
kind: Namespace
metadata: {name: kai-scheduler}
---
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: gvirtus}
spec:
  resources:
    cpu: {quota: -1, limit: -1, overQuotaWeight: 1}
    gpu: {quota: -1, limit: -1, overQuotaWeight: 1}
    memory: {quota: -1, limit: -1, overQuotaWeight: 1}
---
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: team-a}
spec:
  parentQueue: gvirtus
  resources:
    cpu: {quota: -1, limit: -1, overQuotaWeight: 1}
    gpu: {quota: 8, limit: 8, overQuotaWeight: 1}
    memory: {quota: -1, limit: -1, overQuotaWeight: 1}
---
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: team-b}
spec:
  parentQueue: gvirtus
  resources:
    cpu: {quota: -1, limit: -1, overQuotaWeight: 1}
    gpu: {quota: 1, limit: 1, overQuotaWeight: 1}
    memory: {quota: -1, limit: -1, overQuotaWeight: 1}
YAML

# GPU reservation pods: KAI's binder creates them in this namespace with this
# ServiceAccount; our reservation program reads and annotates its own pod.
kubectl apply -f - >/dev/null <<'YAML'
apiVersion: v1
kind: Namespace
metadata: {name: kai-resource-reservation}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: kai-resource-reservation, namespace: kai-resource-reservation}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: gpu-reservation, namespace: kai-resource-reservation}
rules:
  - apiGroups: [""]
    resources: [pods]
    verbs: [get, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: gpu-reservation, namespace: kai-resource-reservation}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: gpu-reservation}
subjects:
  - {kind: ServiceAccount, name: kai-resource-reservation, namespace: kai-resource-reservation}
YAML
version=$(sed -nE 's/^project\([^)]*VERSION ([0-9][0-9.]*).*/\1/p' "$repo/CMakeLists.txt")
reservation_image=${RESERVATION_IMAGE:-localhost:5000/gvirtus-k8s/kai-reservation:$version}

# The admission webhook's serving certificate (controller-runtime reads it from
# $TMPDIR/k8s-webhook-server/serving-certs), from a CA made for this cluster.
certs=$state/tmp/k8s-webhook-server/serving-certs
mkdir -p "$certs"
openssl req -x509 -newkey rsa:2048 -nodes -days 7 -subj /CN=kai-admission-ca \
  -keyout "$state/ca.key" -out "$state/ca.crt" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 \
  -keyout "$certs/tls.key" -out "$state/tls.csr" 2>/dev/null
openssl x509 -req -in "$state/tls.csr" -CA "$state/ca.crt" -CAkey "$state/ca.key" \
  -CAcreateserial -days 7 -extfile <(printf 'subjectAltName=IP:127.0.0.1\n') \
  -out "$certs/tls.crt" 2>/dev/null

# start COMPONENT ARGS...: detached, its own session, output to its log.
start() {
  local component=$1
  shift
  KUBECONFIG=$KUBECONFIG setsid "$kai/bin/$component" "$@" >"$state/$component.log" 2>&1 </dev/null &
  echo $! >"$state/$component.pid"
}
# Ports of their own: several clusters (and their webhooks' metrics) share this host.
start scheduler --scheduler-name kai-scheduler --listen-address 127.0.0.1:18680 \
  --plugin-server-port 18681 --schedule-period 1s
start binder --scheduler-name kai-scheduler --cdi-enabled \
  --resource-reservation-pod-image "$reservation_image" \
  --metrics-bind-address 127.0.0.1:18682 --health-probe-bind-address 127.0.0.1:18683
start podgrouper --scheduler-name kai-scheduler \
  --metrics-bind-address 127.0.0.1:18684 --health-probe-bind-address 127.0.0.1:18685
TMPDIR=$state/tmp start admission --scheduler-name kai-scheduler --gpu-sharing-enabled=true \
  --gpu-pod-runtime-class-name= --webhook-addr 18686 \
  --metrics-bind-address 127.0.0.1:18687 --health-probe-bind-address 127.0.0.1:18688
# Registered as its chart does (pods, mutating on CREATE, validating on CREATE and UPDATE,
# failurePolicy Fail), but KAI's own namespaces and GVirtuS's are left out: a webhook that
# is down must not stop our backends from publishing their load.
ca_bundle=$(base64 -w0 <"$state/ca.crt")
webhook() { # webhook KIND PATH OPERATIONS
  cat <<YAML
apiVersion: admissionregistration.k8s.io/v1
kind: $1
metadata: {name: kai-admission}
webhooks:
  - name: admission.kai-scheduler.svc
    clientConfig: {url: "https://127.0.0.1:18686$2", caBundle: "$ca_bundle"}
    rules:
      - {apiGroups: [""], apiVersions: [v1], operations: [$3], resources: [pods], scope: Namespaced}
    namespaceSelector:
      matchExpressions:
        - key: kubernetes.io/metadata.name
          operator: NotIn
          values: [kube-system, kai-scheduler, kai-resource-reservation, gvirtus-system]
    failurePolicy: Fail
    sideEffects: None
    admissionReviewVersions: [v1]
    timeoutSeconds: 10
YAML
  [ "$1" = MutatingWebhookConfiguration ] && echo "    reinvocationPolicy: IfNeeded"
  return 0
}
ready() { curl -sf http://127.0.0.1:18688/readyz >/dev/null; }
wait_until 30 "KAI's admission webhook /readyz" ready || { say "FAILED: KAI's admission webhook is not ready; its log:"; tail -n 20 "$state/admission.log" >&2; exit 1; }
{ webhook MutatingWebhookConfiguration /mutate--v1-pod CREATE; echo ---
  webhook ValidatingWebhookConfiguration /validate--v1-pod "CREATE, UPDATE"; } | kubectl apply -f - >/dev/null
sleep 1
for component in scheduler binder podgrouper admission; do
  kill -0 "$(cat "$state/$component.pid")" 2>/dev/null ||
    { say "FAILED: $component exited; its log:"; tail -n 20 "$state/$component.log" >&2; exit 1; }
done
say "KAI-Scheduler $KAI_VERSION running (scheduler, binder, podgrouper, admission with GPU sharing); queues gvirtus/team-a (8 GPUs), gvirtus/team-b (1 GPU); reservation image $reservation_image"
