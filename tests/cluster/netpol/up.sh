#!/usr/bin/env bash
# Runs the NetworkPolicy agent (kube-network-policies, netpol/build.sh) on every real node
# of the current cluster (KUBECONFIG): its image is built on the project's Debian base
# image, pushed to the local registry the nodes pull from, and applied as a DaemonSet in
# kube-system. Returns when every node runs it.
#   netpol/up.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
# shellcheck source=../versions.sh
source "$here/../versions.sh"
log_tag="netpol"
# shellcheck source=../../lib/log.sh
source "$repo/tests/lib/log.sh"
binary=$(bash "$here/build.sh")
# Only the registry's address: the image is built by the engine itself (its builder sees
# the local base image), not by the multi-arch BuildKit daemon that up.sh would select.
registry_env=$(bash "$repo/tests/cluster/registry/up.sh" 2>/dev/null)
LOCAL_REGISTRY=$(eval "$registry_env" && echo "$LOCAL_REGISTRY")
base_image=${BASE_IMAGE:-debian:bookworm-slim}
bash "$repo/images/make-base-image.sh" "$base_image" 2>/dev/null
# Tagged by what goes in, so an unchanged image is neither rebuilt nor pushed again.
digest=$(cat "$here/Dockerfile" "$here/divert.sh" "$binary" |
  sha256sum | cut -c1-12)
image=$LOCAL_REGISTRY/gvirtus-test/kube-network-policies:$KNP_VERSION-$digest
if ! docker image inspect "$image" >/dev/null 2>&1; then
  context=$(mktemp -d /tmp/gvirtus-netpol.XXXXXX)
  trap 'rm -rf "$context"' EXIT
  cp "$here/Dockerfile" "$here/divert.sh" "$binary" "$context/"
  say "building $image"
  docker buildx version >/dev/null 2>&1 && export DOCKER_BUILDKIT=1 || export DOCKER_BUILDKIT=0
  docker build -q --build-arg "BASE_IMAGE=$base_image" -t "$image" "$context" >/dev/null
fi
docker push -q "$image" >/dev/null
sed "s|image: IMAGE|image: $image|" "$here/kube-network-policies.yaml" | kubectl apply -f - >/dev/null
kubectl rollout status daemonset/kube-network-policies -n kube-system --timeout=180s >/dev/null
say "kube-network-policies $KNP_VERSION runs on $(kubectl get daemonset kube-network-policies -n kube-system -o jsonpath='{.status.numberReady}') nodes"
