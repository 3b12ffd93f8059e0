#!/usr/bin/env bash
# Starts (or reuses) a local control plane named $1 with kwokctl --runtime binary and
# writes its kubeconfig to build/cluster/<name>/kubeconfig (and build/cluster/kubeconfig
# for the default cluster). Prints `export` lines for the cluster's environment on stdout.
#   up.sh NAME [--real-nodes]
# --real-nodes: the cluster can take real nodes (node/add.sh): a Docker network of its
# own whose gateway (this host) is in the API server's certificate and is its advertised
# address, kubelets reached at their InternalIP with the API server's client
# certificate, and webhooks called at their endpoints' pod IPs (routed to by node/add.sh)
# instead of their Service's cluster IP, which only the nodes' kube-proxy serves.
# Environment: GVIRTUS_CACHE (cache root), KWOK_WORKDIR (default build/cluster/kwok),
# CLUSTER_CONFIG (extra kwokctl config file, e.g. component args).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=versions.sh
source "$here/versions.sh"
name=${1:?usage: up.sh NAME [--real-nodes]}
real_nodes=0
case ${2:-} in
  "") ;;
  --real-nodes) real_nodes=1 ;;
  *) echo "up.sh: unknown argument \"$2\" (usage: up.sh NAME [--real-nodes])" >&2; exit 2 ;;
esac
say() { printf '[cluster %s] %s\n' "$name" "$*" >&2; }

for b in kube-apiserver kube-controller-manager kube-scheduler kubectl etcd kwok kwokctl; do
  [ -x "$CLUSTER_BIN/$b" ] || { say "missing $CLUSTER_BIN/$b: run tests/cluster/build.sh (make cluster-build)"; exit 1; }
done
export PATH=$CLUSTER_BIN:$PATH
export KWOK_WORKDIR=${KWOK_WORKDIR:-$repo/build/cluster/kwok}
out_dir=$repo/build/cluster/$name
mkdir -p "$out_dir" "$KWOK_WORKDIR"
kubeconfig=$out_dir/kubeconfig
cluster_dir=$KWOK_WORKDIR/clusters/$name

healthy() {
  [ -f "$cluster_dir/kubeconfig.yaml" ] &&
    kubectl --kubeconfig "$cluster_dir/kubeconfig.yaml" get --raw /readyz >/dev/null 2>&1
}

start=$SECONDS
if healthy; then
  say "reusing the running cluster"
else
  if [ -d "$cluster_dir" ]; then
    say "removing a stopped or broken cluster of the same name"
    kwokctl --name "$name" delete cluster >/dev/null 2>&1 || true
  fi
  say "starting kube-apiserver, etcd, controller-manager, scheduler and kwok ..."
  extra=()
  [ -n "${CLUSTER_CONFIG:-}" ] && extra+=(--config "$CLUSTER_CONFIG")
  if [ "$real_nodes" = 1 ]; then
    bash "$here/node/network.sh" create "$name"
    extra+=(--config "$(bash "$here/node/network.sh" kwokctl-config "$name")")
  fi
  if ! kwokctl create cluster --name "$name" --runtime binary "${extra[@]}" \
    --etcd-binary "$CLUSTER_BIN/etcd" \
    --kube-apiserver-binary "$CLUSTER_BIN/kube-apiserver" \
    --kube-controller-manager-binary "$CLUSTER_BIN/kube-controller-manager" \
    --kube-scheduler-binary "$CLUSTER_BIN/kube-scheduler" \
    --kwok-controller-binary "$CLUSTER_BIN/kwok" \
    --kubeconfig "" --timeout 5m --wait 3m >"$out_dir/kwokctl-create.log" 2>&1; then
    say "kwokctl create cluster failed; its output:"
    tail -30 "$out_dir/kwokctl-create.log" >&2
    kwokctl --name "$name" delete cluster >/dev/null 2>&1 || true
    exit 1
  fi
fi
cp "$cluster_dir/kubeconfig.yaml" "$kubeconfig"
[ "$name" = gvirtus ] && cp "$kubeconfig" "$repo/build/cluster/kubeconfig"

# The ServiceAccount admission plugin rejects pods until `default` exists.
for _ in $(seq 1 120); do
  kubectl --kubeconfig "$kubeconfig" -n default get serviceaccount default >/dev/null 2>&1 && break
  sleep 0.5
done
say "ready in $((SECONDS - start))s; kubeconfig $kubeconfig"
cat <<ENV
export GVIRTUS_CLUSTER_NAME=$name
export GVIRTUS_KUBECONFIG=$kubeconfig
export GVIRTUS_CLUSTER_BIN=$CLUSTER_BIN
export KWOK_WORKDIR=$KWOK_WORKDIR
export KUBECONFIG=$kubeconfig
export PATH=$CLUSTER_BIN:\$PATH
ENV
