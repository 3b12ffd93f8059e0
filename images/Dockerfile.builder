# The one builder of every image: compiles the binaries once per target platform
# and stages, under /out, what each runtime image copies (images/stage-rootfs.sh). The
# runtime Dockerfiles take it as the named context BUILDER_IMAGE (docker-bake.hcl).
#
# It always runs on the build machine's platform ($BUILDPLATFORM): for another target
# ($TARGETARCH, e.g. arm64 on an amd64 machine) it installs Debian's cross compiler and
# the target's libraries as multiarch packages (libssl-dev:arm64, ...) and cross-compiles;
# nothing is emulated but the staging checks, which run the staged binaries under
# qemu-user. The compiler never runs under QEMU (far too slow).
#
# Context: the repository root; Dockerfile.builder.dockerignore keeps it to the sources.
ARG BASE_IMAGE=debian:bookworm-slim
FROM --platform=$BUILDPLATFORM ${BASE_IMAGE} AS builder

ARG TARGETARCH
ARG DEBIAN_FRONTEND=noninteractive
# Build tools (protoc and its gRPC plugin run here) for the build machine; libraries
# for the target.
RUN set -eu; \
    build_arch=$(dpkg --print-architecture); target=${TARGETARCH:-$build_arch}; cross=""; \
    if [ "$target" != "$build_arch" ]; then \
      dpkg --add-architecture "$target"; \
      cross="crossbuild-essential-$target qemu-user-static"; \
    fi; \
    apt-get update; \
    apt-get install -y --no-install-recommends \
      build-essential cmake ninja-build pkg-config ca-certificates patchelf binutils ccache \
      protobuf-compiler protobuf-compiler-grpc nlohmann-json3-dev $cross \
      libcpp-httplib-dev:$target libssl-dev:$target libc-ares-dev:$target \
      libyaml-cpp-dev:$target libgrpc++-dev:$target libprotobuf-dev:$target; \
    rm -rf /var/lib/apt/lists/*

WORKDIR /src
COPY CMakeLists.txt ./
COPY common/ common/
COPY labeler/ labeler/
COPY device-plugin/ device-plugin/
COPY webhook/ webhook/
COPY backend-shim/ backend-shim/
COPY kai-reservation/ kai-reservation/
COPY kubectl-gvirtus/ kubectl-gvirtus/
COPY images/stage-rootfs.sh images/cross-env.sh images/print_ids.c images/touch-changed.sh images/

# Empty: as many jobs as the build machine has cores. RelWithDebInfo (-O2 -g), as the tested
# builds (GCC 12 at -O3 reports false -Wrestrict errors in std::string code, and warnings
# are errors); stage-rootfs.sh strips the debug information. The build folder is a BuildKit
# cache, one per target: after a change only what it touches is compiled again. Ninja goes by
# modification times, which a checkout older than the cache's objects would defeat:
# touch-changed.sh touches what differs in content from the last build, and records the
# contents once the build has succeeded.
#
# For the build machine's own platform the compiler goes through ccache, reading (never
# writing) the cache of named context "ccache": images/build.sh passes the host's, which
# `make build` filled with the same objects. What ccache keys on is made the same: the
# flags, the Debian compiler and headers, the paths (relative: the build folder sits in the
# sources, /src/build, as build/ does on the host) and the locale (LANG=C.UTF-8 alone, as
# the Makefile's). A fresh machine's image build then compiles nearly nothing again. A
# release build (REGISTRY set) passes an empty one: its images come from the sources alone.
ARG BUILD_JOBS=
RUN --mount=type=cache,id=gvirtus-k8s-build-relwithdebinfo-${TARGETARCH},target=/src/build \
    --mount=type=bind,from=ccache,target=/ccache,rw \
    set -eu; . /src/images/cross-env.sh; \
    bash /src/images/touch-changed.sh /src /src/build; \
    launcher=""; \
    if [ -z "$CROSS_PREFIX" ]; then \
      launcher="-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache"; \
    fi; \
    export CCACHE_DIR=/ccache CCACHE_READONLY=1 CCACHE_BASEDIR=/src CCACHE_NOHASHDIR=1 LANG=C.UTF-8; \
    unset LC_ALL LC_CTYPE LC_MESSAGES; \
    ccache --zero-stats >/dev/null || true; \
    cmake -S /src -B /src/build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DBUILD_TESTING=OFF $launcher $CROSS_CMAKE_ARGS; \
    cmake --build /src/build -j "${BUILD_JOBS:-$(nproc)}" --target \
      gvirtus-labeler gvirtus-device-plugin gvirtus-webhook gvirtus-backend-shim \
      gvirtus-peer-guard gvirtus-kai-reservation kubectl-gvirtus; \
    if [ -z "$CROSS_PREFIX" ]; then echo "[builder] $(ccache --print-stats | grep -E '^(direct|preprocessed)_cache_hit|^cache_miss' | tr '\n' ' ')"; fi; \
    bash /src/images/touch-changed.sh --record /src /src/build; \
    bash /src/images/stage-rootfs.sh /src/build/bin /out
