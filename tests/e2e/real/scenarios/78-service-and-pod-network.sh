#!/usr/bin/env bash
# The cluster's plumbing that GVirtuS relies on, seen from a GVirtuS pod: it reaches each
# backend pod's IP, on whichever node that pod runs (routes between nodes), and a
# ClusterIP Service in front of the backends (kube-proxy's rules on its node). It probes
# the shims' health port (8080, open to every pod): port 9999 takes sessions only from
# the pods assigned to that backend (96-tenant-attacks).
# shellcheck source=../../scenarios/lib.sh
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
# health IP: the status line of GET /healthz on IP:8080.
health() {
  # shellcheck disable=SC2016  # $0 is the inner shell's: the IP passed after the script
  k exec -n "$test_ns" client -- timeout 5 bash -c \
    'exec 3<>"/dev/tcp/$0/8080" && printf "GET /healthz HTTP/1.0\r\n\r\n" >&3 && head -n 1 <&3' "$1" |
    tr -d '\r'
}
for backend in "${backends[@]}"; do
  ip=${backend% *}
  reply=$(health "$ip" 2>&1 || true)
  [[ $reply == "HTTP/1."?" 200"* ]] && ok "from $node to the backend pod $ip on ${backend#* }" ||
    bad "from $node to $ip on ${backend#* }: $reply"
done
k apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Service
metadata: {name: $service, namespace: $system_ns}
spec:
  selector: {app.kubernetes.io/component: backend}
  ports: [{port: 8080, targetPort: 8080, protocol: TCP}]
YAML
cluster_ip=$(jp service "$service" -n "$system_ns" -o 'jsonpath={.spec.clusterIP}')
through_service() { [[ $(health "$cluster_ip") == "HTTP/1."?" 200"* ]]; }
eventually "through the ClusterIP Service $cluster_ip:8080 (kube-proxy)" through_service
finish
