#!/usr/bin/env bash
# The kubelet of a frontend node restarts (as on an upgrade): it forgets every device
# plugin, and gvirtus-device-plugin must register again on its own, so that a pod asking
# for nvidia.com/gpu is admitted on that node afterwards.
# shellcheck source=../../scenarios/lib.sh
source "$(dirname "$0")/../../scenarios/lib.sh"
node=${E2E_FRONTEND_NODE:-fe-a}
container=$(node_container "$node") || skip "node $node is not a Docker container here"
use_test_namespace
plugin=$(jp pods -n "$system_ns" -l app.kubernetes.io/component=device-plugin \
  --field-selector "spec.nodeName=$node" -o 'jsonpath={.items[0].metadata.name}')
[ -n "$plugin" ] || { bad "no device plugin pod on $node"; finish; }
registrations() {
  k get --raw "/api/v1/namespaces/$system_ns/pods/$plugin:8080/proxy/metrics" |
    awk '/^gvirtus_device_plugin_registrations_total/ {print $2}'
}
before=$(registrations)
[ -n "$before" ] && ok "device plugin registered $before time(s) so far" || bad "no registrations metric"
kubelet_pid() { docker exec "$container" pgrep -x kubelet; }
old_pid=$(kubelet_pid)
docker exec "$container" pkill -x kubelet && ok "killed the kubelet on $node (pid $old_pid)" || bad "could not kill the kubelet"
restarted() { local pid; pid=$(kubelet_pid) && [ "$pid" != "$old_pid" ]; }
eventually "the kubelet runs again" restarted
registered_again() { [ "$(registrations)" -gt "${before:-0}" ]; }
eventually "the device plugin registered again" registered_again
test_pod gpu-user "" "      resources: {limits: {nvidia.com/gpu: 1}}
  nodeSelector: {kubernetes.io/hostname: $node}" | k apply -f - >/dev/null
running() { [ "$(jp pod gpu-user -n "$test_ns" -o 'jsonpath={.status.phase}')" = Running ]; }
eventually "a pod asking nvidia.com/gpu: 1 runs on $node after the restart" running
finish
