#!/usr/bin/env bash
# Builds the container images with the local Docker engine and, with --test, runs each
# one as its non-root user. No registry is needed: a missing Debian base image is made
# with debootstrap (make-base-image.sh).
#
#   images/build.sh [--test] [--require-engine] [--no-cache] [IMAGE...]
#
#   IMAGE            labeler device-plugin webhook backend (default: all four); the
#                    builder they share is always built first (cached by the engine)
#   --test           run each image: --version and --help exit 0, as UID/GID 65532,
#                    with a read-only root file system and no capabilities
#   --require-engine fail when no Docker engine answers (default: say SKIP, exit 0)
#   --no-cache       rebuild every layer
#
# Environment:
#   IMAGE_PREFIX  image name prefix (default gvirtus-k8s): PREFIX/labeler:TAG, ...
#   TAG           image tag (default: the project version in CMakeLists.txt)
#   BASE_IMAGE    builder base (default debian:bookworm-slim)
#   GVIRTUS_IMAGE GVirtuS image the backend image extends (default upstream's
#                 taslanidis/gvirtus:cuda12.6.3-cudnn-ubuntu22.04). When the engine lacks
#                 it and cannot pull it, or with GVIRTUS_IMAGE=standin, the backend image
#                 is built on a GPU-less stand-in (Dockerfile.gvirtus-standin) and tagged
#                 TAG-standin, never under the real tag; the build says so.
#   BUILD_JOBS    compile jobs inside the builder (default: all cores)
#
# Exit: 0 built (and tested), or skipped for lack of an engine; 1 a build or a test
# failed; 2 bad arguments.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)

test_images=0 require_engine=0 no_cache=()
wanted=()
for arg in "$@"; do
  case $arg in
    --test) test_images=1 ;;
    --require-engine) require_engine=1 ;;
    --no-cache) no_cache=(--no-cache) ;;
    labeler | device-plugin | webhook | backend) wanted+=("$arg") ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "build.sh: unknown argument \"$arg\" (see --help)" >&2; exit 2 ;;
  esac
