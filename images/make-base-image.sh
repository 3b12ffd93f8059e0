#!/usr/bin/env bash
# Makes a Debian base image locally when the Docker engine lacks it and no registry is
# reachable: debootstrap (minbase) from Debian's mirror, then `docker import` under the
# name the Dockerfiles expect. The root file system is cached as a tarball, so a second
# machine run (or a pruned engine) only imports it again.
#
#   make-base-image.sh [IMAGE]     (default debian:bookworm-slim)
#
# Environment: DEBIAN_MIRROR (default http://deb.debian.org/debian), GVIRTUS_CACHE
# (cache root, default ~/.cache/gvirtus), BASE_REFRESH=1 to rebuild the cached tarball.
# An image that already exists is left alone; one that a registry serves is pulled
# instead of built (set BASE_NO_PULL=1 to skip the attempt).
set -euo pipefail
image=${1:-debian:bookworm-slim}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
cache=${GVIRTUS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gvirtus}/images
log_tag="base-image"
# shellcheck source=../tests/lib/log.sh
source "$(dirname "$0")/../tests/lib/log.sh"

case $image in
  debian:bookworm | debian:bookworm-slim | debian:12 | debian:12-slim) suite=bookworm ;;
  *) say "only Debian bookworm can be made locally, not $image"; exit 2 ;;
esac

if docker image inspect "$image" >/dev/null 2>&1; then
  say "$image present"
  exit 0
fi
if [ "${BASE_NO_PULL:-0}" != 1 ] && timeout 60 docker pull -q "$image" >/dev/null 2>&1; then
  say "$image pulled from its registry"
  exit 0
fi

arch=$(dpkg --print-architecture)
tarball=$cache/debian-$suite-minbase-$arch.tar.gz
start=$SECONDS
if [ ! -s "$tarball" ] || [ "${BASE_REFRESH:-0}" = 1 ]; then
  [ "$(id -u)" = 0 ] || { say "debootstrap needs root (or provide $image)"; exit 1; }
  if ! command -v debootstrap >/dev/null; then
    say "installing debootstrap"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      --no-install-recommends debootstrap >/dev/null
  fi
  rootfs=$(mktemp -d /tmp/gvirtus-rootfs.XXXXXX)
  trap 'umount -R "$rootfs/proc" "$rootfs/sys" 2>/dev/null || true; rm -rf --one-file-system "$rootfs"' EXIT
  say "debootstrap --variant=minbase $suite from $mirror (a few minutes) ..."
  if ! debootstrap --variant=minbase --arch="$arch" "$suite" "$rootfs" "$mirror" \
      >"$rootfs.log" 2>&1; then
    tail -20 "$rootfs.log" >&2
    say "debootstrap failed; full log $rootfs.log"
    exit 1
  fi
  rm -f "$rootfs.log"
  # What the official image carries: the same suites (updates and security included),
  # no package caches, no lists, no documentation-free tweaks beyond that.
  rm -f "$rootfs/etc/apt/sources.list"
  cat >"$rootfs/etc/apt/sources.list.d/debian.sources" <<SOURCES
Types: deb
URIs: $mirror
Suites: $suite $suite-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: $suite-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
  # Keeps apt from filling image layers with downloaded .debs.
  cat >"$rootfs/etc/apt/apt.conf.d/docker-clean" <<'APT'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache ""; Dir::Cache::srcpkgcache "";
APT
  rm -rf "${rootfs:?}"/var/cache/apt/archives/*.deb "${rootfs:?}"/var/lib/apt/lists/* \
    "${rootfs:?}"/var/log/* "${rootfs:?}"/tmp/* "${rootfs:?}"/dev/*
  : >"$rootfs/etc/hostname"
  mkdir -p "$cache"
  tar --numeric-owner -C "$rootfs" -czf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
  say "root file system cached in $tarball ($(du -h "$tarball" | cut -f1)) after $((SECONDS - start))s"
else
  say "using the cached root file system $tarball"
fi
docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'CMD ["bash"]' \
  --message "debootstrap --variant=minbase $suite ($mirror)" \
  "$tarball" "$image" >/dev/null
say "$image imported ($(docker image inspect -f '{{.Size}}' "$image" | numfmt --to=iec)) in $((SECONDS - start))s"
