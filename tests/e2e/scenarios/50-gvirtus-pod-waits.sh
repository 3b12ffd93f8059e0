#!/usr/bin/env bash
# With no backend, a GVirtuS pod is admitted with a warning, waits (scheduling gate
# gvirtus.io/backend, annotation gvirtus.io/backend-status=waiting) and already carries
# the rest of its wiring: the gvirtus-config volume, GVIRTUS_CONFIG, the frontend node
# selector and limits nvidia.com/gpu: 1 (docs/pod-contract.md).
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

ready_backends=$(k get pods -n "$system_ns" -l app.kubernetes.io/component=backend \
  -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c True || true)
[ "$ready_backends" = 0 ] || skip "$ready_backends backend pods are ready; this scenario needs none"
use_test_namespace

warnings=$(test_pod waiting "  labels:
    gvirtus.io/enabled: \"true\"" "" | k apply -f - 2>&1 >/dev/null || true)
[[ $warnings == *Warning* ]] && ok "admission warning: $(head -1 <<<"$warnings")" ||
  bad "no admission warning (stderr: ${warnings:-empty})"

field() { jp pod waiting -n "$test_ns" -o "jsonpath=$1"; }
[ "$(field '{.spec.schedulingGates[*].name}')" = gvirtus.io/backend ] && ok "scheduling gate gvirtus.io/backend" ||
  bad "scheduling gates: $(field '{.spec.schedulingGates}')"
[ "$(field '{.metadata.annotations.gvirtus\.io/backend-status}')" = waiting ] && ok "backend-status: waiting" ||
  bad "annotations: $(field '{.metadata.annotations}')"
[ -z "$(field '{.metadata.annotations.gvirtus\.io/backend}')" ] && ok "no backend yet" || bad "has a backend"
[ "$(field '{.spec.volumes[?(@.name=="gvirtus-config")].downwardAPI.items[0].path}')" = properties.json ] &&
  ok "volume gvirtus-config projects properties.json" || bad "volumes: $(field '{.spec.volumes}')"
[ "$(field '{.spec.containers[0].volumeMounts[?(@.name=="gvirtus-config")].mountPath}')" = /etc/gvirtus ] &&
  ok "mounted at /etc/gvirtus" || bad "mounts: $(field '{.spec.containers[0].volumeMounts}')"
[ "$(field '{.spec.containers[0].env[?(@.name=="GVIRTUS_CONFIG")].value}')" = /etc/gvirtus/properties.json ] &&
  ok "GVIRTUS_CONFIG=/etc/gvirtus/properties.json" || bad "env: $(field '{.spec.containers[0].env}')"
[ "$(field '{.spec.nodeSelector.gvirtus\.io/frontend\.allowed}')" = true ] &&
  ok "node selector gvirtus.io/frontend.allowed=true" || bad "nodeSelector: $(field '{.spec.nodeSelector}')"
[ "$(field '{.spec.containers[0].resources.limits.nvidia\.com/gpu}')" = 1 ] &&
  ok "limits nvidia.com/gpu: 1" || bad "limits: $(field '{.spec.containers[0].resources.limits}')"
# The scheduler takes pods in the order it learns of them: once it has placed a plain pod
# created after this one, it has seen this one and left it.
test_pod after-waiting "" "" | k apply -f - >/dev/null
placed() { [ -n "$(jp pod after-waiting -n "$test_ns" -o 'jsonpath={.spec.nodeName}')" ]; }
eventually "the scheduler places a plain pod created after it" placed
[ "$(field '{.status.phase}')" = Pending ] && [ -z "$(field '{.spec.nodeName}')" ] &&
  ok "still Pending, unscheduled" || bad "phase $(field '{.status.phase}') on $(field '{.spec.nodeName}')"
finish
