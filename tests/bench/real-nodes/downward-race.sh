# shellcheck shell=bash disable=SC2154  # ns, name, repo, pods: real-nodes-bench.sh's
# The downward-API file against a container restart (issue 39), sourced by
# real-nodes-bench.sh with ns, now_ms, percentile, E2E_TEST_IMAGE and tests/lib/log.sh.
#   downward_race RACES
#
# Why the backend follower never rewrites a running pod's address: how the kubelet's
# refresh of a projected downward-API file races a container restart. Each of RACES pods
# projects its annotation bench/value and prints the file when its container starts. The
# annotation is changed and, at the same moment, the container exits (its first restart
# has no back-off). Counted: restarts that read the old value; and, without a restart, the
# time until a running container sees the new value.

downward_race() {
  local races=$1 manifest="" stale=0 refresh=() i first started deadline
  say "downward-API refresh against a container restart: $races pods"
  for i in $(seq 1 "$races"); do
    manifest+="---
apiVersion: v1
kind: Pod
metadata: {name: race-$i, namespace: $ns, labels: {bench: race}, annotations: {bench/value: old}}
spec:
  terminationGracePeriodSeconds: 1
  volumes: [{name: v, downwardAPI: {items: [{path: value, fieldRef: {fieldPath: \"metadata.annotations['bench/value']\"}}]}}]
  containers:
    - name: app
      image: $E2E_TEST_IMAGE
      command: [sh, -c, 'echo start \$(cat /v/value); while [ ! -e /tmp/exit ]; do sleep 0.05; done; exit 1']
      volumeMounts: [{name: v, mountPath: /v}]
"
  done
  kubectl apply -f - <<<"$manifest" >/dev/null
  kubectl -n "$ns" wait pods -l bench=race --for=condition=Ready --timeout=180s >/dev/null
  # The write and the crash at the same moment, as when a pod is re-pointed around the time
  # its container fails on the lost backend.
  for i in $(seq 1 "$races"); do
    kubectl -n "$ns" annotate pod "race-$i" bench/value=new --overwrite >/dev/null &
    kubectl -n "$ns" exec "race-$i" -- touch /tmp/exit &
    wait
  done
  for i in $(seq 1 "$races"); do
    for _ in $(seq 1 300); do
      [ "$(kubectl -n "$ns" get pod "race-$i" -o jsonpath='{.status.containerStatuses[0].restartCount}')" -ge 1 ] &&
        [ -n "$(kubectl -n "$ns" logs "race-$i" 2>/dev/null)" ] && break
      sleep 0.1
    done
    first=$(kubectl -n "$ns" logs "race-$i" 2>/dev/null || true)
    [ "$(kubectl -n "$ns" get pod "race-$i" -o jsonpath='{.status.containerStatuses[0].restartCount}')" -ge 1 ] ||
      { say "race-$i did not restart within 30 s"; return 1; }
    [ "$first" = "start old" ] && stale=$((stale + 1))
  done
  # Without a restart: annotation written -> the running container reads it.
  for i in $(seq 1 "$races"); do
    started=$(now_ms)
    kubectl -n "$ns" annotate pod "race-$i" bench/value="v$i" --overwrite >/dev/null
    deadline=$((SECONDS + 180))
    until [ "$(kubectl -n "$ns" exec "race-$i" -- cat /v/value 2>/dev/null)" = "v$i" ]; do
      [ $SECONDS -lt $deadline ] || { say "race-$i never saw v$i"; return 1; }
      sleep 0.05
    done
    refresh+=($(($(now_ms) - started)))
  done
  kubectl -n "$ns" delete pods -l bench=race --wait=false >/dev/null
  printf '\ndownward-API file against a container restart: %d pods, annotation changed as the container exits\n' "$races"
  printf '  restarted containers that read the old value: %d of %d\n' "$stale" "$races"
  printf '  running container sees a new value after: p50 %s ms, p95 %s ms\n' \
    "$(printf '%s\n' "${refresh[@]}" | percentile 50)" "$(printf '%s\n' "${refresh[@]}" | percentile 95)"
}
