#!/usr/bin/env bash
# Starts, once per machine, what builds and serves multi-arch images here (each is left
# running for the next build; registry/down.sh stops them):
#   - a CNCF distribution registry, in a container (gvirtus-registry) published on
#     loopback only (localhost:$GVIRTUS_REGISTRY_PORT, default 5000); real nodes reach it
#     on their cluster's Docker network (node/add.sh --registry). Its storage is in the
#     cache, so a pushed layer is pushed once.
#   - a BuildKit daemon as a host process (root; OCI worker, runc, overlayfs), whose state
#     (the layer cache) is in the cache too; it pulls from and pushes to the registry
#     over plain HTTP on loopback.
#   - the docker buildx plugin and a builder "gvirtus-local" on that daemon (remote
#     driver), in a private docker CLI configuration (the user's ~/.docker is untouched).
# Prints `export` lines: DOCKER_CONFIG, BUILDX_BUILDER, LOCAL_REGISTRY.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../versions.sh
source "$here/../versions.sh"
log_tag="registry"
# shellcheck source=../../lib/log.sh
source "$here/../../lib/log.sh"
port=${GVIRTUS_REGISTRY_PORT:-5000}
registry_container=gvirtus-registry
tools=$(bash "$here/build.sh")
bin=$tools/bin
state=$CLUSTER_CACHE/image-build
mkdir -p "$state"

# --- The registry ----------------------------------------------------------------------
registry_image=gvirtus-k8s/registry:$REGISTRY_VERSION
if ! docker image inspect "$registry_image" >/dev/null 2>&1; then
  # A scratch image: the static registry binary and its configuration.
  rootfs=$(mktemp -d)
  install -D -m 0755 "$bin/registry" "$rootfs/registry"
  mkdir -p "$rootfs/etc/distribution" "$rootfs/var/lib/registry" "$rootfs/tmp"
  cat >"$rootfs/etc/distribution/config.yml" <<'CONFIG'
version: 0.1
log:
  level: info
  formatter: text
storage:
  filesystem:
    rootdirectory: /var/lib/registry
  delete:
    enabled: true
http:
  addr: :5000
CONFIG
  tar -C "$rootfs" -c . | docker import --change 'ENTRYPOINT ["/registry"]' \
    --change 'CMD ["serve", "/etc/distribution/config.yml"]' --change 'USER 65532:65532' \
    - "$registry_image" >/dev/null
  rm -rf "$rootfs"
  say "made image $registry_image"
fi
if [ "$(docker inspect -f '{{.State.Running}} {{.Config.Image}}' "$registry_container" 2>/dev/null)" != \
    "true $registry_image" ]; then
  docker rm -f "$registry_container" >/dev/null 2>&1 || true
  install -d -o 65532 -g 65532 "$state/registry"
  docker run -d --name "$registry_container" --label gvirtus.io/registry=local \
    --read-only --cap-drop ALL --security-opt no-new-privileges \
    -p "127.0.0.1:$port:5000" -v "$state/registry:/var/lib/registry" "$registry_image" >/dev/null
  say "registry $REGISTRY_VERSION started on localhost:$port"
fi
wait_until 10 "the registry on localhost:$port" curl -fsS "http://localhost:$port/v2/" ||
  { say "FAILED: the registry does not answer on localhost:$port"; docker logs "$registry_container" 2>&1 | tail -5 >&2; exit 1; }

# --- The BuildKit daemon ---------------------------------------------------------------
socket_dir=/run/gvirtus-buildkit
socket=unix://$socket_dir/buildkitd.sock
buildctl() { "$bin/buildctl" --addr "$socket" "$@"; }
config=$(cat <<CONFIG
# The image builds' BuildKit daemon (tests/cluster/registry/up.sh). It runs at nice 19: a
# build beside the tests (the release's other platforms, during the e2e scenarios) takes
# only the CPU they leave idle.
[worker.oci]
  enabled = true
  snapshotter = "overlayfs"
  gc = true
  # Keep the layers of the last builds (a warm build compiles nothing): sizes with a unit,
  # since a bare number counts bytes, and 30000 bytes made every build a cold one.
  reservedSpace = "20GB"
  maxUsedSpace = "40GB"
[worker.containerd]
  enabled = false
[registry."localhost:$port"]
  http = true
CONFIG
)
# A daemon started with another configuration (an older version of this script) is
# restarted with this one.
if buildctl debug workers >/dev/null 2>&1 && [ "$(cat "$state/buildkitd.toml" 2>/dev/null)" != "$config" ]; then
  say "BuildKit runs with another configuration: restarting it"
  pid=$(cat "$state/buildkitd.pid" 2>/dev/null || true)
  [ -z "$pid" ] || kill "$pid" 2>/dev/null || true
  buildkit_gone() { ! buildctl debug workers; }
  wait_until 10 "the old BuildKit daemon to stop" buildkit_gone || true
fi
if ! buildctl debug workers >/dev/null 2>&1; then
  command -v runc >/dev/null || { say "FAILED: BuildKit needs runc (Debian package runc)"; exit 1; }
  mkdir -p "$socket_dir" "$state/buildkit"
  printf '%s\n' "$config" >"$state/buildkitd.toml"
  # Its RUN steps use the host's network (apt-get in the builder); they inherit its nice 19.
  setsid nice -n 19 "$bin/buildkitd" --config "$state/buildkitd.toml" --root "$state/buildkit" \
    --addr "$socket" --oci-worker-net host </dev/null >"$state/buildkitd.log" 2>&1 &
  echo $! >"$state/buildkitd.pid"
  for _ in $(seq 1 100); do
    buildctl debug workers >/dev/null 2>&1 && break
    kill -0 "$(cat "$state/buildkitd.pid")" 2>/dev/null || break
    sleep 0.2
  done
  buildctl debug workers >/dev/null 2>&1 ||
    { say "FAILED: buildkitd did not start; last lines of $state/buildkitd.log:"; tail -10 "$state/buildkitd.log" >&2; exit 1; }
  say "BuildKit $BUILDKIT_VERSION started ($socket, state $state/buildkit)"
fi

# --- buildx, in a private docker CLI configuration -------------------------------------
export DOCKER_CONFIG=$state/docker-config
mkdir -p "$DOCKER_CONFIG/cli-plugins"
ln -sf "$bin/docker-buildx" "$DOCKER_CONFIG/cli-plugins/docker-buildx"
docker buildx inspect gvirtus-local >/dev/null 2>&1 ||
  docker buildx create --name gvirtus-local --driver remote "$socket" >/dev/null
echo "export DOCKER_CONFIG=$DOCKER_CONFIG"
echo "export BUILDX_BUILDER=gvirtus-local"
echo "export LOCAL_REGISTRY=localhost:$port"
