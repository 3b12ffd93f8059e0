#!/usr/bin/env bash
# A KAI-labelled Job and StatefulSet of GVirtuS pods: while no backend can take them they
# wait, gated, and KAI's podgrouper still groups them at once, with minMember 1 (KAI
# v0.12.0 makes no gang of a Job or a StatefulSet: one PodGroup per Job pod, one for the
# StatefulSet); so our controller releases them one by one, and KAI binds each: the Job
# completes, the StatefulSet's pod runs.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
sole_backend_node

k label node "$node" gvirtus.io/backend.allowed=false --overwrite >/dev/null
eventually "no backend pod left" no_backend || finish
k apply -f - >/dev/null <<YAML
apiVersion: batch/v1
kind: Job
metadata: {name: trainer, namespace: $test_ns}
spec:
  parallelism: 2
  completions: 2
  backoffLimit: 0
  template:
    metadata:
      labels: {gvirtus.io/enabled: "true", kai.scheduler/queue: team-a}
    spec:
      restartPolicy: Never
      terminationGracePeriodSeconds: 1
      containers:
        - name: app
          image: $test_image
          command: ["sh", "-c", "test -s /etc/gvirtus/properties.json"]
YAML
k apply -f - >/dev/null <<YAML
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: server, namespace: $test_ns}
spec:
  replicas: 1
  serviceName: server
  selector: {matchLabels: {app: server}}
  template:
    metadata:
      labels: {app: server, gvirtus.io/enabled: "true", kai.scheduler/queue: team-a}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
        - name: app
          image: $test_image
          command: ["sleep", "3600"]
YAML
pods() { k get pods -n "$test_ns" -l job-name=trainer -o "jsonpath=$1"; }
two_gated() { [ "$(pods '{range .items[*]}{.spec.schedulingGates[*].name}{"\n"}{end}' | grep -c gvirtus.io/backend)" = 2 ]; }
eventually "both Job pods wait, gated" two_gated
# The podgrouper groups gated pods too: each pod names its own PodGroup of minMember 1.
grouped() {
  local groups
  groups=$(pods '{range .items[*]}{.metadata.annotations.pod-group-name}{"\n"}{end}' | grep -c .)
  [ "$groups" = 2 ] && [ "$(pods '{range .items[*]}{.metadata.annotations.pod-group-name}{"\n"}{end}' | sort -u | grep -c .)" = 2 ]
}
eventually "KAI's podgrouper gives each gated pod a PodGroup of its own" grouped
for group in $(pods '{range .items[*]}{.metadata.annotations.pod-group-name}{"\n"}{end}'); do
  min=$(jp podgroups.scheduling.run.ai "$group" -n "$test_ns" -o 'jsonpath={.spec.minMember}')
  [ "$min" = 1 ] && ok "PodGroup $group: minMember 1 (no gang)" || bad "PodGroup $group: minMember '$min'"
done

sts_grouped() { [ -n "$(field server-0 '{.metadata.annotations.pod-group-name}')" ]; }
eventually "the StatefulSet's gated pod has a PodGroup too" sts_grouped
group=$(field server-0 '{.metadata.annotations.pod-group-name}')
min=$(jp podgroups.scheduling.run.ai "$group" -n "$test_ns" -o 'jsonpath={.spec.minMember}')
[ "$min" = 1 ] && ok "the StatefulSet's PodGroup $group: minMember 1 (no gang)" || bad "PodGroup $group: minMember '$min'"

say "a backend appears"
k label node "$node" gvirtus.io/backend.allowed=true --overwrite >/dev/null
complete() { [ "$(jp job trainer -n "$test_ns" -o 'jsonpath={.status.succeeded}')" = 2 ]; }
eventually "released, bound by KAI, and the Job completes (each pod read its GVirtuS configuration)" complete
eventually "the StatefulSet's pod released, bound by KAI and running" running server-0
finish
