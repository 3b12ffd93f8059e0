#!/usr/bin/env bash
# Adds a real node (kubelet + kube-proxy + containerd in a Docker container) to a local
# cluster started with `up.sh NAME --real-nodes`, beside kwok's fake nodes. The node
# gets its own pod range, routes to every other node's pods (and the host gets one to
# its pods, so the API server reaches webhooks), a client certificate of its own
# (system:node:NODE), and the project's images: pulled, as a real cluster does, from the
# local registry (--registry: images named HOST:PORT/... come from tests/cluster/registry's
# container on the cluster's network), or imported into its containerd (--image).
#   node/add.sh CLUSTER NODE [--label key=value]... [--taint key=value:Effect]...
#               [--registry localhost:5000] [--image IMAGE]... [--no-wait]
# Environment: KUBECONFIG (the cluster's), NODE_IMAGE (default: node/build.sh's).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
# shellcheck source=../versions.sh
source "$here/../versions.sh"
# shellcheck source=lib.sh
source "$here/lib.sh"
usage="usage: node/add.sh CLUSTER NODE [--label k=v]... [--taint k=v:Effect]... [--registry HOST:PORT] [--image IMAGE]... [--no-wait]"
cluster=${1:?$usage}
node=${2:?$usage}
shift 2
labels=() taints=() images=() wait=1 registry=""
while [ $# -gt 0 ]; do
  case $1 in
    --label) labels+=("${2:?$usage}"); shift 2 ;;
    --taint) taints+=("${2:?$usage}"); shift 2 ;;
    --image) images+=("${2:?$usage}"); shift 2 ;;
    --registry) registry=${2:?$usage}; shift 2 ;;
    --no-wait) wait=0; shift ;;
    *) echo "node/add.sh: unknown argument \"$1\" ($usage)" >&2; exit 2 ;;
  esac
done
[[ $node =~ ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ ]] || { echo "node/add.sh: bad node name \"$node\"" >&2; exit 2; }
log_tag="node $node"
# shellcheck source=../../lib/log.sh
source "$repo/tests/lib/log.sh"
export PATH=$CLUSTER_BIN:$PATH
pki=${KWOK_WORKDIR:-$repo/build/cluster/kwok}/clusters/$cluster/pki
network=$(node_network "$cluster")
container=$(node_container "$cluster" "$node")
docker network inspect "$network" >/dev/null 2>&1 ||
  { say "no network $network: start the cluster with up.sh $cluster --real-nodes"; exit 1; }
[ -f "$pki/ca.key" ] || { say "no cluster CA in $pki"; exit 1; }
image=${NODE_IMAGE:-$(bash "$here/build.sh")}
start=$SECONDS

