#!/usr/bin/env bash
# The chart without a cluster: helm lint; with default values it renders the same objects
# as `kubectl kustomize manifests/` (semantically, object by object); each value does what
# docs/install.md says; the alert rules and dashboard it ships are monitoring/'s.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

say "helm lint"
if out=$(helm lint --strict "$chart" 2>&1); then ok "helm lint --strict"; else bad "helm lint: $out"; fi
if out=$(helm lint --strict "$chart" --set certManager.enabled=true \
    --set monitoring.podMonitor.enabled=true --set monitoring.prometheusRule.enabled=true \
    --set monitoring.dashboard.enabled=true 2>&1); then
  ok "helm lint --strict with cert-manager and monitoring"
else
  bad "helm lint with cert-manager and monitoring: $out"
fi

say "default values render manifests/"
kubectl kustomize "$repo/manifests" >"$work/kustomize.yaml"
helm template gvirtus "$chart" --namespace default >"$work/helm.yaml"
if out=$(objdiff "$work/kustomize.yaml" "$work/helm.yaml"); then
  ok "$(tail -1 <<<"$out")"
else
  bad "helm template differs from kubectl kustomize manifests/:"
  grep -v '^same:' <<<"$out" >&2
fi

say "webhook.dra=true renders overlays/dra"
kubectl kustomize "$repo/overlays/dra" >"$work/kustomize-dra.yaml"
helm template gvirtus "$chart" --namespace default --set webhook.dra=true >"$work/helm-dra.yaml"
if out=$(objdiff "$work/kustomize-dra.yaml" "$work/helm-dra.yaml"); then
  ok "$(tail -1 <<<"$out")"
else
  bad "helm template --set webhook.dra=true differs from kubectl kustomize overlays/dra:"
  grep -v '^same:' <<<"$out" >&2
fi

say "webhook.networkPolicy.apiServerCIDRs renders overlays/webhook-networkpolicy"
kubectl kustomize "$repo/overlays/webhook-networkpolicy" >"$work/kustomize-webhook-np.yaml"
helm template gvirtus "$chart" --namespace default \
  --set 'webhook.networkPolicy.apiServerCIDRs={192.0.2.0/24}' >"$work/helm-webhook-np.yaml"
if out=$(objdiff "$work/kustomize-webhook-np.yaml" "$work/helm-webhook-np.yaml"); then
  ok "$(tail -1 <<<"$out")"
else
  bad "helm template with webhook.networkPolicy differs from kubectl kustomize overlays/webhook-networkpolicy:"
  grep -v '^same:' <<<"$out" >&2
fi

render() { helm template gvirtus "$chart" --namespace default "$@"; }
# expect DESCRIPTION PATTERN helm-template-args...: the rendering contains the line.
expect() {
  local what=$1 pattern=$2 out; shift 2
  out=$(render "$@" 2>&1) || { bad "$what: helm template failed: $out"; return; }
  if grep -qE -- "$pattern" <<<"$out"; then ok "$what"; else bad "$what: no line matching $pattern"; fi
}
expect_not() {
  local what=$1 pattern=$2 out; shift 2
  out=$(render "$@" 2>&1) || { bad "$what: helm template failed: $out"; return; }
  if grep -qE -- "$pattern" <<<"$out"; then bad "$what: a line matches $pattern"; else ok "$what"; fi
}

say "values"
expect "image.registry and tag" 'image: registry.example.com/gvirtus-k8s/webhook:9.9.9$' \
  --set image.registry=registry.example.com --set image.tag=9.9.9
expect "imagePullSecrets" '^ +- name: regcred$' --set 'imagePullSecrets[0].name=regcred'
expect "webhook.policy" '^ +- --policy=same-zone$' --set webhook.policy=same-zone
expect "webhook.staticBackends" '^ +- --static-backends=10.0.0.5:9999,gpu2.example.com:9999$' \
  --set 'webhook.staticBackends={10.0.0.5:9999,gpu2.example.com:9999}'
expect "webhook.schedulerName (KAI)" '^ +- --scheduler-name=kai-scheduler$' --set webhook.schedulerName=kai-scheduler
expect "webhook.kaiQueue" '^ +- --kai-queue=team-a$' --set webhook.kaiQueue=team-a
expect "webhook.replicas" '^  replicas: 3$' --set webhook.replicas=3
expect "backend.port reaches the webhook" '^ +- --backend-port=7777$' --set backend.port=7777
expect "backend.port reaches the shim" '^ +- --port=7777$' --set backend.port=7777
expect "backend.maxSessions" '^ +- --max-sessions=4$' --set backend.maxSessions=4
expect "webhook.draBindingTimeout" '^ +- --dra-binding-timeout=2m$' --set webhook.dra=true \
  --set webhook.draBindingTimeout=2m
expect "backend.runtimeClassName" '^ +runtimeClassName: nvidia$' --set backend.runtimeClassName=nvidia
expect "backend.gpus: the backend asks the allocator" '^ +nvidia.com/gpu: 4$' --set backend.gpus=4
expect_not "backend.gpus: no GPU taken behind the allocator" 'name: NVIDIA_VISIBLE_DEVICES' --set backend.gpus=4
expect "backend.gpus=0: every GPU of the node" '^ +- name: NVIDIA_VISIBLE_DEVICES$' --set backend.gpus=0
expect_not "backend.gpus=0: no GPU request" '^ +nvidia.com/gpu: ' --set backend.gpus=0
expect "devicePlugin.devices" '^ +- --devices=16$' --set devicePlugin.devices=16
expect "nodeSelector" '^ +pool: gpu$' --set backend.nodeSelector.pool=gpu
expect "resources" '^ +memory: 32Gi$' --set backend.resources.limits.memory=32Gi
expect "tolerations" '^ +- key: dedicated$' --set 'webhook.tolerations[0].key=dedicated' \
  --set 'webhook.tolerations[0].operator=Exists'
