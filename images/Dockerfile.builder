# The one builder of every image: compiles the four binaries once and stages, under
# /out, what each runtime image copies (images/stage-rootfs.sh). The runtime
# Dockerfiles start FROM this image (build argument BUILDER_IMAGE).
#
# Context: the repository root. images/build.sh sends only the files below (a tar
# stream); BuildKit reads Dockerfile.builder.dockerignore for the same effect.
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE} AS builder

ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      build-essential cmake ninja-build pkg-config ca-certificates patchelf \
      libcpp-httplib-dev nlohmann-json3-dev libssl-dev libc-ares-dev libyaml-cpp-dev \
      libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /src
COPY CMakeLists.txt ./
COPY common/ common/
COPY labeler/ labeler/
COPY device-plugin/ device-plugin/
COPY webhook/ webhook/
COPY backend-shim/ backend-shim/
COPY images/stage-rootfs.sh images/print_ids.c images/

# Empty: as many jobs as the build machine has cores. -O2, as the tested builds (GCC 12
# at -O3 reports false -Wrestrict errors in std::string code, and warnings are errors).
ARG BUILD_JOBS=
RUN cmake -S /src -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" -DBUILD_TESTING=OFF \
 && cmake --build /build -j "${BUILD_JOBS:-$(nproc)}" --target \
      gvirtus-labeler gvirtus-device-plugin gvirtus-webhook gvirtus-backend-shim \
 && bash /src/images/stage-rootfs.sh /build/bin /out
