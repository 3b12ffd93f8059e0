#!/usr/bin/env bash
# Checks the images images/build.sh pushed, as a cluster would get them from the registry.
#
#   images/test.sh [IMAGE...]    (labeler device-plugin webhook backend kai-reservation
#                                 testapp; default all but testapp)
#
# For each image:
#   - its manifest list holds exactly the platforms it was built for;
#   - on the build machine's platform (pulled into the Docker engine and run as the
#     manifests run it: read-only root, no capabilities, no network): the user is
#     65532:65532, --version names the program, --help shows --health-addr, a bad flag
#     exits 2, the process runs as uid/gid 65532, no shell (the backend: its loader and
#     libraries are its own; on the stand-in it gets ready and stops cleanly);
#   - on every other platform (the files of the pushed image): each program is an ELF
#     for that machine and runs --version and --help under qemu-user with nothing but
#     the image's own files; where binfmt_misc can be registered, the image itself runs
#     in the Docker engine as uid/gid 65532.
# Prints each image's compressed size per platform.
# Environment: as images/build.sh (REGISTRY, TAG, PLATFORMS, BACKEND_PLATFORMS,
# GVIRTUS_IMAGE); without REGISTRY, the local registry (tests/cluster/registry/up.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
wanted=()
for arg in "$@"; do
  case $arg in
    labeler | device-plugin | webhook | backend | kai-reservation | testapp) wanted+=("$arg") ;;
    *) echo "test.sh: unknown argument \"$arg\"" >&2; exit 2 ;;
  esac
done
[ ${#wanted[@]} -gt 0 ] || wanted=(labeler device-plugin webhook backend kai-reservation)
log_tag="image-test"
# shellcheck source=../tests/lib/log.sh
source "$repo/tests/lib/log.sh"

if [ -z "${REGISTRY:-}" ]; then
  eval "$(bash "$repo/tests/cluster/registry/up.sh")"
  export REGISTRY=$LOCAL_REGISTRY/gvirtus-k8s GVIRTUS_IMAGE=${GVIRTUS_IMAGE:-standin}
  # The builder's base, where build.sh pushed it (the test helpers come from the builder).
  base=${BASE_IMAGE:-debian:bookworm-slim}
  export BASE_IMAGE=$LOCAL_REGISTRY/gvirtus-k8s/${base/:/-}:base
fi
version=$(sed -nE 's/^project\([^)]*VERSION ([0-9][0-9.]*).*/\1/p' "$repo/CMakeLists.txt")
TAG=${TAG:-${version:-dev}}
PLATFORMS=${PLATFORMS:-linux/amd64,linux/arm64}
BACKEND_PLATFORMS=${BACKEND_PLATFORMS:-linux/amd64}
build_platform=linux/$(docker version -f '{{.Server.Arch}}')
for tool in jq readelf; do
  command -v "$tool" >/dev/null || { say "FAILED: $tool is needed (make deps)"; exit 1; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

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

image_ref() { # image_ref NAME: what build.sh pushed
  local suffix=""
  [ "$1" = backend ] && [ "${GVIRTUS_IMAGE:-}" = standin ] && suffix=-standin
  printf '%s/%s:%s%s' "$REGISTRY" "$1" "$TAG" "$suffix"
}
platforms_of() { # platforms_of NAME: the platforms it is built for, one per line
  case $1 in
    backend) tr ',' '\n' <<<"$BACKEND_PLATFORMS" ;;
    testapp) echo "$build_platform" ;;
    *) tr ',' '\n' <<<"$PLATFORMS" ;;
  esac | sort
}
program_of() {
  case $1 in
    backend) echo /opt/gvirtus-k8s/bin/gvirtus-backend-shim ;;
    *) echo "/usr/local/bin/gvirtus-$1" ;;
  esac
}
elf_machine() { # the machine readelf names for a platform
  case ${1#linux/} in
    amd64) echo X86-64 ;; arm64) echo AArch64 ;; arm/v7) echo ARM ;;
    ppc64le) echo PowerPC64 ;; s390x) echo 'IBM S/390' ;; riscv64) echo RISC-V ;;
    *) echo unknown ;;
  esac
}
qemu_of() { # the qemu-user emulator of a platform
  case ${1#linux/} in
    arm64) echo qemu-aarch64-static ;; arm/v7) echo qemu-arm-static ;;
    amd64) echo qemu-x86_64-static ;; *) echo "qemu-${1#linux/}-static" ;;
  esac
}

# The static id printer, per platform, from the builder (reading the compiler cache that
# images/build.sh gave it, CCACHE, so that its steps are the cached ones).
say "image test helpers (print-ids) for $PLATFORMS"
allow=(--allow "fs.write=$work")
[ -z "${CCACHE:-}" ] || allow+=(--allow "fs.read=$CCACHE")
for platform in $(tr ',' ' ' <<<"$PLATFORMS"); do
  dir=$work/tools/$(tr / _ <<<"$platform")
  docker buildx bake -f "$here/docker-bake.hcl" --progress=quiet "${allow[@]}" \
    --set "tools.platform=$platform" \
    --set "tools.output=type=local,dest=$dir" tools >/dev/null 2>"$work/tools.log" ||
    { tail -20 "$work/tools.log" >&2; say "FAILED: the test helpers for $platform"; exit 1; }
  chmod 0755 "$work" "$work/tools" "$dir" "$dir/print-ids"
