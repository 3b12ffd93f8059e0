#!/usr/bin/env bash
# End-to-end tests on kind, for users' CI (.github/workflows/e2e.yaml): builds the
# images, creates a kind cluster (one control plane, four workers), loads the images
# with `kind load`, installs manifests/ and runs the shared scenarios
# (tests/e2e/run-scenarios.sh), then, with two workers opted in as backends, the
# real-node scenarios (tests/e2e/real/scenarios) — the same ones as the local end-to-end
# tests on real nodes; only the cluster and the deployment differ. Needs docker, kind and
# kubectl, and a registry for the base images (debian, the kind node image).
#
#   tests/kind/run-e2e.sh [--keep] [--no-build] [SCENARIO_PATTERN]
#
#   --keep      leave the cluster running (delete: kind delete cluster --name NAME)
#   --no-build  use images already in the engine
# Environment: KIND_CLUSTER (default gvirtus-e2e), KIND_NODE_IMAGE (kind's default when
# unset), TAG (default e2e), GVIRTUS_IMAGE (default standin: CI runners have no GPU, so
# the backend is the stand-in echo server of images/Dockerfile.gvirtus-standin; give a
# real GVirtuS image on GPU runners), E2E_ARTIFACTS (default build/e2e-kind/artifacts).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
log_tag="kind-e2e"
# shellcheck source=../lib/log.sh
source "$repo/tests/lib/log.sh"

keep=0 build=1 pattern=""
for arg in "$@"; do
  case $arg in
    --keep) keep=1 ;;
    --no-build) build=0 ;;
    -*) echo "run-e2e.sh: unknown option $arg" >&2; exit 2 ;;
    *) pattern=$arg ;;
  esac
done
for tool in docker kind kubectl; do
  command -v "$tool" >/dev/null || { say "missing $tool"; exit 1; }
done

cluster=${KIND_CLUSTER:-gvirtus-e2e}
prefix=gvirtus-k8s
tag=${TAG:-e2e}
gvirtus_image=${GVIRTUS_IMAGE:-standin}
work=$repo/build/e2e-kind
export E2E_ARTIFACTS=${E2E_ARTIFACTS:-$work/artifacts}
mkdir -p "$work" "$E2E_ARTIFACTS"
start=$SECONDS

# --- Images ------------------------------------------------------------------------
backend_tag=$tag
[ "$gvirtus_image" = standin ] && backend_tag=$tag-standin
testapp=$prefix/testapp:$tag
if [ "$build" = 1 ]; then
  say "building and testing the images (tag $tag)"
  TAG=$tag GVIRTUS_IMAGE=$gvirtus_image bash "$repo/images/build.sh" --test \
    labeler device-plugin webhook backend kai-reservation testapp
  eval "$(bash "$repo/tests/cluster/registry/up.sh")"
  for image in "$prefix/labeler:$tag" "$prefix/device-plugin:$tag" "$prefix/webhook:$tag" \
      "$prefix/backend:$backend_tag" "$testapp"; do
    docker pull -q "$LOCAL_REGISTRY/$image" >/dev/null && docker tag "$LOCAL_REGISTRY/$image" "$image"
  done
fi
images=("$prefix/labeler:$tag" "$prefix/device-plugin:$tag" "$prefix/webhook:$tag" "$prefix/backend:$backend_tag"
  "$testapp")
for image in "${images[@]}"; do
  docker image inspect "$image" >/dev/null 2>&1 || { say "missing image $image (build it, or drop --no-build)"; exit 1; }
done

