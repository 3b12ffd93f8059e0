#!/usr/bin/env bash
# Creates (or updates) a fake node managed by kwok, with labels and capacity.
#   add-node.sh NODE [label=value ...] [--capacity resource=quantity ...]
# Uses $KUBECONFIG (set by up.sh / with-cluster.sh). Default capacity: 16 cpu, 64Gi, 110 pods.
set -euo pipefail
node=${1:?usage: add-node.sh NODE [label=value ...] [--capacity resource=quantity ...]}
shift
declare -A capacity=([cpu]=16 [memory]=64Gi [pods]=110)
labels="\"kubernetes.io/hostname\": \"$node\""
mode=label
for arg in "$@"; do
  case "$arg" in
    --capacity) mode=capacity ;;
    --label) mode=label ;;
    *=*)
      key=${arg%%=*} value=${arg#*=}
      if [ "$mode" = capacity ]; then capacity[$key]=$value; else labels+=", \"$key\": \"$value\""; fi ;;
    *) echo "add-node.sh: \"$arg\" is not key=value" >&2; exit 2 ;;
  esac
done
resources=""
for key in "${!capacity[@]}"; do
  resources+="${resources:+, }\"$key\": \"${capacity[$key]}\""
done
# kwok keeps status.capacity/allocatable as written and manages the node's conditions
# (a cluster with real nodes leaves to kwok only the nodes annotated fake).
kubectl apply -f - >/dev/null <<JSON
{"apiVersion": "v1", "kind": "Node",
 "metadata": {"name": "$node", "labels": {$labels}, "annotations": {"kwok.x-k8s.io/node": "fake"}},
 "status": {"capacity": {$resources}, "allocatable": {$resources}}}
JSON
echo "[cluster] node $node" >&2
