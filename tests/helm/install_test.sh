#!/usr/bin/env bash
# The chart on the real local control plane (run through tests/cluster/with-cluster.sh,
# which exports KUBECONFIG): helm install creates every object of the chart; helm upgrade
# with other values changes them and keeps what the own CA wrote itself (the caBundle);
# helm uninstall leaves nothing of ours behind (no object labelled
# app.kubernetes.io/part-of=gvirtus, no namespace, no release record).
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
if [ -z "${GVIRTUS_KUBECONFIG:-}" ]; then
  echo "FAIL: GVIRTUS_KUBECONFIG is not set: run through bash tests/cluster/with-cluster.sh NAME ..." >&2
  exit 1
fi
export KUBECONFIG=$GVIRTUS_KUBECONFIG
release=gvirtus-it
ns=gvirtus-system
cluster_kinds=clusterroles,clusterrolebindings,mutatingwebhookconfigurations
leftovers() {
  {
    k get "$cluster_kinds" -l app.kubernetes.io/part-of=gvirtus -o name 2>/dev/null
    k get namespace "$ns" -o name 2>/dev/null
    k get secrets -n default -l owner=helm,name=$release -o name 2>/dev/null
  } | sort
}
cleanup() {
  helm uninstall "$release" -n default --wait --timeout 2m >/dev/null 2>&1 || true
  k delete -k "$repo/manifests" --ignore-not-found --wait=false >/dev/null 2>&1 || true
}
trap cleanup EXIT
[ -z "$(leftovers)" ] || { say "objects of ours already on the cluster: $(leftovers | tr '\n' ' ')"; cleanup; }

say "helm install"
if out=$(helm install "$release" "$chart" -n default --wait=false 2>&1); then
  ok "helm install"
else
  bad "helm install: $out"
  finish
fi
helm get manifest "$release" -n default >"$build/helm-installed.yaml"
missing=0
while read -r kind name namespace; do
  if ! k get "$kind" "$name" ${namespace:+-n "$namespace"} -o name >/dev/null 2>&1; then
    bad "installed release lacks $kind/$name"
    missing=$((missing + 1))
  fi
# kind, metadata.name and metadata.namespace of each document.
done < <(awk '/^---/{if (kind) print kind, name, ns; kind=""; name=""; ns=""; m=0; next}
  /^kind: /{kind=$2} /^metadata:/{m=1; next} /^[^ #]/{m=0}
  m && /^  name: /{name=$2} m && /^  namespace: /{ns=$2}
  END{if (kind) print kind, name, ns}' "$build/helm-installed.yaml")
count=$(grep -c '^kind: ' "$build/helm-installed.yaml")
[ "$missing" = 0 ] && ok "all $count objects of the chart exist"
if [ "$(k get namespace "$ns" -o jsonpath='{.metadata.labels.pod-security\.kubernetes\.io/enforce}')" = privileged ]; then
  ok "namespace $ns with its Pod Security labels"
else
  bad "namespace $ns lacks pod-security.kubernetes.io/enforce=privileged"
fi

say "helm upgrade"
# What the own CA (its CA step, gvirtus-ca) does at run time: a caBundle the chart never
# sets must survive upgrades.
bundle=$(printf 'test-ca' | base64 | tr -d '\n')
k patch mutatingwebhookconfiguration gvirtus-webhook --type=json -p \
  "[{\"op\":\"add\",\"path\":\"/webhooks/0/clientConfig/caBundle\",\"value\":\"$bundle\"}]" >/dev/null
if out=$(helm upgrade "$release" "$chart" -n default --wait=false --set webhook.replicas=3 \
    --set webhook.policy=round-robin --set devicePlugin.enabled=false 2>&1); then
  ok "helm upgrade"
else
  bad "helm upgrade: $out"
fi
[ "$(k -n "$ns" get deployment gvirtus-webhook -o jsonpath='{.spec.replicas}')" = 3 ] &&
  ok "webhook replicas 3" || bad "webhook replicas not 3 after the upgrade"
k -n "$ns" get deployment gvirtus-webhook -o jsonpath='{.spec.template.spec.containers[0].args}' |
  grep -q -- '--policy=round-robin' && ok "webhook --policy=round-robin" || bad "webhook args lack --policy=round-robin"
if k -n "$ns" get daemonset gvirtus-device-plugin >/dev/null 2>&1; then
  bad "device plugin still there after devicePlugin.enabled=false"
else
  ok "device plugin removed by the upgrade"
fi
[ "$(k get mutatingwebhookconfiguration gvirtus-webhook -o jsonpath='{.webhooks[0].clientConfig.caBundle}')" = "$bundle" ] &&
  ok "the caBundle written at run time survives the upgrade" || bad "helm upgrade dropped the caBundle"
[ "$(helm status "$release" -n default -o json | grep -o '"version":[0-9]*' | head -1)" = '"version":2' ] &&
  ok "release revision 2" || bad "release is not at revision 2"

say "helm uninstall"
# The webhook's own Secret, as the own CA writes it: not in the chart, gone with the namespace.
k -n "$ns" create secret generic gvirtus-webhook-tls --from-literal=ca.crt=x >/dev/null
if out=$(helm uninstall "$release" -n default --wait --timeout 2m 2>&1); then
  ok "helm uninstall"
else
  bad "helm uninstall: $out"
fi
left=""
for _ in $(seq 1 120); do
  left=$(leftovers)
  [ -z "$left" ] && break
  sleep 1
done
if [ -z "$left" ]; then
  ok "nothing of ours is left (cluster objects, namespace $ns, release records)"
else
  bad "left behind: $(tr '\n' ' ' <<<"$left")"
fi
finish