done

# binfmt_misc for foreign images: registered (with the F flag, so it works inside a
# container's mount namespace) from Debian's qemu-user-static description, where the
# machine lets us.
binfmt_ready() { # binfmt_ready PLATFORM: 0 when the engine can run its images
  local qemu name
  qemu=$(command -v "$(qemu_of "$1")") || return 1
  name=$(basename "$qemu" -static)
  [ -f /proc/sys/fs/binfmt_misc/register ] ||
    mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc 2>/dev/null || return 1
  [ -e "/proc/sys/fs/binfmt_misc/$name" ] && return 0
  local spec=/usr/share/binfmts/$name magic mask
  [ -f "$spec" ] || return 1
  magic=$(sed -n 's/^magic //p' "$spec") mask=$(sed -n 's/^mask //p' "$spec")
  printf ':%s:M::%s:%s:%s:F\n' "$name" "$magic" "$mask" "$qemu" >/proc/sys/fs/binfmt_misc/register 2>/dev/null
  [ -e "/proc/sys/fs/binfmt_misc/$name" ]
}

hardened=(--rm --read-only --cap-drop ALL --security-opt no-new-privileges --network none)

# readyz_200 CONTAINER: the shim in it answers GET /readyz with 200 (read with bash's
# /dev/tcp inside the container).
readyz_200() {
  docker exec "$1" bash -c 'exec 3<>/dev/tcp/127.0.0.1/8080 &&
    printf "GET /readyz HTTP/1.0\r\n\r\n" >&3 && head -1 <&3' 2>/dev/null | grep -q ' 200'
}

# backend_lifecycle IMAGE: runs the shim with the manifest's arguments, waits for /readyz
# 200, stops it, expects exit 0.
backend_lifecycle() {
  local image=$1 name=gvirtus-backend-test-$$ status=1
  docker rm -f "$name" >/dev/null 2>&1 || true
  docker run -d --name "$name" --read-only --tmpfs /tmp:uid=65532,gid=65532 --cap-drop ALL \
    --security-opt no-new-privileges -e GVIRTUS_HOME=/usr/local/gvirtus "$image" \
    --port=9999 --health-addr=:8080 --config-out=/tmp/gvirtus/properties.json \
    --drain-timeout=5s --peer-check=false -- /usr/local/gvirtus/bin/gvirtus-backend >/dev/null || return 1
  local ready=0
  wait_until 30 "/readyz 200 in $name" readyz_200 "$name" && ready=1
  if [ "$ready" = 1 ]; then
    docker stop -t 20 "$name" >/dev/null
    status=$(docker wait "$name")
  fi
  [ "$ready" = 1 ] && [ "$status" = 0 ] || docker logs "$name" 2>&1 | tail -5
  docker rm -f "$name" >/dev/null 2>&1 || true
  [ "$ready" = 1 ] && [ "$status" = 0 ]
}

# native_checks NAME REF: the image on the build machine's platform, in the engine.
native_checks() {
  local name=$1 image=$2 program
  program=$(basename "$(program_of "$name")")
  check "pulled for $build_platform into the Docker engine" docker pull -q "$image"
  check "image user is 65532:65532" \
    test "$(docker image inspect -f '{{.Config.User}}' "$image")" = 65532:65532
  [ "$name" = testapp ] && return 0
  check "--version exits 0 and names $program" \
    bash -c "docker run ${hardened[*]} '$image' --version | grep -q '$program'"
  check "--help exits 0 and shows --health-addr" \
    bash -c "docker run ${hardened[*]} '$image' --help | grep -q -- '--health-addr'"
  check "a bad flag exits 2" \
    bash -c "docker run ${hardened[*]} '$image' --no-such-flag; test \$? = 2"
  check "runs as uid=65532 gid=65532" runs_as_nonroot "$image" "$build_platform"
  if [ "$name" != backend ]; then
    check "sets glibc's per-thread malloc cache (GLIBC_TUNABLES)" bash -c \
      "docker image inspect -f '{{range .Config.Env}}{{println .}}{{end}}' '$image' |
        grep -qx 'GLIBC_TUNABLES=glibc.malloc.tcache_count=[0-9]*'"
    check "has no shell" bash -c "! docker run ${hardened[*]} --entrypoint /bin/sh '$image' -c true"
  else
    check "the shim's loader and libraries are its own (ldd of the bundle)" \
      bash -c "out=\$(docker run ${hardened[*]} -e LD_TRACE_LOADED_OBJECTS=1 '$image') &&
        grep -q 'libc.so.6 => /opt/gvirtus-k8s/lib/libc.so.6' <<<\"\$out\" &&
        ! awk '\$2 == \"=>\" {print \$3} \$1 ~ /^\\// {print \$1}' <<<\"\$out\" | grep -v '^/opt/gvirtus-k8s/lib/'"
    if [ "${GVIRTUS_IMAGE:-}" = standin ]; then
      # The session check's library goes into the GVirtuS process, on the image's own C
      # library: it must load there, and need nothing of the shim's bundle.
      check "the session check's library loads into the image's own processes" \
        bash -c "docker run ${hardened[*]} --entrypoint /bin/sh \
          -e LD_PRELOAD=/opt/gvirtus-k8s/preload/libgvirtus-peer-guard.so '$image' -c \
          'cat /proc/self/maps' | grep -q libgvirtus-peer-guard.so"
      check "the shim starts the backend, gets ready, exits 0 on SIGTERM" backend_lifecycle "$image"
    fi
  fi
}