# --- Cluster -----------------------------------------------------------------------
collect() {
  say "collecting logs into $E2E_ARTIFACTS"
  kubectl get nodes --show-labels >"$E2E_ARTIFACTS/nodes.txt" 2>&1 || true
  kubectl get all,events,leases,secrets -n gvirtus-system -o wide >"$E2E_ARTIFACTS/gvirtus-system.txt" 2>&1 || true
  kubectl get mutatingwebhookconfiguration gvirtus-webhook -o yaml >"$E2E_ARTIFACTS/webhook-config.yaml" 2>&1 || true
  local pod
  for pod in $(kubectl get pods -n gvirtus-system -o name 2>/dev/null); do
    kubectl logs -n gvirtus-system "$pod" --all-containers --prefix >"$E2E_ARTIFACTS/${pod#pod/}.log" 2>&1 || true
  done
  kind export logs "$E2E_ARTIFACTS/kind" --name "$cluster" >/dev/null 2>&1 || true
}
cleanup() {
  local status=$?
  [ "$status" = 0 ] || collect
  if [ "$keep" = 1 ]; then
    say "cluster $cluster kept (kubeconfig $KUBECONFIG)"
  else
    kind delete cluster --name "$cluster" >/dev/null 2>&1 || true
  fi
  exit "$status"
}
export KUBECONFIG=$work/kubeconfig
kind delete cluster --name "$cluster" >/dev/null 2>&1 || true
trap cleanup EXIT
cat >"$work/kind.yaml" <<YAML
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
nodes:
  - role: control-plane
  - role: worker
  - role: worker
  - role: worker
  - role: worker
YAML
say "creating kind cluster $cluster (1 control plane, 4 workers)"
kind create cluster --name "$cluster" --config "$work/kind.yaml" --kubeconfig "$KUBECONFIG" \
  ${KIND_NODE_IMAGE:+--image "$KIND_NODE_IMAGE"} --wait 3m
for image in "${images[@]}"; do
  say "kind load docker-image $image"
  kind load docker-image "$image" --name "$cluster" >/dev/null
done

# --- Deployment --------------------------------------------------------------------
# manifests/ as shipped, with this run's image tags.
overlay=$work/overlay
rm -rf "$overlay" && mkdir -p "$overlay"
cat >"$overlay/kustomization.yaml" <<YAML
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - $(realpath --relative-to="$overlay" "$repo/manifests")
  - $(realpath --relative-to="$overlay" "$repo/tests/e2e/nvidia-standin")
images:
  - {name: $prefix/labeler, newTag: "$tag"}
  - {name: $prefix/device-plugin, newTag: "$tag"}
  - {name: $prefix/webhook, newTag: "$tag"}
  - {name: $prefix/backend, newTag: "$backend_tag"}
YAML
say "kubectl apply -k manifests/ (tags $tag)"
kubectl apply -k "$overlay" >/dev/null
kubectl rollout status daemonset/gvirtus-labeler -n gvirtus-system --timeout=3m
kubectl rollout status deployment/gvirtus-webhook -n gvirtus-system --timeout=3m

# One worker may become a backend (scenario 60 opts it in and out); the stand-in
# backend echoes, and kindnet enforces NetworkPolicy (kind 0.24 and later).
backend_node=$(kubectl get nodes -l '!node-role.kubernetes.io/control-plane' -o name | sort | tail -1)
export E2E_BACKEND_NODE=${backend_node#node/}
[ "$gvirtus_image" = standin ] && export E2E_BACKEND_ECHO=1
export E2E_NETWORK_POLICY=${E2E_NETWORK_POLICY:-1}

export E2E_TEST_IMAGE=$testapp
# kind's node containers are named after their nodes.
export E2E_NODE_CONTAINER_PREFIX=""

say "scenarios (backend node $E2E_BACKEND_NODE)"
bash "$repo/tests/e2e/run-scenarios.sh" ${pattern:+"$pattern"}
# Two workers as backends, one left as a frontend, for the scenarios that restart and
# kill things (restart-apiserver is local-only: it skips here).
mapfile -t workers < <(kubectl get nodes -l '!node-role.kubernetes.io/control-plane' -o name | sort | sed 's|node/||')
export E2E_BACKEND2_NODE=${workers[2]} E2E_FRONTEND_NODE=${workers[0]}
kubectl label node "${workers[2]}" "${workers[3]}" gvirtus.io/backend.allowed=true nvidia.com/gpu.present=true --overwrite >/dev/null
E2E_SCENARIO_DIR=$repo/tests/e2e/real/scenarios bash "$repo/tests/e2e/run-scenarios.sh" ${pattern:+"$pattern"}
say "passed in $((SECONDS - start))s"
