#!/usr/bin/env bash
# kube-apiserver is restarted mid-scenario: every component recovers (labeler restores a
# deleted label, webhook admits and mutates, backend shims keep publishing their load)
# and so do the real nodes (Ready again).
# shellcheck source=../../scenarios/lib.sh
source "$(dirname "$0")/../../scenarios/lib.sh"
[ -n "${GVIRTUS_CLUSTER_NAME:-}" ] || skip "only on the local control plane (restart-apiserver.sh)"
repo=$(cd "$(dirname "$0")/../../../.." && pwd)
node=${E2E_FRONTEND_NODE:-fe-a}
use_test_namespace
bash "$repo/tests/cluster/restart-apiserver.sh" --down 3 "$GVIRTUS_CLUSTER_NAME" &&
  ok "kube-apiserver killed and started again" || bad "restart-apiserver failed"
k label node "$node" gvirtus.io/frontend.allowed- >/dev/null
restored() { [ "$(jp node "$node" -o 'jsonpath={.metadata.labels.gvirtus\.io/frontend\.allowed}')" = true ]; }
eventually "labeler restored the deleted label after the restart" restored
nodes_ready() {
  [ "$(k get nodes -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' |
    grep -vc True)" = 0 ]
}
eventually "every node Ready" nodes_ready
webhook_ready() {
  [ "$(jp deployment gvirtus-webhook -n "$system_ns" -o jsonpath='{.status.readyReplicas}')" = 2 ]
}
eventually "both webhook replicas ready again" webhook_ready
admitted() { test_pod after-apiserver '  labels: {gvirtus.io/enabled: "true"}' "" | k apply -f -; }
eventually "a GVirtuS pod is admitted and mutated" admitted
mutated() { [ -n "$(jp pod after-apiserver -n "$test_ns" -o 'jsonpath={.metadata.annotations.gvirtus\.io/properties}{.metadata.annotations.gvirtus\.io/backend-status}')" ]; }
eventually "it carries the GVirtuS configuration" mutated
load_of() { jp pods -n "$system_ns" -l app.kubernetes.io/component=backend -o 'jsonpath={.items[0].metadata.annotations.gvirtus\.io/load}'; }
before=$(load_of)
fresh() { [ "$(load_of)" != "$before" ]; }
E2E_TIMEOUT=60 eventually "backend shims publish their load again (heartbeat)" fresh
finish
