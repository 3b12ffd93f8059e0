# shellcheck shell=bash disable=SC2154  # repo: set by every script that sources this
# Shared by the real-node scripts (sourced): names and places of a cluster's real nodes.
#   node_network CLUSTER        the cluster's Docker network (nodes and the host's gateway)
#   node_container CLUSTER NODE the node's container name
#   node_state CLUSTER [NODE]   where the node's certificates and kubeconfigs live
#   network_gateway CLUSTER     the host's address on that network (the API server's SAN)
#   node_ip CLUSTER NODE        the node container's address
#   cluster_nodes CLUSTER       names of the cluster's real nodes, one per line
#   cluster_cidr CLUSTER        the pod range of all its nodes (10.X.0.0/16, chosen by
#                               up.sh so that clusters running side by side differ)
#   node_pod_cidr CLUSTER NODE  the node's own /24 in it
node_network() { printf 'gvirtus-%s' "$1"; }
node_container() { printf 'gvirtus-%s-%s' "$1" "$2"; }
node_state() { printf '%s/build/cluster/%s/nodes%s' "$repo" "$1" "${2:+/$2}"; }
network_gateway() {
  docker network inspect -f '{{(index .IPAM.Config 0).Gateway}}' "$(node_network "$1")"
}
node_ip() {
  docker inspect -f "{{(index .NetworkSettings.Networks \"$(node_network "$1")\").IPAddress}}" \
    "$(node_container "$1" "$2")"
}
cluster_nodes() {
  docker ps -a --filter "label=gvirtus.io/cluster=$1" --format '{{.Label "gvirtus.io/node"}}'
}
cluster_cidr() { cat "$(node_state "$1")/cluster-cidr"; }
node_pod_cidr() {
  local prefix
  prefix=$(cluster_cidr "$1" | cut -d. -f1-2)
  printf '%s.%s.0/24' "$prefix" "$(cat "$(node_state "$1" "$2")/index")"
}
