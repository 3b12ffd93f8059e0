#!/usr/bin/env bash
# The cluster's plumbing that GVirtuS relies on, seen from a GVirtuS pod: it reaches each
# backend pod's IP, on whichever node that pod runs (routes between nodes), and a
# ClusterIP Service in front of the backends (kube-proxy's rules on its node).
source "$(dirname "$0")/../../scenarios/lib.sh"
mapfile -t backends < <(jp pods -n "$system_ns" -l app.kubernetes.io/component=backend \
  -o 'jsonpath={range .items[*]}{.status.podIP} {.spec.nodeName}{"\n"}{end}')
[ ${#backends[@]} -ge 2 ] || skip "needs two backend pods"
use_test_namespace
service=e2e-backend-echo
trap 'dump_on_failure; k delete service -n "$system_ns" "$service" --ignore-not-found >/dev/null 2>&1;
  k delete namespace "$test_ns" --ignore-not-found --wait=false >/dev/null 2>&1 || true' EXIT
test_pod client '  labels: {gvirtus.io/enabled: "true"}' "" | k apply -f - >/dev/null
running() { [ "$(jp pod client -n "$test_ns" -o 'jsonpath={.status.phase}')" = Running ]; }
eventually "a GVirtuS pod runs" running || finish
node=$(jp pod client -n "$test_ns" -o 'jsonpath={.spec.nodeName}')
for backend in "${backends[@]}"; do
  ip=${backend% *}
  reply=$(k exec -n "$test_ns" client -- timeout 5 tcp-echo-probe "$ip" 9999 2>&1 || true)
  [ "$reply" = gvirtus ] && ok "from $node to the backend pod $ip on ${backend#* }" ||
    bad "from $node to $ip on ${backend#* }: $reply"
done
k apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Service
metadata: {name: $service, namespace: $system_ns}
spec:
  selector: {app.kubernetes.io/component: backend}
  ports: [{port: 9999, targetPort: 9999, protocol: TCP}]
YAML
cluster_ip=$(jp service "$service" -n "$system_ns" -o 'jsonpath={.spec.clusterIP}')
through_service() { [ "$(k exec -n "$test_ns" client -- timeout 5 tcp-echo-probe "$cluster_ip" 9999)" = gvirtus ]; }
eventually "through the ClusterIP Service $cluster_ip:9999 (kube-proxy)" through_service
finish
