#!/usr/bin/env bash
# The webhook runs its own CA: Secret gvirtus-webhook-tls exists and the CA is in the
# caBundle of both entries of MutatingWebhookConfiguration gvirtus-webhook; one replica
# holds the Lease of the waiting-pod controller.
source "$(dirname "$0")/lib.sh"

bundles_set() {
  local bundles
  bundles=$(jp mutatingwebhookconfiguration gvirtus-webhook \
    -o jsonpath='{range .webhooks[*]}{.clientConfig.caBundle}{"\n"}{end}')
  [ "$(grep -c . <<<"$bundles")" = 2 ] && [ "$(sort -u <<<"$bundles" | grep -c .)" = 1 ]
}
eventually "Secret gvirtus-webhook-tls exists" k get secret gvirtus-webhook-tls -n "$system_ns"
eventually "the same CA in the caBundle of both webhook entries" bundles_set
lease_held() { [ -n "$(jp lease gvirtus-webhook -n "$system_ns" -o jsonpath='{.spec.holderIdentity}')" ]; }
eventually "Lease gvirtus-webhook is held by a replica" lease_held
holder=$(jp lease gvirtus-webhook -n "$system_ns" -o jsonpath='{.spec.holderIdentity}')
k get pods -n "$system_ns" -l app.kubernetes.io/component=webhook -o name | grep -q "${holder%%_*}" &&
  ok "the holder ($holder) is a webhook pod" || say "note: Lease holder \"$holder\" is not named after a pod"
finish
