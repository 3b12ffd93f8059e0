#!/usr/bin/env bash
# A release, as operators install it: the images for every platform (images/build.sh),
# the Helm chart as an OCI artifact whose default images are this release's, and the
# kubectl plugin's archives with their krew manifest. The release workflow
# (.github/workflows/release.yaml) runs it on a version tag; run locally it publishes to
# the loopback registry of tests/cluster/registry, where the tests install from.
#
#   images/release.sh                                        local: localhost:5000
#   REGISTRY=ghcr.io/acme/gvirtus-k8s TAG=0.2.0 images/release.sh
#
# Environment:
#   REGISTRY     where the images go (REGISTRY/labeler:TAG, ...); the chart goes to
#                oci://REGISTRY/charts/gvirtus:TAG. Unset: the loopback registry, over
#                plain HTTP, the backend on the GPU-less GVirtuS stand-in.
#   TAG          the version (default: CMakeLists.txt's); the chart's version and appVersion
#   SBOM=1       an SBOM and provenance attestation on each image (images/build.sh)
#   PLUGIN_URL   where the plugin archives will be downloadable, for the krew manifest
#                (default: the GitHub release of GITHUB_REPOSITORY, tag vTAG)
#   HELM         the helm binary (default: helm on PATH)
#
# Writes build/release/: gvirtus-TAG.tgz (the chart), kubectl-gvirtus_TAG_linux_ARCH.tar.gz
# and gvirtus.yaml (krew), and artifacts.txt: every pushed reference by digest, one a
# line, for signing (the workflow signs them with cosign, keyless).
# Exit: 0 published; 1 a step failed; 2 bad environment.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
log_tag="release"
# shellcheck source=../tests/lib/log.sh
source "$repo/tests/lib/log.sh"
helm=${HELM:-helm}
command -v "$helm" >/dev/null || { say "no helm (set HELM=/path/to/helm)"; exit 2; }
version=$(sed -nE 's/^project\([^)]*VERSION ([0-9][0-9.]*).*/\1/p' "$repo/CMakeLists.txt")
export TAG=${TAG:-$version}
[[ $TAG =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] ||
  { say "TAG \"$TAG\" is not a semantic version (the chart's version must be one)"; exit 2; }
out=$repo/build/release
rm -rf "$out" && mkdir -p "$out"
timings=()
timed() { timings+=("$(printf '%-40s %5ss' "$1" "$2")"); }

plain_http=()
backend_image=""
if [ -z "${REGISTRY:-}" ]; then
  eval "$(bash "$repo/tests/cluster/registry/up.sh")"
  registry=$LOCAL_REGISTRY/gvirtus-k8s
  plain_http=(--plain-http)
  # images/build.sh's local mode: the loopback registry and BuildKit, the stand-in backend.
  backend_image=$registry/backend:$TAG-standin
  build_env=(env -u REGISTRY)
else
  registry=$REGISTRY
  build_env=(env)
fi

start=$SECONDS
say "images and the kubectl plugin for every platform -> $registry (tag $TAG) ..."
"${build_env[@]}" bash "$here/build.sh" --plugin "$out/plugin" \
  labeler device-plugin webhook backend kai-reservation
timed "images and plugin" $((SECONDS - start))

# The plugin: one archive per platform, and the krew manifest naming them.
start=$SECONDS
declare -A sha=()
for dir in "$out"/plugin/linux_*; do
  platform=$(basename "$dir")
  archive=kubectl-gvirtus_${TAG}_$platform.tar.gz
  tar -C "$dir" --owner=0 --group=0 --sort=name -czf "$out/$archive" .
  sha[$platform]=$(sha256sum "$out/$archive" | cut -d' ' -f1)
done
plugin_url=${PLUGIN_URL:-https://github.com/${GITHUB_REPOSITORY:-gvirtus/gvirtus-k8s}/releases/download/v$TAG}
{
  sed -e "s|@VERSION@|v$TAG|" "$repo/kubectl-gvirtus/krew.yaml"
  for platform in $(printf "%s\n" "${!sha[@]}" | sort); do
    cat <<PLATFORM
    - selector:
        matchLabels: {os: linux, arch: ${platform#linux_}}
      uri: $plugin_url/kubectl-gvirtus_${TAG}_$platform.tar.gz
      sha256: ${sha[$platform]}
      bin: kubectl-gvirtus
      files:
        - {from: "*", to: "."}
PLATFORM
  done
} >"$out/gvirtus.yaml"
timed "plugin archives and krew manifest" $((SECONDS - start))

# The chart: a copy whose default images are this release's, then pushed as OCI.
start=$SECONDS
chart=$out/chart/gvirtus
mkdir -p "$out/chart" && cp -r "$repo/charts/gvirtus" "$chart"
image_registry=${registry%/*}
image_prefix=${registry##*/}
[ "$image_registry" != "$registry" ] || { image_registry=""; }
sed -i -E "0,/^  registry: .*/s||  registry: \"$image_registry\"|; 0,/^  repositoryPrefix: .*/s||  repositoryPrefix: $image_prefix|" \
  "$chart/values.yaml"
[ -z "$backend_image" ] || sed -i -E "0,/^  image: \"\"/s||  image: \"$backend_image\"|" "$chart/values.yaml"
"$helm" lint "$chart" >/dev/null || { "$helm" lint "$chart" >&2; say "FAILED: helm lint"; exit 1; }
"$helm" package "$chart" --version "$TAG" --app-version "$TAG" -d "$out" >/dev/null
pushed=$("$helm" push "$out/gvirtus-$TAG.tgz" "oci://$registry/charts" "${plain_http[@]}" 2>&1) ||
  { echo "$pushed" >&2; say "FAILED: helm push"; exit 1; }
chart_digest=$(sed -nE 's/^Digest: (sha256:[0-9a-f]+)$/\1/p' <<<"$pushed")
timed "chart oci://$registry/charts/gvirtus" $((SECONDS - start))

# What the workflow signs: each image's manifest list and the chart, by digest.
for name in labeler device-plugin webhook backend kai-reservation; do
  ref=$registry/$name:$TAG
  [ "$name" = backend ] && [ -n "$backend_image" ] && ref=$backend_image
  digest=$(docker buildx imagetools inspect --format '{{json .Manifest}}' "$ref" | jq -r .digest)
  echo "${ref%:*}@$digest"
done >"$out/artifacts.txt"
echo "$registry/charts/gvirtus@$chart_digest" >>"$out/artifacts.txt"

say "published release $TAG:"
for t in "${timings[@]}"; do printf '    %s\n' "$t" >&2; done
sed 's/^/    /' "$out/artifacts.txt" >&2
say "install: helm install gvirtus oci://$registry/charts/gvirtus --version $TAG${plain_http:+ --plain-http}"
