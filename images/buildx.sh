#!/usr/bin/env bash
# Builds the images for several platforms (default linux/amd64 and linux/arm64) with
# docker buildx bake and pushes them to a registry. Cannot run without buildx and a
# reachable registry (images/build.sh is the local, registry-free build).
#
#   REGISTRY=ghcr.io/acme/gvirtus-k8s images/buildx.sh [--print] [TARGET...]
#
#   --print   show the resolved bake configuration and build nothing
#   TARGET    labeler device-plugin webhook backend (default: all)
# Environment: REGISTRY (required), TAG (default: the project version), PLATFORMS,
# BACKEND_PLATFORMS, BASE_IMAGE, GVIRTUS_IMAGE (see docker-bake.hcl), BUILDX_BUILDER
# (default gvirtus-multiarch, created with the docker-container driver when missing).
# Other platforms than the machine's run under QEMU: install it once with
#   docker run --privileged --rm tonistiigi/binfmt --install arm64
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
say() { printf '[buildx %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

print=0 targets=()
for arg in "$@"; do
  case $arg in
    --print) print=1 ;;
    labeler | device-plugin | webhook | backend) targets+=("$arg") ;;
    *) echo "buildx.sh: unknown argument \"$arg\"" >&2; exit 2 ;;
  esac
done
: "${REGISTRY:?set REGISTRY to the registry and path to push to, e.g. REGISTRY=ghcr.io/acme/gvirtus-k8s}"
version=$(sed -nE 's/^project\([^)]*VERSION ([0-9][0-9.]*).*/\1/p' "$repo/CMakeLists.txt")
export REGISTRY TAG=${TAG:-${version:-dev}}
docker buildx version >/dev/null 2>&1 || { say "docker buildx is not installed"; exit 1; }

cd "$repo"
if [ "$print" = 1 ]; then
  exec docker buildx bake -f images/docker-bake.hcl --print "${targets[@]}"
fi
builder=${BUILDX_BUILDER:-gvirtus-multiarch}
if ! docker buildx inspect "$builder" >/dev/null 2>&1; then
  say "creating buildx builder $builder (docker-container driver: multi-platform, push)"
  docker buildx create --name "$builder" --driver docker-container >/dev/null
fi
supported=$(docker buildx inspect --bootstrap "$builder" | sed -n 's/^Platforms: *//p')
for platform in $(tr ',' ' ' <<<"${PLATFORMS:-linux/amd64,linux/arm64} ${BACKEND_PLATFORMS:-linux/amd64}"); do
  if [[ ", $supported," != *", $platform,"* && ", $supported," != *", $platform*,"* ]]; then
    say "builder $builder cannot build $platform (has: $supported);"
    say "  install QEMU: docker run --privileged --rm tonistiigi/binfmt --install all"
    exit 1
  fi
done
start=$SECONDS
say "building ${targets[*]:-all images} for ${PLATFORMS:-linux/amd64,linux/arm64} -> $REGISTRY (tag $TAG)"
docker buildx bake -f images/docker-bake.hcl --builder "$builder" --push --progress=plain "${targets[@]}"
say "pushed in $((SECONDS - start))s"
