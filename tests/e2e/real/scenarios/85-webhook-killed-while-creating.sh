#!/usr/bin/env bash
# Both webhook pods are force-deleted while GVirtuS pods are being created: every pod
# ends mutated (or waiting for a backend) or was refused with a message; none runs
# unmutated (failurePolicy: Fail). The Deployment replaces both pods, and a pod created
# afterwards is admitted.
# shellcheck source=../../scenarios/lib.sh
source "$(dirname "$0")/../../scenarios/lib.sh"
use_test_namespace
webhook_pods() {
  k get pods -n "$system_ns" -l app.kubernetes.io/component=webhook -o jsonpath='{.items[*].metadata.name}'
}
old=$(webhook_pods)
[ "$(wc -w <<<"$old")" = 2 ] || { bad "expected 2 webhook pods, found: $old"; finish; }
refused=0 created=0
for i in $(seq 1 20); do
  if [ "$i" = 5 ]; then
    # shellcheck disable=SC2086
    k delete pod -n "$system_ns" $old --grace-period=0 --force >/dev/null 2>&1 &&
      ok "force-deleted $old while creating pods" || bad "could not delete the webhook pods $old"
  fi
  if out=$(test_pod "churn-$i" '  labels: {gvirtus.io/enabled: "true"}' "" | k apply -f - 2>&1); then
    created=$((created + 1))
  else
    refused=$((refused + 1))
    grep -q "gvirtus" <<<"$out" && ok "churn-$i refused with a message" || bad "churn-$i refused without one: $out"
  fi
  sleep 0.3
done
say "$created created, $refused refused"
gone() { local pod; for pod in $old; do k get pod -n "$system_ns" "$pod" >/dev/null 2>&1 && return 1; done; return 0; }
eventually "both old webhook pods are gone ($old)" gone
unmutated=$(k get pods -n "$test_ns" -o jsonpath='{range .items[*]}{.metadata.name} {.metadata.annotations.gvirtus\.io/properties}{.metadata.annotations.gvirtus\.io/backend-status}{"\n"}{end}' |
  awk 'NF < 2 {print $1}')
[ "$created" -gt 0 ] && [ -z "$unmutated" ] && ok "no pod runs unmutated ($created created)" ||
  bad "unmutated pods: ${unmutated:-none created}"
replaced() {
  [ "$(jp deployment gvirtus-webhook -n "$system_ns" -o jsonpath='{.status.availableReplicas}')" = 2 ] &&
    ! grep -qwF -f <(tr ' ' '\n' <<<"$old") <<<"$(webhook_pods)"
}
eventually "two new webhook pods available" replaced
test_pod after-restart '  labels: {gvirtus.io/enabled: "true"}' "" | k apply -f - >/dev/null &&
  ok "a pod created after the replacement is admitted" || bad "pod after the replacement refused"
finish
