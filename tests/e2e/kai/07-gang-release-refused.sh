#!/usr/bin/env bash
# A gang is never left half released (docs/operations.md, "Events"): two GVirtuS pods of
# one KAI PodGroup (minMember 2), the second's release refused by a real
# ValidatingAdmissionPolicy (the UPDATE of member-2 that removes its gate
# gvirtus.io/backend). The leader releases member-1 (written first), member-2's write is
# refused and tried again pass after pass; once the policy is removed the gang ends whole
# released, and KAI-Scheduler binds both.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
# Named without the word "test": a 422 whose message says "test" reads as a conflict.
policy=gvirtus-e2e-kai-07-hold-release
cleanup() {
  k delete validatingadmissionpolicybinding "$policy" --ignore-not-found >/dev/null 2>&1 || true
  k delete validatingadmissionpolicy "$policy" --ignore-not-found >/dev/null 2>&1 || true
}
trap 'dump_on_failure; cleanup; k delete namespace "$test_ns" --ignore-not-found --wait=false >/dev/null 2>&1 || true' EXIT
released() {
  [ -n "$(field "$1" '{.metadata.annotations.gvirtus\.io/backend}')" ] &&
    [ -z "$(field "$1" '{.spec.schedulingGates[*].name}')" ]
}
gated() { [ "$(field "$1" '{.spec.schedulingGates[*].name}')" = gvirtus.io/backend ]; }
backend_ready() {
  k get pods -n "$system_ns" -l app.kubernetes.io/component=backend \
    -o 'jsonpath={.items[*].status.conditions[?(@.type=="Ready")].status}' | grep -q True
}
eventually "a backend is ready" backend_ready || finish

k apply -f - >/dev/null <<YAML
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: $policy}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
      - apiGroups: [""]
        apiVersions: ["v1"]
        operations: ["UPDATE"]
        resources: ["pods"]
  matchConditions:
    - name: this-scenario
      expression: request.namespace == '$test_ns'
  validations:
    - expression: |-
        object.metadata.name != 'member-2' ||
        !oldObject.spec.?schedulingGates.orValue([]).exists(g, g.name == 'gvirtus.io/backend') ||
        object.spec.?schedulingGates.orValue([]).exists(g, g.name == 'gvirtus.io/backend')
      reason: Forbidden
      message: scenario kai/07 holds the release of member-2 (its gate gvirtus.io/backend stays)
    - expression: "!('e2e-probe' in object.metadata.?labels.orValue({}))"
      reason: Forbidden
      message: scenario kai/07's policy is in force (the label e2e-probe is refused)
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: $policy}
spec:
  policyName: $policy
  validationActions: [Deny]
YAML
k apply -f - >/dev/null <<YAML
apiVersion: scheduling.run.ai/v2alpha2
kind: PodGroup
metadata: {name: pair, namespace: $test_ns}
spec: {minMember: 2, queue: team-a}
YAML
member() {
  test_pod "$1" '  labels: {gvirtus.io/enabled: "true"}
  annotations: {pod-group-name: pair}' "" | k apply -f - >/dev/null
}
# member-1 alone waits (1 of the gang's 2 pods): nothing is written to it meanwhile.
member member-1
eventually "member-1 waits, gated (its gang has 1 of 2 pods)" gated member-1
# The policy is in force once the API server refuses the probe it names (dry run).
in_force() {
  local out
  out=$(k label pod member-1 -n "$test_ns" e2e-probe=1 --dry-run=server 2>&1) && return 1
  grep -q "policy is in force" <<<"$out"
}
eventually "the policy is in force (a dry-run label refused)" in_force || finish

say "member-2 joins: the gang goes, member-2's release is refused"
member member-2
eventually "member-1 released (its backend written, its gate removed)" released member-1 || finish
leader() { jp lease gvirtus-webhook -n "$system_ns" -o jsonpath='{.spec.holderIdentity}'; }
# Each pass that tried member-2 and was refused logs it once.
refusals() {
  k logs -n "$system_ns" "$(leader)" | grep -F '"msg":"cannot release pod; retrying with backoff"' |
    grep -cF "\"pod\":\"$test_ns/member-2\""
}
tried_twice() { [ "$(refusals)" -ge 2 ]; }
eventually "the leader tried member-2 in two passes, refused each time" tried_twice
gated member-2 && ok "member-2 still gated while the policy stands" ||
  bad "member-2 released through the policy: $(field member-2 '{.metadata.annotations}')"
say "member-1 on node '$(field member-1 '{.spec.nodeName}')' while its gang is incomplete"

say "the policy is removed"
cleanup
eventually "member-2 released: the gang is whole" released member-2
released member-1 && released member-2 && ok "both members released, none gated" ||
  bad "half released: member-1 $(field member-1 '{.spec.schedulingGates}'), member-2 $(field member-2 '{.spec.schedulingGates}')"
for m in member-1 member-2; do eventually "$m bound by KAI and running" running "$m"; done
finish
