#!/usr/bin/env bash
# Frontends spread by least-connections over the two backends, and each pod is given one
# backend pod's IP (all threads of a process reach the same backend), never a Service IP.
# shellcheck source=../../scenarios/lib.sh
source "$(dirname "$0")/../../scenarios/lib.sh"
use_test_namespace
backends=$(k get pods -n "$system_ns" -l app.kubernetes.io/component=backend \
  -o jsonpath='{range .items[*]}{.status.podIP}{"\n"}{end}' | sort)
[ "$(wc -l <<<"$backends")" = 2 ] || skip "needs exactly two backend pods"
# Least-connections counts the sessions the backends report and the pods given a backend
# within the last minute that are neither finished nor being deleted: none left from earlier scenarios (whose namespaces go
# away in the background), or the split is theirs.
idle() {
  ! k get pods -n "$system_ns" -l app.kubernetes.io/component=backend \
    -o jsonpath='{range .items[*]}{.metadata.annotations.gvirtus\.io/load}{"\n"}{end}' |
    grep -q '"connections":[1-9]'
}
others_going() {
  ! k get pods -A -l gvirtus.io/enabled=true -o json |
    jq -e --arg ns "$test_ns" '.items[] | select(.metadata.namespace != $ns and
      .metadata.deletionTimestamp == null and .metadata.annotations["gvirtus.io/backend"] != null
      and (.status.phase | IN("Succeeded", "Failed") | not)
      and (.metadata.creationTimestamp | fromdateiso8601) > now - 70)' >/dev/null
}
eventually "no other GVirtuS pod holds a backend" others_going || finish
eventually "the backends report no session" idle || finish
for i in 1 2 3 4; do
  test_pod "spread-$i" '  labels: {gvirtus.io/enabled: "true"}' "" | k apply -f - >/dev/null
done
declare -A per_backend=()
for i in 1 2 3 4; do
  backend=$(jp pod "spread-$i" -n "$test_ns" -o 'jsonpath={.metadata.annotations.gvirtus\.io/backend}')
  ip=${backend%:*}
  if grep -qx "$ip" <<<"$backends"; then ok "spread-$i -> backend pod $backend"; else bad "spread-$i got \"$backend\", not a backend pod IP"; fi
  per_backend[$ip]=$((${per_backend[$ip]:-0} + 1))
done
for ip in $backends; do
  [ "${per_backend[$ip]:-0}" = 2 ] && ok "backend $ip took 2 of 4" || bad "backend $ip took ${per_backend[$ip]:-0} of 4"
done
properties=$(jp pod spread-1 -n "$test_ns" -o 'jsonpath={.metadata.annotations.gvirtus\.io/properties}')
grep -q '"secure_application":false' <<<"$properties" && ok "properties.json rendered" || bad "properties: $properties"
finish