runs_as_nonroot() { # runs_as_nonroot IMAGE PLATFORM
  local tools
  tools=$work/tools/$(tr / _ <<<"$2")
  docker run "${hardened[@]}" --platform "$2" -v "$tools/print-ids:/print-ids:ro" \
    --entrypoint /print-ids "$1" | grep -qx 'uid=65532 gid=65532 euid=65532 egid=65532'
}

# foreign_checks NAME REF PLATFORM DIGEST: the pushed files of a platform this machine is
# not. (The engine pulls that platform's manifest by digest: the tag keeps naming the
# build machine's image.)
foreign_checks() {
  local name=$1 image=$2 platform=$3 by_digest=${2%:*}@$4 rootfs program qemu
  rootfs=$work/rootfs/$name-$(tr / _ <<<"$platform")
  program=$(program_of "$name")
  qemu=$(qemu_of "$platform")
  check "its files, as pushed, exported" bash -c "printf 'FROM %s\n' '$image' |
    docker buildx build --progress=quiet --platform '$platform' -o 'type=local,dest=$rootfs' -"
  [ "$name" = testapp ] && return 0
  check "$program is an ELF for $(elf_machine "$platform")" \
    bash -c "readelf -h '$rootfs$program' | grep -q 'Machine: *$(elf_machine "$platform")'"
  if ! command -v "$qemu" >/dev/null; then
    check "$qemu is installed (make deps)" false
    return 0
  fi
  check "--version under $qemu, with nothing but the image's files" \
    bash -c "$qemu -L '$rootfs' '$rootfs$program' --version | grep -q '$(basename "$program")'"
  check "--help under $qemu shows --health-addr" \
    bash -c "$qemu -L '$rootfs' '$rootfs$program' --help | grep -q -- '--health-addr'"
  if binfmt_ready "$platform"; then
    check "pulled for $platform into the Docker engine" docker pull -q "$by_digest"
    check "runs in the engine (binfmt_misc) as uid=65532 gid=65532" runs_as_nonroot "$by_digest" "$platform"
  else
    say "  SKIP running the $platform image in the engine: binfmt_misc cannot be registered here"
  fi
}

sizes=()
for name in "${wanted[@]}"; do
  image=$(image_ref "$name")
  say "testing $image"
  raw=$(docker buildx imagetools inspect --raw "$image" 2>"$work/inspect.log") ||
    { check "in the registry" bash -c "cat '$work/inspect.log'; false"; continue; }
  # Attestation manifests are listed as unknown/unknown; only images count.
  pushed=$(jq -r '.manifests[]? | select(.platform.os != "unknown")
    | "\(.platform.os)/\(.platform.architecture)\(if .platform.variant then "/" + .platform.variant else "" end)"' \
    <<<"$raw" | sort)
  check "its manifest list holds exactly $(platforms_of "$name" | tr '\n' ' ')" \
    test "$pushed" = "$(platforms_of "$name")"
  for platform in $(platforms_of "$name"); do
    digest=$(jq -r --arg p "$platform" '.manifests[] | select("\(.platform.os)/\(.platform.architecture)" == $p)
      | .digest' <<<"$raw" | head -1)
    [ -n "$digest" ] || continue # the manifest list check above failed
    bytes=$(docker buildx imagetools inspect --raw "${image%:*}@$digest" | jq '[.layers[].size] | add')
    sizes+=("$(printf '%-48s %-13s %8s' "$image" "$platform" "$(numfmt --to=iec --suffix=B "$bytes")")")
    if [ "$platform" = "$build_platform" ]; then
      native_checks "$name" "$image"
    else
      foreign_checks "$name" "$image" "$platform" "$digest"
    fi
  done
done

say "image sizes (compressed, as pushed):"
for s in "${sizes[@]}"; do printf '    %s\n' "$s" >&2; done
if [ "$failures" != 0 ]; then
  say "FAILED: $failures image checks"
  exit 1
fi
say "all image checks passed"