done
[ ${#wanted[@]} -gt 0 ] || wanted=(labeler device-plugin webhook backend)

say() { printf '[images %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# --- Is there an engine? -------------------------------------------------------------
if ! command -v docker >/dev/null 2>&1; then
  reason="no docker command"
elif ! reason=$(timeout 20 docker info --format '{{.ServerVersion}}' 2>&1); then
  reason="docker info: $(tail -1 <<<"$reason")"
else
  reason=""
fi
if [ -n "$reason" ]; then
  if [ "$require_engine" = 1 ]; then
    say "FAILED: no Docker engine answers ($reason)"
    exit 1
  fi
  say "SKIP: no Docker engine answers ($reason); images not built or tested"
  exit 0
fi

prefix=${IMAGE_PREFIX:-gvirtus-k8s}
version=$(sed -nE 's/^project\([^)]*VERSION ([0-9][0-9.]*).*/\1/p' "$repo/CMakeLists.txt")
tag=${TAG:-${version:-dev}}
base_image=${BASE_IMAGE:-debian:bookworm-slim}
gvirtus_image=${GVIRTUS_IMAGE:-taslanidis/gvirtus:cuda12.6.3-cudnn-ubuntu22.04}
builder=$prefix/builder:$tag
logs=$repo/build/images
mkdir -p "$logs"

# BuildKit when the buildx plugin is there, else the classic builder (same images).
if docker buildx version >/dev/null 2>&1; then
  export DOCKER_BUILDKIT=1
  progress=(--progress=plain)
else
  export DOCKER_BUILDKIT=0
  progress=()
fi

timings=()
# step_timer LOG: copies the build output to LOG and prints how long each Dockerfile
# step took (classic builder: "Step N/M : ..."; BuildKit prints its own DONE times).
step_timer() {
  local log=$1 line step="" began=$SECONDS
  while IFS= read -r line; do
    printf '%s\n' "$line" >>"$log"
    if [[ $line =~ ^Step\ [0-9]+/[0-9]+\ :\ (.*)$ ]]; then
      [ -n "$step" ] && printf '    %4ss  %s\n' $((SECONDS - began)) "${step:0:90}" >&2
      step=${BASH_REMATCH[1]} began=$SECONDS
    elif [[ $line =~ ^#[0-9]+\ DONE\ ([0-9.]+s) ]]; then
      printf '    %s\n' "$line" >&2
    fi
  done
  [ -n "$step" ] && printf '    %4ss  %s\n' $((SECONDS - began)) "${step:0:90}" >&2
  return 0
}

# build NAME TAG DOCKERFILE CONTEXT(- for none | tar) [docker build args...]
build() {
  local name=$1 image=$2 dockerfile=$3 context=$4
  shift 4
  local log=$logs/$name.log start=$SECONDS status=0 previous
  previous=$(docker image inspect -f '{{.Id}}' "$image" 2>/dev/null || true)
  : >"$log"
  say "building $image ($dockerfile) ..."
  if [ "$context" = tar ]; then
    # Only the sources the builder needs: what git tracks (or would), in those folders.
    # (Files git tracks but that were deleted are left out.)
    (cd "$repo" && { git ls-files -co --exclude-standard -- CMakeLists.txt common labeler \
        device-plugin webhook backend-shim images/stage-rootfs.sh images/print_ids.c \
        2>/dev/null || find CMakeLists.txt common labeler device-plugin webhook backend-shim \
        images/stage-rootfs.sh images/print_ids.c -type f; } |
      while IFS= read -r file; do [ -f "$file" ] && printf '%s\n' "$file"; done |
      tar -c --files-from=- "images/$dockerfile") |
      docker build --force-rm "${progress[@]}" "${no_cache[@]}" -f "images/$dockerfile" -t "$image" "$@" - \
        2>&1 | step_timer "$log" || status=$?
  else
    docker build --force-rm "${progress[@]}" "${no_cache[@]}" -t "$image" "$@" - <"$here/$dockerfile" \
      2>&1 | step_timer "$log" || status=$?
  fi
  # pipefail gives docker build's status; the log and the image must agree.
  if [ "$status" != 0 ] || ! grep -qE '^(Successfully tagged|#[0-9]+ naming to) ' "$log" ||
      ! docker image inspect "$image" >/dev/null 2>&1; then
    say "FAILED building $image after $((SECONDS - start))s; last lines of $log:"
    tail -25 "$log" >&2
    exit 1
  fi
  # The image this tag named before is garbage now (unless something still uses it).
  if [ -n "$previous" ] && [ "$previous" != "$(docker image inspect -f '{{.Id}}' "$image")" ]; then
    docker image rm "$previous" >/dev/null 2>&1 || true
  fi
  timings+=("$(printf '%-28s %5ss' "$name" $((SECONDS - start)))")
  say "built $image in $((SECONDS - start))s"
}

total_start=$SECONDS

# --- Base image, builder -------------------------------------------------------------
start=$SECONDS
bash "$here/make-base-image.sh" "$base_image"
timings+=("$(printf '%-28s %5ss' "base image" $((SECONDS - start)))")

# The classic builder needs an image to exist before a FROM names it; it never pulls the
# builder. It must be rebuilt whenever the sources change: the engine's layer cache
# makes that cheap when they did not.
build builder "$builder" Dockerfile.builder tar --build-arg "BASE_IMAGE=$base_image" \
  ${BUILD_JOBS:+--build-arg "BUILD_JOBS=$BUILD_JOBS"}

# --- Runtime images ------------------------------------------------------------------
declare -A image_of
for name in "${wanted[@]}"; do
  [ "$name" = backend ] && continue
  image_of[$name]=$prefix/$name:$tag
  build "$name" "${image_of[$name]}" "Dockerfile.$name" - \
    --build-arg "BUILDER_IMAGE=$builder" --build-arg "VERSION=$tag"
done

standin=""
if [[ " ${wanted[*]} " == *" backend "* ]]; then
  backend_base=$gvirtus_image
  use_standin=0
  if [ "$gvirtus_image" = standin ]; then
    use_standin=1
    say "GVIRTUS_IMAGE=standin: the backend image is built on the GPU-less stand-in"
  elif ! docker image inspect "$gvirtus_image" >/dev/null 2>&1 &&
      ! timeout 900 docker pull -q "$gvirtus_image" >/dev/null 2>&1; then
    use_standin=1
    say "GVIRTUS_IMAGE $gvirtus_image is not available (not local, cannot pull):"
    say "  the backend image is built on the GPU-less stand-in instead (Dockerfile.gvirtus-standin)"
  fi
  if [ "$use_standin" = 1 ]; then
    # Never under the real tag: an image without GVirtuS must not pass for one.
    standin=$prefix/gvirtus-standin:$tag
    build gvirtus-standin "$standin" Dockerfile.gvirtus-standin - --build-arg "BASE_IMAGE=$base_image"
    backend_base=$standin
    image_of[backend]=$prefix/backend:$tag-standin
    say "  backend image: ${image_of[backend]}"
  else
    image_of[backend]=$prefix/backend:$tag
  fi
  build backend "${image_of[backend]}" Dockerfile.backend - --build-arg "BUILDER_IMAGE=$builder" \
    --build-arg "GVIRTUS_IMAGE=$backend_base" --build-arg "VERSION=$tag"
fi

say "build times:"
for t in "${timings[@]}"; do printf '    %s\n' "$t" >&2; done
say "images built in $((SECONDS - total_start))s"

# --- Tests ---------------------------------------------------------------------------
failures=0
check() { # check DESCRIPTION COMMAND...: runs it, reports, counts failures
  local what=$1 out
  shift
  if out=$("$@" 2>&1); then
    printf '    ok    %s\n' "$what" >&2
  else
    printf '    FAIL  %s\n%s\n' "$what" "$(tail -5 <<<"$out" | sed 's/^/          /')" >&2
    failures=$((failures + 1))
  fi
}

# backend_lifecycle IMAGE: runs the shim with the manifest's arguments, waits for /readyz
# 200 (read with bash's /dev/tcp inside the container), stops it, expects exit 0.
backend_lifecycle() {
  local image=$1 name=gvirtus-backend-test-$$ status=1
  docker rm -f "$name" >/dev/null 2>&1 || true
  docker run -d --name "$name" --read-only --tmpfs /tmp:uid=65532,gid=65532 --cap-drop ALL \
    --security-opt no-new-privileges -e GVIRTUS_HOME=/usr/local/gvirtus "$image" \
    --port=9999 --health-addr=:8080 --config-out=/tmp/gvirtus/properties.json \
    --drain-timeout=5s -- /usr/local/gvirtus/bin/gvirtus-backend >/dev/null || return 1
  local ready=0
  for _ in $(seq 1 60); do
    if docker exec "$name" bash -c 'exec 3<>/dev/tcp/127.0.0.1/8080 &&
        printf "GET /readyz HTTP/1.0\r\n\r\n" >&3 && head -1 <&3' 2>/dev/null | grep -q ' 200'; then
      ready=1
      break
    fi
    sleep 0.5
  done
  if [ "$ready" = 1 ]; then
    docker stop -t 20 "$name" >/dev/null
    status=$(docker wait "$name")
  fi
  [ "$ready" = 1 ] && [ "$status" = 0 ] || docker logs "$name" 2>&1 | tail -5
  docker rm -f "$name" >/dev/null 2>&1 || true
  [ "$ready" = 1 ] && [ "$status" = 0 ]
}

if [ "$test_images" = 1 ]; then
  tools=$(mktemp -d)
  trap 'rm -rf "$tools"' EXIT
  # The static id printer staged by the builder (the images have no `id`).
  cid=$(docker create "$builder" true)
  docker cp "$cid:/out/tools/print-ids" "$tools/print-ids" >/dev/null
  docker rm "$cid" >/dev/null
  chmod 0755 "$tools" "$tools/print-ids"
  # As the manifests run them: read-only root, no capabilities, no privilege gain.
  hardened=(--rm --read-only --cap-drop ALL --security-opt no-new-privileges --network none)
  for name in "${wanted[@]}"; do
    image=${image_of[$name]}
    program=gvirtus-$name
    [ "$name" = backend ] && program=gvirtus-backend-shim
    say "testing $image"
    check "image user is 65532:65532" \
      test "$(docker image inspect -f '{{.Config.User}}' "$image")" = 65532:65532
    check "--version exits 0 and names $program" \
      bash -c "docker run ${hardened[*]} '$image' --version | grep -q '$program'"
    check "--help exits 0 and shows --health-addr" \
      bash -c "docker run ${hardened[*]} '$image' --help | grep -q -- '--health-addr'"
    check "a bad flag exits 2" \
      bash -c "docker run ${hardened[*]} '$image' --no-such-flag; test \$? = 2"
    check "runs as uid=65532 gid=65532" \
      bash -c "docker run ${hardened[*]} -v '$tools/print-ids:/print-ids:ro' \
        --entrypoint /print-ids '$image' | grep -qx 'uid=65532 gid=65532 euid=65532 egid=65532'"
    if [ "$name" != backend ]; then
      check "has no shell" bash -c "! docker run ${hardened[*]} --entrypoint /bin/sh '$image' -c true"
    else
      check "the shim's loader and libraries are its own (ldd of the bundle)" \
        bash -c "out=\$(docker run ${hardened[*]} -e LD_TRACE_LOADED_OBJECTS=1 '$image') &&
          grep -q 'libc.so.6 => /opt/gvirtus-k8s/lib/libc.so.6' <<<\"\$out\" &&
          ! awk '\$2 == \"=>\" {print \$3} \$1 ~ /^\\// {print \$1}' <<<\"\$out\" | grep -v '^/opt/gvirtus-k8s/lib/'"
      if [ -n "$standin" ]; then
        # As the DaemonSet runs it; the stand-in's backend listens, so the shim gets ready,
        # and stops cleanly on SIGTERM.
        check "the shim starts the backend, gets ready, exits 0 on SIGTERM" backend_lifecycle "$image"
      fi
    fi
  done
fi

say "image sizes:"
for name in "${wanted[@]}"; do
  image=${image_of[$name]}
  size=$(docker image inspect -f '{{.Size}}' "$image")
  extra=""
  if [ "$name" = backend ]; then
    # What the backend image adds to the GVirtuS image.
    added=$(docker history --no-trunc --format '{{.Size}}\t{{.CreatedBy}}' "$image" |
      grep -m1 'COPY' | cut -f1 || true)
    extra=" (adds ${added:-?} to ${standin:-$gvirtus_image})"
  fi
  printf '    %-45s %8s%s\n' "$image" "$(numfmt --to=iec --suffix=B "$size")" "$extra" >&2
done

if [ "$failures" != 0 ]; then
  say "FAILED: $failures image checks"
  exit 1
fi
[ "$test_images" = 1 ] && say "all image checks passed"
exit 0