# --- State: pod range, certificates, kubeconfigs -------------------------------------
docker rm -f -v "$container" >/dev/null 2>&1 || true
state=$(node_state "$cluster" "$node")
mkdir -p "$state/pki"
# Nodes may be added in parallel: the pod range, the container and the routes are
# settled one node at a time.
exec 9>"$(node_state "$cluster")/.lock"
flock 9
if [ ! -f "$state/index" ]; then
  used=$(cat "$(node_state "$cluster")"/*/index 2>/dev/null || true)
  for n in $(seq 1 254); do grep -qx "$n" <<<"$used" || { echo "$n" >"$state/index"; break; }; done
fi
pod_cidr=$(node_pod_cidr "$cluster" "$node")
gateway=$(network_gateway "$cluster")
server=$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')
port=${server##*:}
cp "$pki/ca.crt" "$state/pki/ca.crt"
# client_cert NAME SUBJECT: a client certificate signed by the cluster CA, for a year.
client_cert() {
  openssl req -new -newkey rsa:2048 -nodes -subj "$2" -keyout "$state/pki/$1.key" \
    -out "$state/pki/$1.csr" 2>/dev/null
  printf 'extendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature,keyEncipherment\n' >"$state/pki/$1.ext"
  openssl x509 -req -in "$state/pki/$1.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" \
    -CAcreateserial -days 365 -extfile "$state/pki/$1.ext" -out "$state/pki/$1.crt" 2>/dev/null
  rm -f "$state/pki/$1.csr" "$state/pki/$1.ext"
}
kubeconfig() { # kubeconfig NAME: for the certificate NAME, to the API server on the gateway
  cat >"$state/$1.kubeconfig" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
  - name: $cluster
    cluster: {server: "https://$gateway:$port", certificate-authority: /etc/kubernetes/pki/ca.crt}
users:
  - name: $1
    user: {client-certificate: /etc/kubernetes/pki/$1.crt, client-key: /etc/kubernetes/pki/$1.key}
contexts:
  - name: $1
    context: {cluster: $cluster, user: $1}
current-context: $1
KUBECONFIG
}
# The Node authorizer lets system:node:NODE touch only what its own pods need;
# system:kube-proxy is bound to system:node-proxier by the API server's default RBAC.
[ -f "$state/pki/kubelet.crt" ] || client_cert kubelet "/O=system:nodes/CN=system:node:$node"
[ -f "$state/pki/kube-proxy.crt" ] || client_cert kube-proxy "/CN=system:kube-proxy"
kubeconfig kubelet
kubeconfig kube-proxy
chmod -R go-rwx "$state/pki"

# --- The local registry: containerd's hosts.toml (its config_path is in /etc/kubernetes)
rm -rf "$state/registry-hosts"
if [ -n "$registry" ]; then
  docker network connect "$network" gvirtus-registry >/dev/null 2>&1 || true
  registry_ip=$(docker inspect -f "{{with index .NetworkSettings.Networks \"$network\"}}{{.IPAddress}}{{end}}" \
    gvirtus-registry 2>/dev/null || true)
  [ -n "$registry_ip" ] || { say "no local registry on $network (start it: tests/cluster/registry/up.sh)"; exit 1; }
  mkdir -p "$state/registry-hosts/$registry"
  cat >"$state/registry-hosts/$registry/hosts.toml" <<HOSTS
# Images named $registry/... come from the local registry, on the cluster's network.
server = "http://$registry"
[host."http://$registry_ip:5000"]
  capabilities = ["pull", "resolve"]
HOSTS
fi

# --- The container -------------------------------------------------------------------
node_labels=$(IFS=,; echo "${labels[*]:-}")
node_taints=$(IFS=,; echo "${taints[*]:-}")
# Everything a kubelet needs but --privileged (refused here) and CAP_SYS_RESOURCE.
docker run -d --name "$container" --hostname "$node" \
  --label "gvirtus.io/cluster=$cluster" --label "gvirtus.io/node=$node" \
  --network "$network" \
  --cap-add ALL --cap-drop SYS_RESOURCE \
  --security-opt seccomp=unconfined --security-opt apparmor=unconfined \
  --security-opt systempaths=unconfined \
  --device /dev/kmsg --cgroupns host -v /sys/fs/cgroup:/sys/fs/cgroup:rw \
  --tmpfs /run --tmpfs /tmp -v "$state:/etc/kubernetes:ro" \
  --sysctl net.ipv4.ip_forward=1 --sysctl net.ipv4.conf.all.route_localnet=1 \
  -e "NODE_NAME=$node" -e "POD_CIDR=$pod_cidr" -e "CLUSTER_CIDR=$(cluster_cidr "$cluster")" -e "CGROUP_ROOT=$container" \
  -e "NODE_LABELS=$node_labels" -e "NODE_TAINTS=$node_taints" \
  "$image" >/dev/null
ip=$(node_ip "$cluster" "$node")

# --- Routes: every node reaches every other node's pods; so does the host ------------
for other in $(cluster_nodes "$cluster"); do
  [ "$other" = "$node" ] && continue
  other_ip=$(node_ip "$cluster" "$other") && [ -n "$other_ip" ] || continue
  docker exec "$container" ip route replace "$(node_pod_cidr "$cluster" "$other")" via "$other_ip"
  docker exec "$(node_container "$cluster" "$other")" ip route replace "$pod_cidr" via "$ip"
done
ip route replace "$pod_cidr" via "$ip"
flock -u 9

# --- The project's images, as a registry would serve them ----------------------------
wait_until 20 "containerd in $container" docker exec "$container" ctr version || true
for wanted in "${images[@]}"; do
  docker save "$wanted" | docker exec -i "$container" ctr -n k8s.io images import - >/dev/null ||
    { say "could not load image $wanted"; exit 1; }
done
[ ${#images[@]} = 0 ] || say "loaded ${#images[@]} images"

if [ "$wait" = 1 ]; then
  node_ready() { [ "$(kubectl get node "$node" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]; }
  if ! wait_until 120 "node $node Ready" node_ready; then
    say "FAILED: not Ready after 120s; last kubelet lines:"
    docker exec "$container" tail -n 20 /var/log/gvirtus-node/kubelet.log >&2 || docker logs "$container" 2>&1 | tail -20 >&2
    exit 1
  fi
fi
say "ready in $((SECONDS - start))s: $ip, pods $pod_cidr${node_labels:+, labels $node_labels}${node_taints:+, taints $node_taints}"
