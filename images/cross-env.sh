# shellcheck shell=sh disable=SC2034  # sourced: its variables are for the builder
# Sourced inside the builder (Dockerfile.builder): the settings that build and stage for
# the target architecture ARCH (a Debian name: amd64, arm64; empty: the build machine's).
#   . images/cross-env.sh ARCH
# ARCH defaults to $TARGETARCH: dash, the RUN steps' /bin/sh, passes no arguments to a
# sourced file, so there the environment is what carries it.
# Sets TARGET_TRIPLET (aarch64-linux-gnu), CROSS_PREFIX (aarch64-linux-gnu- or empty),
# TARGET_EMULATOR (qemu-aarch64-static, empty when native), CROSS_CMAKE_ARGS, and exports
# PKG_CONFIG_LIBDIR so pkg-config finds the target's libraries, not the build machine's.
build_arch=$(dpkg --print-architecture)
target_arch=${1:-${TARGETARCH:-$build_arch}}
TARGET_TRIPLET=$(dpkg-architecture -a "$target_arch" -qDEB_HOST_MULTIARCH 2>/dev/null)
CROSS_PREFIX="" TARGET_EMULATOR="" CROSS_CMAKE_ARGS=""
if [ "$target_arch" != "$build_arch" ]; then
  CROSS_PREFIX=$TARGET_TRIPLET-
  TARGET_EMULATOR=qemu-$(dpkg-architecture -a "$target_arch" -qDEB_HOST_GNU_CPU 2>/dev/null)-static
  CROSS_CMAKE_ARGS="-DCMAKE_SYSTEM_NAME=Linux
    -DCMAKE_SYSTEM_PROCESSOR=$(dpkg-architecture -a "$target_arch" -qDEB_HOST_GNU_CPU 2>/dev/null)
    -DCMAKE_C_COMPILER=${CROSS_PREFIX}gcc -DCMAKE_CXX_COMPILER=${CROSS_PREFIX}g++
    -DCMAKE_FIND_ROOT_PATH_MODE_PROGRAM=NEVER"
fi
PKG_CONFIG_LIBDIR=/usr/lib/$TARGET_TRIPLET/pkgconfig:/usr/share/pkgconfig
export PKG_CONFIG_LIBDIR
