#!/usr/bin/env bash
# The webhook process serving the URL is killed while pods are being created, and
# restarted by its pod's runner: every pod ends mutated (or waiting for a backend) or was
# refused with a message; none runs unmutated (failurePolicy: Fail).
source "$(dirname "$0")/../../scenarios/lib.sh"
: "${GVIRTUS_E2E_STATE:?local harness only}"
use_test_namespace
pidfile=$GVIRTUS_E2E_STATE/procs/webhook-0.pid
[ -f "$pidfile" ] || skip "no webhook-0 process"
refused=0 created=0
for i in $(seq 1 20); do
  [ "$i" = 5 ] && kill -KILL -- "-$(cat "$pidfile")" 2>/dev/null && say "killed webhook-0"
  if out=$(test_pod "churn-$i" '  labels: {gvirtus.io/enabled: "true"}' "" | k apply -f - 2>&1); then
    created=$((created + 1))
  else
    refused=$((refused + 1))
    grep -q "gvirtus" <<<"$out" && ok "churn-$i refused with a message" || bad "churn-$i refused without one: $out"
  fi
  sleep 0.3
done
say "$created created, $refused refused"
[ "$refused" -gt 0 ] && ok "some creations were refused while the webhook was down" || say "no refusal (webhook back quickly)"
unmutated=$(k get pods -n "$test_ns" -o jsonpath='{range .items[*]}{.metadata.name} {.metadata.annotations.gvirtus\.io/properties}{.metadata.annotations.gvirtus\.io/backend-status}{"\n"}{end}' |
  awk 'NF < 2 {print $1}')
[ -z "$unmutated" ] && ok "no pod runs unmutated ($created created)" || bad "unmutated pods: $unmutated"
webhook_back() { curl -sf http://127.0.0.1:18543/readyz; }
eventually "webhook-0 restarted and ready" webhook_back
test_pod after-restart '  labels: {gvirtus.io/enabled: "true"}' "" | k apply -f - >/dev/null &&
  ok "a pod created after the restart is admitted" || bad "pod after restart refused"
finish
