#!/usr/bin/env bash
# Builds the images for every platform with docker buildx bake (images/docker-bake.hcl)
# and pushes one manifest list per image to a registry. The C++ is compiled once per
# platform, cross-compiled for the platforms that are not the build machine's.
#
#   images/build.sh [--test] [--plugin DIR] [--cache-only PLATFORM] [IMAGE...]
#
#   IMAGE     labeler device-plugin webhook backend kai-reservation testapp (default: all
#             but testapp)
#   --test    then check the pushed images (images/test.sh)
#   --plugin  also write the kubectl plugin's krew payload for every platform to
#             DIR/linux_ARCH (from the same builder; images/release.sh packs it)
#   --cache-only PLATFORM
#             build the images (those built for PLATFORM) and the kubectl plugin for
#             PLATFORM alone into BuildKit's cache, nothing pushed: a later build of every
#             platform finds that platform's steps done (tests/e2e/real/run-e2e.sh compiles
#             the release's arm64 images while the scenarios run)
#
# Without REGISTRY (make images): the local registry and BuildKit daemon of
# tests/cluster/registry are started when they are not running, and the images go to
# localhost:5000/gvirtus-k8s; the Debian base image is made with debootstrap and pushed
# there first (make-base-image.sh), and the backend is built on the GPU-less GVirtuS
# stand-in (GVIRTUS_IMAGE=standin). Nothing is pulled from the Internet.
# With REGISTRY (make images-push): the buildx builder BUILDX_BUILDER (default
# gvirtus-multiarch, created with the docker-container driver when missing) and the
# images and bases it can pull; the backend extends upstream's GVirtuS image.
#
# Environment:
#   REGISTRY          registry and path, e.g. ghcr.io/acme/gvirtus-k8s
#   TAG               image tag (default: the project version in CMakeLists.txt)
#   PLATFORMS         default linux/amd64,linux/arm64
#   BACKEND_PLATFORMS default linux/amd64 (upstream's GVirtuS image is amd64 only)
#   BASE_IMAGE        Debian base of the builder (default debian:bookworm-slim)
#   GVIRTUS_IMAGE     the GVirtuS image the backend extends; "standin" for the stand-in
#   BUILD_JOBS        compile jobs inside the builder (default: all cores)
#   SBOM=1            attach an SBOM attestation to each pushed image (BuildKit's SBOM
#                     scanner image must be pullable: the release workflow, not here)
#   CCACHE            the compiler cache the builder reads (local mode: the host's, when
#                     ccache has one; with REGISTRY: none, images/no-ccache)
#
# Prints how long each platform took: the build machine's platform alone first (not
# pushed), then all of them (the first cached) and the push.
# Exit: 0 built and pushed (and tested); 1 a build or a test failed; 2 bad arguments.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)

test_images=0 wanted=() plugin_dir="" cache_only="" bake_allow=()
while [ $# -gt 0 ]; do
  arg=$1
  shift
  case $arg in
    --test) test_images=1 ;;
    --plugin)
      plugin_dir=${1:?build.sh: --plugin needs a folder}
      shift
      mkdir -p "$plugin_dir" && plugin_dir=$(cd "$plugin_dir" && pwd)
      ;;
    --cache-only)
      cache_only=${1:?build.sh: --cache-only needs a platform (linux/arm64)}
      shift
      [[ $cache_only =~ ^linux/[a-z0-9]+$ ]] ||
        { echo "build.sh: --cache-only: \"$cache_only\" is not a platform (linux/arm64)" >&2; exit 2; }
      ;;
    labeler | device-plugin | webhook | backend | kai-reservation | testapp) wanted+=("$arg") ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "build.sh: unknown argument \"$arg\" (see --help)" >&2; exit 2 ;;
  esac
