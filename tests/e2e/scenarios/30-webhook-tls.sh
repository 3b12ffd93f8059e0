#!/usr/bin/env bash
# The webhook runs its own CA: Secret gvirtus-webhook-tls exists and the CA is in the
# caBundle of both entries of MutatingWebhookConfiguration gvirtus-webhook, written by the
# CA step gvirtus-ca, not by the webhook (whose replicas run --ca-role=serve and only read
# both); one replica holds the Lease of the waiting-pod controller.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

bundles_set() {
  local bundles
  bundles=$(jp mutatingwebhookconfiguration gvirtus-webhook \
    -o jsonpath='{range .webhooks[*]}{.clientConfig.caBundle}{"\n"}{end}')
  [ "$(grep -c . <<<"$bundles")" = 2 ] && [ "$(sort -u <<<"$bundles" | grep -c .)" = 1 ]
}
eventually "Secret gvirtus-webhook-tls exists" k get secret gvirtus-webhook-tls -n "$system_ns"
eventually "the same CA in the caBundle of both webhook entries" bundles_set
roles=$(jp deployment gvirtus-webhook -n "$system_ns" -o jsonpath='{.spec.template.spec.containers[0].args}')
if k get deployment gvirtus-ca -n "$system_ns" >/dev/null 2>&1; then
  grep -q -- '--ca-role=serve' <<<"$roles" && ok "the webhook's replicas only read the own CA (--ca-role=serve)" ||
    bad "gvirtus-ca runs but the webhook's args lack --ca-role=serve: $roles"
fi
lease_held() { [ -n "$(jp lease gvirtus-webhook -n "$system_ns" -o jsonpath='{.spec.holderIdentity}')" ]; }
eventually "Lease gvirtus-webhook is held by a replica" lease_held
# The manifest gives each replica POD_NAME, which is its identity in the Lease. (A replica
# that went away holds it until the Lease expires: hence eventually.)
holder_is_a_webhook_pod() {
  local holder pods
  holder=$(jp lease gvirtus-webhook -n "$system_ns" -o jsonpath='{.spec.holderIdentity}')
  pods=$(k get pods -n "$system_ns" -l app.kubernetes.io/component=webhook -o name)
  [ -n "$holder" ] && grep -qx "pod/$holder" <<<"$pods"
}
eventually "the Lease holder is one of the webhook pods" holder_is_a_webhook_pod
finish
