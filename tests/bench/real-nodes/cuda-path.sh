# shellcheck shell=bash disable=SC2154  # ns, name, repo, pods: real-nodes-bench.sh's
# The CUDA path through our wiring (issue 56, item 3), sourced by real-nodes-bench.sh with
# ns, E2E_TEST_IMAGE and tests/lib/log.sh: GVirtuS-shaped calls (round-trip-probe: a
# length-prefixed routine name and a 100-500 byte buffer, answered in full by the stand-in
# backend) from a GVirtuS pod on fe-a to its backend, through the shim's session check and
# its own session process, with the NetworkPolicy agent on; against the same calls between
# the two nodes' host networks, to the same stand-in binary on the same backend node; and,
# between them, plain pods on the same two nodes (the pod network without our wiring).
#   cuda_path ROUNDS SESSIONS

# probe_pod NAME NODE IMAGE HOSTNET LABELS COMMAND...: runs COMMAND in a pod of its own on
# NODE until it ends; prints its log, or fails saying why.
probe_pod() {
  local name=$1 node=$2 image=$3 host_network=$4 labels=$5 args
  shift 5
  args=$(printf '"%s", ' "$@")
  kubectl apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: $name, namespace: $ns, labels: {bench: cuda-path$labels}}
spec:
  restartPolicy: Never
  hostNetwork: $host_network
  nodeSelector: {kubernetes.io/hostname: $node}
  terminationGracePeriodSeconds: 1
  containers: [{name: probe, image: $image, command: [${args%, }]}]
YAML
  ended() {
    [[ $(kubectl -n "$ns" get pod "$1" -o jsonpath='{.status.phase}') =~ Succeeded|Failed ]]
  }
  wait_until 180 "pod $name to end" ended "$name" || return 1
  if [ "$(kubectl -n "$ns" get pod "$name" -o jsonpath='{.status.phase}')" != Succeeded ]; then
    say "pod $name failed: $(kubectl -n "$ns" logs "$name" 2>&1 | tail -3)"
    return 1
  fi
  kubectl -n "$ns" logs "$name"
}

# standin_backend NAME NODE IMAGE HOSTNET PORT: the stand-in backend alone in a pod of its
# own on NODE (its host network with HOSTNET true), serving PORT; returns once it listens.
standin_backend() {
  local name=$1 node=$2 image=$3 host_network=$4 port=$5
  kubectl apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: $name, namespace: $ns, labels: {bench: cuda-path}}
spec:
  hostNetwork: $host_network
  nodeSelector: {kubernetes.io/hostname: $node}
  tolerations: [{operator: Exists}]
  terminationGracePeriodSeconds: 1
  containers:
    - name: backend
      image: $image
      command: [sh, -c, 'printf "{\"port\": \"$port\"}" >/tmp/p.json && exec /usr/local/gvirtus/bin/gvirtus-backend /tmp/p.json']
YAML
  serving() { kubectl -n "$ns" logs "$1" 2>/dev/null | grep -q "echo server on port $2"; }
  wait_until 120 "the stand-in backend $name on $node" serving "$name" "$port"
}

# figure LOG KEY FIELD: the number after FIELD on the line of LOG starting with KEY.
figure() { awk -v k="$2" -v f="$3" '$1 == k {for (i = 2; i < NF; i++) if ($i == f) print $(i + 1)}' <<<"$1"; }

cuda_path() {
  local rounds=$1 sessions=$2 pod_log host_log backend_pod backend_node backend_ip image port=9977
  say "CUDA path: $rounds calls and $sessions sessions, GVirtuS pod on fe-a -> its backend pod"
  pod_log=$(probe_pod cuda-pod fe-a "$E2E_TEST_IMAGE" false ', gvirtus.io/enabled: "true"' \
    round-trip-probe config "$rounds" "$sessions") || return 1
  backend_pod=$(kubectl -n "$ns" get pod cuda-pod -o jsonpath='{.metadata.annotations.gvirtus\.io/backend-pod}')
  backend_node=$(kubectl -n gvirtus-system get pod "${backend_pod##*/}" -o jsonpath='{.spec.nodeName}')
  backend_ip=$(kubectl get node "$backend_node" -o jsonpath='{.status.addresses[?(@.type=="InternalIP")].address}')
  [ -n "$backend_ip" ] || { say "no address for the backend pod $backend_pod's node"; return 1; }
  image=$(kubectl -n gvirtus-system get pod "${backend_pod##*/}" -o jsonpath='{.spec.containers[0].image}')
  say "CUDA path: the same calls between the host networks of fe-a and $backend_node ($backend_ip:$port)"
  local plain_log plain_ip
  standin_backend cuda-host-backend "$backend_node" "$image" true $port || return 1
  host_log=$(probe_pod cuda-host fe-a "$E2E_TEST_IMAGE" true '' \
    round-trip-probe "$backend_ip" "$port" "$rounds" "$sessions") || return 1
  say "CUDA path: the same calls between plain pods on fe-a and $backend_node"
  standin_backend cuda-plain-backend "$backend_node" "$image" false $port || return 1
  plain_ip=$(kubectl -n "$ns" get pod cuda-plain-backend -o jsonpath='{.status.podIP}')
  plain_log=$(probe_pod cuda-plain fe-a "$E2E_TEST_IMAGE" false '' \
    round-trip-probe "$plain_ip" "$port" "$rounds" "$sessions") || return 1
  kubectl -n "$ns" delete pods -l bench=cuda-path --wait=false >/dev/null
  printf '\nCUDA path: fe-a -> %s, %d calls of 100-500 bytes on one session; %d sessions set up\n' \
    "$backend_node" "$rounds" "$sessions"
  printf '  %-40s %10s %10s %14s %14s\n' "" "call p50" "call p99" "setup p50" "setup p99"
  printf '  %-40s %8s us %8s us %12s us %12s us\n' \
    "GVirtuS pod -> backend pod (our wiring)" "$(figure "$pod_log" round_trip_us p50)" \
    "$(figure "$pod_log" round_trip_us p99)" "$(figure "$pod_log" setup_us p50)" \
    "$(figure "$pod_log" setup_us p99)" \
    "plain pod -> plain pod (no GVirtuS)" "$(figure "$plain_log" round_trip_us p50)" \
    "$(figure "$plain_log" round_trip_us p99)" "$(figure "$plain_log" setup_us p50)" \
    "$(figure "$plain_log" setup_us p99)" \
    "host network -> host network" "$(figure "$host_log" round_trip_us p50)" \
    "$(figure "$host_log" round_trip_us p99)" "$(figure "$host_log" setup_us p50)" \
    "$(figure "$host_log" setup_us p99)"
  awk -v a="$(figure "$pod_log" round_trip_us p50)" -v b="$(figure "$host_log" round_trip_us p50)" \
    -v c="$(figure "$pod_log" round_trip_us p99)" -v d="$(figure "$host_log" round_trip_us p99)" \
    'BEGIN {printf "  ratio pod path/host path, calls: p50 %.2fx, p99 %.2fx (goal p50 at most 1.10x)\n", a / b, c / d}'
  awk -v a="$(figure "$pod_log" round_trip_us p50)" -v b="$(figure "$plain_log" round_trip_us p50)" \
    -v c="$(figure "$pod_log" setup_us p50)" -v d="$(figure "$plain_log" setup_us p50)" \
    'BEGIN {printf "  ratio pod path/plain pods: calls p50 %.2fx; setup p50 %.2fx\n", a / b, c / d}'
}