expect_not "labeler.enabled=false" 'name: gvirtus-labeler$' --set labeler.enabled=false
expect_not "namespace.create=false" '^kind: Namespace$' --set namespace.create=false
expect "namespace.name" '^ +- --backend-namespace=gpu-system$' --set namespace.name=gpu-system
expect "namespace.name reaches the admission policies" \
  "system:serviceaccount:gpu-system:gvirtus-webhook'" --set namespace.name=gpu-system
expect "namespace.name: the backend pods whose gvirtus.io/peers the webhook writes" \
  "variables.gvirtusPod && request.namespace == 'gpu-system' &&" --set namespace.name=gpu-system
expect_not "admissionPolicies.enabled=false" '^kind: ValidatingAdmissionPolicy' --set admissionPolicies.enabled=false
# The webhook's NetworkPolicy only when its API server addresses are given: a guess would
# cut the API server off and stop every GVirtuS pod's creation.
webhook_policies=$(render | grep -A3 '^kind: NetworkPolicy$' | grep -c 'name: gvirtus-webhook$' || true)
[ "$webhook_policies" = 0 ] && ok "no webhook NetworkPolicy by default" || bad "a webhook NetworkPolicy by default"
expect "webhook.networkPolicy.apiServerCIDRs: each an ipBlock" '^ +cidr: "10.0.0.10/32"$' \
  --set 'webhook.networkPolicy.apiServerCIDRs={10.0.0.10/32,10.0.0.11/32}'

say "values.schema.json refuses what the binaries would"
# expect_refused DESCRIPTION helm-template-args...: the schema stops the rendering.
expect_refused() {
  local what=$1 out; shift
  if out=$(render "$@" 2>&1); then
    bad "$what: rendered"
  elif grep -q "don't meet the specifications of the schema" <<<"$out"; then
    ok "$what"
  else
    bad "$what: failed for another reason: $out"
  fi
}
expect_refused "an unknown policy" --set webhook.policy=fastest
expect_refused "a misspelt value" --set webhook.polciy=round-robin
expect_refused "a static backend without a port" --set 'webhook.staticBackends={gpu1}'
expect_refused "a port out of range" --set backend.port=70000
expect_refused "a duration without a unit" --set backend.drainTimeout=30
expect_refused "admissionPolicies.enabled not a boolean" --set-string admissionPolicies.enabled=no
expect_refused "an API server address without a prefix length" --set 'webhook.networkPolicy.apiServerCIDRs={10.0.0.10}'

say "cert-manager"
cm=(--set certManager.enabled=true)
expect "a Certificate into gvirtus-webhook-tls" '^  secretName: gvirtus-webhook-tls$' "${cm[@]}"
expect "a self-signed Issuer" '^  selfSigned: \{\}$' "${cm[@]}"
expect "the webhook reads the files" '^ +- --tls-cert-file=/etc/gvirtus-webhook/tls/tls.crt$' "${cm[@]}"
expect "the CA injector fills the caBundle" 'cert-manager.io/inject-ca-from: gvirtus-system/gvirtus-webhook' "${cm[@]}"
expect_not "no own CA" 'tls-secret-name' "${cm[@]}"
expect_not "no Secret access" 'resourceNames: \["gvirtus-webhook-tls"\]' "${cm[@]}"
expect_not "no CA step (cert-manager's injector writes the caBundle)" '(name: gvirtus-ca$|--ca-role)' "${cm[@]}"
expect_not "no right on the configuration" 'mutatingwebhookconfigurations' "${cm[@]}"
expect_not "an issuerRef replaces the Issuer" 'selfSigned' "${cm[@]}" \
  --set certManager.issuerRef.kind=ClusterIssuer --set certManager.issuerRef.name=corp-ca

say "monitoring"
for pair in prometheus/gvirtus-alerts.yaml grafana/gvirtus-dashboard.json; do
  if cmp -s "$repo/monitoring/$pair" "$chart/files/$(basename "$pair")"; then
    ok "charts/gvirtus/files/$(basename "$pair") is monitoring/$pair"
  else
    bad "charts/gvirtus/files/$(basename "$pair") differs from monitoring/$pair: cp monitoring/$pair charts/gvirtus/files/"
  fi
done
render --set monitoring.prometheusRule.enabled=true --show-only templates/monitoring.yaml >"$work/rule.yaml"
alerts=$(grep -c '^ *- alert: ' "$repo/monitoring/prometheus/gvirtus-alerts.yaml")
if [ "$(grep -c '^ *- alert: \| alert: ' "$work/rule.yaml")" -ge "$alerts" ]; then
  ok "the PrometheusRule carries the $alerts alerts"
else
  bad "the PrometheusRule lacks alerts of monitoring/prometheus/gvirtus-alerts.yaml"
fi
expect "a PodMonitor on http-metrics" '^    - port: http-metrics$' --set monitoring.podMonitor.enabled=true
expect "the dashboard ConfigMap" '"uid": "gvirtus-k8s"' --set monitoring.dashboard.enabled=true
finish
