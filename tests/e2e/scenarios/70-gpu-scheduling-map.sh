#!/usr/bin/env bash
# gpu-scheduling-map (docs/flags.md): a StatefulSet's pods land on the nodes their entries
# name, with CUDA_VISIBLE_DEVICES set; a pod without an entry is admitted unchanged; a map
# that does not parse is denied with a message naming the bad line.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
# Two nodes that take ordinary pods (no control-plane taint).
mapfile -t nodes < <(k get nodes -o jsonpath='{range .items[*]}{.metadata.name} {.spec.taints[*].effect}{"\n"}{end}' |
  awk 'NF == 1 {print $1}' | head -2)
[ ${#nodes[@]} = 2 ] || skip "needs two untainted nodes"
use_test_namespace

k apply -f - >/dev/null <<YAML
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: mapped
  namespace: $test_ns
spec:
  replicas: 3
  podManagementPolicy: Parallel
  serviceName: mapped
  selector:
    matchLabels: {app: mapped}
  template:
    metadata:
      labels: {app: mapped}
      annotations:
        gpu-scheduling-map: |
          0=${nodes[0]}:0,1
          1=${nodes[1]}:2
    spec:
      terminationGracePeriodSeconds: 1
      containers:
        - name: app
          image: $test_image
          command: ["sleep", "3600"]
YAML
field() { jp pod "$1" -n "$test_ns" -o "jsonpath=$2"; }
running() { [ "$(field "$1" '{.status.phase}')" = Running ]; }
for i in 0 1 2; do eventually "mapped-$i runs" running "mapped-$i"; done
[ "$(field mapped-0 '{.spec.nodeName}')" = "${nodes[0]}" ] && ok "mapped-0 on ${nodes[0]}" ||
  bad "mapped-0 on $(field mapped-0 '{.spec.nodeName}')"
[ "$(field mapped-1 '{.spec.nodeName}')" = "${nodes[1]}" ] && ok "mapped-1 on ${nodes[1]}" ||
  bad "mapped-1 on $(field mapped-1 '{.spec.nodeName}')"
[ "$(field mapped-0 '{.spec.containers[0].env[?(@.name=="CUDA_VISIBLE_DEVICES")].value}')" = 0,1 ] &&
  ok "mapped-0: CUDA_VISIBLE_DEVICES=0,1" || bad "mapped-0 env: $(field mapped-0 '{.spec.containers[0].env}')"
[ "$(field mapped-1 '{.spec.containers[0].env[?(@.name=="CUDA_VISIBLE_DEVICES")].value}')" = 2 ] &&
  ok "mapped-1: CUDA_VISIBLE_DEVICES=2" || bad "mapped-1 env: $(field mapped-1 '{.spec.containers[0].env}')"
if [ "${E2E_NO_EXEC:-0}" != 1 ]; then
  seen=$(k exec -n "$test_ns" mapped-0 -- printenv CUDA_VISIBLE_DEVICES 2>&1 || true)
  [ "$seen" = 0,1 ] && ok "inside mapped-0's container: CUDA_VISIBLE_DEVICES=0,1" || bad "inside mapped-0: $seen"
fi
[ -z "$(field mapped-2 '{.spec.affinity}')" ] && [ -z "$(field mapped-2 '{.spec.containers[0].env}')" ] &&
  ok "mapped-2 (no entry) unchanged" || bad "mapped-2 was changed"

denied=$(test_pod badmap "  annotations:
    gpu-scheduling-map: |
      zero=${nodes[0]}:0" "" | k apply -f - 2>&1 || true)
[[ $denied == *denied* && $denied == *zero* ]] && ok "a bad map is denied, naming the line" ||
  bad "bad map: ${denied:-admitted}"
finish
