#!/usr/bin/env bash
# The installed components are up: the labeler on every node, the device plugin on the
# GPU-less frontend nodes, the webhook's two replicas available (and its CA step, where the
# own CA runs), the backend DaemonSet ready wherever it is scheduled.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

# ds_ready NAME [--allow-none]: every scheduled pod updated and ready.
ds_ready() {
  local desired ready updated
  read -r desired ready updated < <(jp daemonset "$1" -n "$system_ns" \
    -o jsonpath='{.status.desiredNumberScheduled} {.status.numberReady} {.status.updatedNumberScheduled}')
  [ -n "$desired" ] && [ "$desired" = "$ready" ] && [ "$desired" = "${updated:-0}" ] &&
    { [ "$desired" -gt 0 ] || [ "${2:-}" = --allow-none ]; }
}
nodes=$(k get nodes -o name | wc -l)
eventually "gvirtus-labeler ready on all $nodes nodes" ds_ready gvirtus-labeler
labeler_pods=$(jp daemonset gvirtus-labeler -n "$system_ns" -o jsonpath='{.status.numberReady}')
[ "$labeler_pods" = "$nodes" ] && ok "one labeler per node" || bad "labeler pods $labeler_pods, nodes $nodes"
eventually "gvirtus-device-plugin ready on the frontend nodes" ds_ready gvirtus-device-plugin
eventually "gvirtus-webhook rolled out" \
  k rollout status deployment/gvirtus-webhook -n "$system_ns" --timeout=5s
available=$(jp deployment gvirtus-webhook -n "$system_ns" -o jsonpath='{.status.availableReplicas}')
[ "$available" = 2 ] && ok "2 webhook replicas available" || bad "webhook replicas available: $available"
if k get deployment gvirtus-ca -n "$system_ns" >/dev/null 2>&1; then
  eventually "gvirtus-ca (the own CA's step) rolled out" \
    k rollout status deployment/gvirtus-ca -n "$system_ns" --timeout=5s
fi
eventually "gvirtus-backend ready where scheduled (possibly nowhere)" \
  ds_ready gvirtus-backend --allow-none
finish
