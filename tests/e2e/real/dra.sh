#!/usr/bin/env bash
# Turns overlays/dra's changes on (or off) on a running install of tests/e2e/overlay: the
# DeviceClass, RBAC and policies, --dra on the webhook and the device plugin, the webhook's
# entry for pods asking for gvirtus.io/gpu, and the backends' NetworkPolicy for
# gvirtus.io/dra pods. Waits for both rollouts. Used by the DRA
# scenario and by the real-nodes benchmark. With a TEMPLATE, the webhook also gives
# gvirtus.io/enabled pods a claim from that ResourceClaimTemplate (--dra-claim-template).
# `off` applies DRA_OVERLAY (default tests/e2e/overlay; the KAI scenarios' is overlay-kai).
#   dra.sh on [TEMPLATE] | off
set -uo pipefail
repo=$(cd "$(dirname "$0")/../../.." && pwd)
ns=gvirtus-system
# shellcheck disable=SC2034  # read by say (tests/lib/log.sh)
log_tag="dra"
# shellcheck source=../../lib/checks.sh
source "$repo/tests/lib/checks.sh"
objects=(-f "$repo/overlays/dra/deviceclass.yaml" -f "$repo/overlays/dra/rbac.yaml" -f "$repo/overlays/dra/policy.yaml")
case ${1:-} in
  on)
    args=$(cat "$repo/overlays/dra/webhook-args.yaml")
    if [ -n "${2:-}" ]; then
      args+="
- {op: add, path: /spec/template/spec/containers/0/args/-, value: --dra-claim-template=$2}"
    fi
    k apply "${objects[@]}" >/dev/null &&
      k patch deployment gvirtus-webhook -n $ns --type=json -p "$args" >/dev/null &&
      k patch daemonset gvirtus-device-plugin -n $ns --type=json \
        --patch-file "$repo/overlays/dra/device-plugin-dra.yaml" >/dev/null &&
      k patch networkpolicy gvirtus-backend -n $ns --type=json \
        --patch-file "$repo/overlays/dra/backend-networkpolicy.yaml" >/dev/null &&
      k patch mutatingwebhookconfiguration gvirtus-webhook --type=json \
        --patch-file "$repo/overlays/dra/webhook-extended-resource.yaml" >/dev/null || exit 1
    ;;
  off)
    # The overlay's own objects again (arguments and the policy's rules are lists that apply
    # replaces), then the DRA objects and the slices the webhook wrote.
    # A list that apply merges by name (volumes, mounts) keeps what the patch added, and a
    # second `on` would add it twice: the device plugin is put back whole first, by a
    # replace, so that the apply below changes nothing more of it.
    k get daemonset gvirtus-device-plugin -n $ns -o json |
      jq '.spec.template.spec |= (
        del(.volumes[]? | select(.name == "dra-plugin" or .name == "plugins-registry")) |
        del(.containers[0].volumeMounts[]? | select(.name == "dra-plugin" or .name == "plugins-registry")) |
        .containers[0].args |= map(select(. != "--dra")) | .automountServiceAccountToken = false)' |
      k replace -f - >/dev/null || exit 1
    # The webhook entry the patch added is not apply's either: removed by name (a test of
    # its name guards the index).
    entry=extended-resource.webhook.gvirtus.io
    index=$(k get mutatingwebhookconfiguration gvirtus-webhook -o json |
      jq --arg name "$entry" '[.webhooks[].name] | index($name) // empty') || exit 1
    if [ -n "$index" ]; then
      k patch mutatingwebhookconfiguration gvirtus-webhook --type=json -p \
        "[{\"op\":\"test\",\"path\":\"/webhooks/$index/name\",\"value\":\"$entry\"},{\"op\":\"remove\",\"path\":\"/webhooks/$index\"}]" \
        >/dev/null || exit 1
    fi
    k apply -k "$repo/${DRA_OVERLAY:-tests/e2e/overlay}" >/dev/null || exit 1
    k delete "${objects[@]}" --ignore-not-found >/dev/null
    k delete resourceslices -l app.kubernetes.io/managed-by=gvirtus-webhook --ignore-not-found >/dev/null
    # Kubernetes 1.37: the lost backends' taints (none served before: nothing to delete).
    k delete devicetaintrules -l app.kubernetes.io/managed-by=gvirtus-webhook --ignore-not-found \
      >/dev/null 2>&1 || true
    ;;
  *)
    echo "usage: dra.sh on [TEMPLATE] | off" >&2
    exit 2
    ;;
esac
k rollout status deployment/gvirtus-webhook -n $ns --timeout=180s >/dev/null &&
  k rollout status daemonset/gvirtus-device-plugin -n $ns --timeout=180s >/dev/null || exit 1
# A rollout is complete before the old pods are gone: wait until only the new ones are
# left, so that what runs next (a scenario counting the webhook's pods) finds the install
# as it was.
settled() {
  local want
  want=$(k get deployment gvirtus-webhook -n $ns -o jsonpath='{.spec.replicas}')
  [ "$(k get pods -n $ns -l app.kubernetes.io/component=webhook -o name | grep -c .)" = "$want" ] &&
    ! k get pods -n $ns -l app.kubernetes.io/component=device-plugin \
      -o jsonpath='{range .items[*]}{.metadata.deletionTimestamp}{"\n"}{end}' | grep -q .
}
wait_until 120 "the old webhook and device plugin pods to go" settled || exit 1
# The webhook writes its CA into every entry of its configuration, the one added above too.
every_entry_trusted() {
  k get mutatingwebhookconfiguration gvirtus-webhook -o json |
    jq -e 'all(.webhooks[]; (.clientConfig.caBundle // "") != "")' >/dev/null
}
wait_until 60 "the webhook's CA in each entry of its configuration" every_entry_trusted