done
[ ${#wanted[@]} -gt 0 ] || wanted=(labeler device-plugin webhook backend kai-reservation)
log_tag="images"
# shellcheck source=../tests/lib/log.sh
source "$repo/tests/lib/log.sh"

if ! reason=$(timeout 20 docker info --format '{{.ServerVersion}}' 2>&1); then
  say "FAILED: no Docker engine answers ($(tail -1 <<<"$reason"))"
  exit 1
fi
version=$(sed -nE 's/^project\([^)]*VERSION ([0-9][0-9.]*).*/\1/p' "$repo/CMakeLists.txt")
export TAG=${TAG:-${version:-dev}}
export PLATFORMS=${PLATFORMS:-linux/amd64,linux/arm64}
export BACKEND_PLATFORMS=${BACKEND_PLATFORMS:-linux/amd64}
timings=()
timed() { timings+=("$(printf '%-52s %5ss' "$1" "$2")"); }

if [ -z "${REGISTRY:-}" ]; then
  start=$SECONDS
  eval "$(bash "$repo/tests/cluster/registry/up.sh")"
  timed "local registry and BuildKit up" $((SECONDS - start))
  export REGISTRY=$LOCAL_REGISTRY/gvirtus-k8s
  export GVIRTUS_IMAGE=${GVIRTUS_IMAGE:-standin}
  # The base image, as a registry would serve it to BuildKit.
  start=$SECONDS
  base=${BASE_IMAGE:-debian:bookworm-slim}
  bash "$here/make-base-image.sh" "$base"
  export BASE_IMAGE=$LOCAL_REGISTRY/gvirtus-k8s/${base/:/-}:base
  docker tag "$base" "$BASE_IMAGE"
  docker push -q "$BASE_IMAGE" >/dev/null
  timed "base image $base -> $BASE_IMAGE" $((SECONDS - start))
  # The host's compiler cache, which `make build` filled: the builder reads it for this
  # machine's platform (images/Dockerfile.builder) and compiles only what it lacks.
  host_ccache=$(ccache --get-config cache_dir 2>/dev/null || true)
  if [ -n "$host_ccache" ] && [ -d "$host_ccache" ]; then
    export CCACHE=$host_ccache
    # bake reads a folder outside the repository only when allowed to.
    bake_allow=(--allow "fs.read=$host_ccache")
  fi
else
  # A release is built from the sources alone, never from a machine's compiler cache.
  export CCACHE=images/no-ccache
  builder=${BUILDX_BUILDER:-gvirtus-multiarch}
  docker buildx version >/dev/null 2>&1 || { say "FAILED: docker buildx is not installed"; exit 1; }
  if ! docker buildx inspect "$builder" >/dev/null 2>&1; then
    say "creating buildx builder $builder (docker-container driver: multi-platform, push)"
    docker buildx create --name "$builder" --driver docker-container >/dev/null
  fi
  export BUILDX_BUILDER=$builder
fi

# bake LOG ARGS...: runs the bake, its plain progress into LOG; on failure the log's end.
logs=$repo/build/images
mkdir -p "$logs"
bake() {
  local log=$1
  shift
  if ! docker buildx bake "${bake_allow[@]}" -f "$here/docker-bake.hcl" --progress=plain "$@" >"$log" 2>&1; then
    say "FAILED: docker buildx bake $*; last lines of $log:"
    tail -n 30 "$log" >&2
    exit 1
  fi
}
cd "$repo"
if [ -n "$cache_only" ]; then
  targets=()
  for name in "${wanted[@]}"; do
    [ "$name" = backend ] && [[ ,$BACKEND_PLATFORMS, != *",$cache_only,"* ]] && continue
    targets+=("$name")
  done
  start=$SECONDS
  say "building ${targets[*]} and the kubectl plugin for $cache_only into the build cache only ..."
  bake "$logs/bake-cache-$(tr / _ <<<"$cache_only").log" --set "*.platform=$cache_only" \
    --set '*.output=type=cacheonly' "${targets[@]}" kubectl-plugin
  say "built for $cache_only in $((SECONDS - start))s, in the cache only"
  exit 0
fi
build_platform=linux/$(docker version -f '{{.Server.Arch}}')
start=$SECONDS
say "building ${wanted[*]} for $build_platform (the build machine's platform), not pushed ..."
bake "$logs/bake-$(tr / _ <<<"$build_platform").log" --set "*.platform=$build_platform" \
  --set '*.output=type=cacheonly' "${wanted[@]}"
timed "$build_platform (build machine)" $((SECONDS - start))
start=$SECONDS
say "building ${wanted[*]} for $PLATFORMS (backend: $BACKEND_PLATFORMS) and pushing to $REGISTRY ..."
attest=()
[ "${SBOM:-0}" = 1 ] && attest=(--set '*.attest=type=sbom' --set '*.attest=type=provenance,mode=max')
bake "$logs/bake-all.log" --push "${attest[@]}" "${wanted[@]}"
timed "+ the other platforms, and the push" $((SECONDS - start))
if [ -n "$plugin_dir" ]; then
  start=$SECONDS
  say "kubectl plugin for $PLATFORMS -> $plugin_dir ..."
  # platform-split: a folder per platform even when there is one (PLATFORMS=linux/amd64).
  bake "$logs/bake-plugin.log" --set "kubectl-plugin.output=type=local,dest=$plugin_dir,platform-split=true" \
    kubectl-plugin
  timed "kubectl plugin, every platform" $((SECONDS - start))
fi
say "build times:"
for t in "${timings[@]}"; do printf '    %s\n' "$t" >&2; done
for name in "${wanted[@]}"; do
  suffix=""
  [ "$name" = backend ] && [ "${GVIRTUS_IMAGE:-}" = standin ] && suffix=-standin
  say "pushed $REGISTRY/$name:$TAG$suffix"
done

if [ "$test_images" = 1 ]; then
  exec bash "$here/test.sh" "${wanted[@]}"
fi
