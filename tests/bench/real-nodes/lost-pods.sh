# shellcheck shell=bash disable=SC2154  # ns, name, repo, pods: real-nodes-bench.sh's
# Every backend pod lost at once (issue 39), sourced by real-nodes-bench.sh with ns, now_ms,
# percentile, E2E_TEST_IMAGE and tests/lib/log.sh.
#   frontends_deployment NAME REPLICAS   a Deployment of frontend stand-ins (label bench=NAME)
#   answered_pods NAME                   "uid name" of its Running pods whose backend answered
#   lost_pods FRONTENDS

frontends_deployment() {
  kubectl apply -f - >/dev/null <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: $1, namespace: $ns}
spec:
  replicas: $2
  selector: {matchLabels: {bench: $1}}
  template:
    metadata: {labels: {bench: $1, gvirtus.io/enabled: "true"}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
        - name: app
          image: $E2E_TEST_IMAGE
          command: [gvirtus-frontend-standin]
          env: [{name: GVIRTUS_STANDIN_PING, value: "2"}]
YAML
}

answered_pods() {
  local pod uid deleting
  kubectl -n "$ns" get pods -l "bench=$1" --field-selector status.phase=Running \
    -o jsonpath='{range .items[*]}{.metadata.uid} {.metadata.name} {.metadata.deletionTimestamp}{"\n"}{end}' |
    while read -r uid pod deleting; do
      [ -z "$deleting" ] || continue
      if kubectl -n "$ns" logs "$pod" 2>/dev/null | grep -q "backend answered"; then
        echo "$uid $pod"
      fi
    done
  return 0
}

# Per frontend: from the deletion (grace 1 s, as a lost node or a crashed pod leaves them)
# to its replacement pod Running with a session its backend answered. The floor beside it:
# the new backend pods Ready.
lost_pods() {
  local lost=$1 old backend_count backends_ready="" started deadline t uid
  say "backend lost: $lost frontends, every backend pod deleted"
  frontends_deployment lost "$lost"
  all_answered() { [ "$(answered_pods lost | grep -c .)" = "$lost" ]; }
  wait_until 180 "the $lost frontends to connect" all_answered ||
    { say "the $lost frontends did not all connect"; return 1; }
  old=$(answered_pods lost | cut -d' ' -f1)
  backend_count=$(kubectl -n gvirtus-system get pods -l app.kubernetes.io/component=backend -o name | grep -c .)
  declare -A back=()
  started=$(now_ms)
  kubectl -n gvirtus-system delete pods -l app.kubernetes.io/component=backend --grace-period=1 \
    --wait=false >/dev/null
  deadline=$((SECONDS + 300))
  while [ ${#back[@]} -lt "$lost" ] && [ $SECONDS -lt $deadline ]; do
    t=$(now_ms)
    if [ -z "$backends_ready" ] && [ "$(kubectl -n gvirtus-system get pods -l app.kubernetes.io/component=backend \
      -o jsonpath='{range .items[*]}{.metadata.deletionTimestamp}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' |
      grep -cx True)" -ge "$backend_count" ]; then
      backends_ready=$((t - started))
    fi
    while read -r uid _; do
      [ -n "$uid" ] && ! grep -qx "$uid" <<<"$old" && [ -z "${back[$uid]:-}" ] && back[$uid]=$((t - started))
    done < <(answered_pods lost)
    sleep 0.2
  done
  kubectl -n "$ns" delete deployment lost --wait=false >/dev/null
  [ ${#back[@]} = "$lost" ] || { say "only ${#back[@]} of $lost frontends ran again"; return 1; }
  printf '\nbackend lost: %d frontends, every backend pod deleted (grace 1 s) -> replacement Running and answered\n' "$lost"
  printf '  frontends      p50 %6s ms   p95 %6s ms\n' "$(printf '%s\n' "${back[@]}" | percentile 50)" \
    "$(printf '%s\n' "${back[@]}" | percentile 95)"
  printf '  backends Ready again after %s ms (the floor)\n' "${backends_ready:-?}"
}
