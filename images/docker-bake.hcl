# The images, for every platform, with docker buildx bake (images/build.sh runs it). The
# C++ is compiled once per platform, in target "builder", which runs on the build
# machine and cross-compiles for the others; every runtime image takes it as its
# BUILDER_IMAGE through a named context.
#
#   REGISTRY=ghcr.io/acme/gvirtus-k8s TAG=0.1.0 docker buildx bake -f images/docker-bake.hcl --push
#
# Images: $REGISTRY/{labeler,device-plugin,webhook,backend,kai-reservation}:$TAG. The backend is built
# only for BACKEND_PLATFORMS (default linux/amd64): it extends GVIRTUS_IMAGE, and
# upstream's GVirtuS image exists for amd64 only. GVIRTUS_IMAGE=standin builds it on the
# GPU-less stand-in (Dockerfile.gvirtus-standin) and tags it $TAG-standin, never $TAG.

variable "REGISTRY" { default = "" }
variable "TAG" { default = "dev" }
variable "PLATFORMS" { default = "linux/amd64,linux/arm64" }
variable "BACKEND_PLATFORMS" { default = "linux/amd64" }
variable "BASE_IMAGE" { default = "debian:bookworm-slim" }
variable "GVIRTUS_IMAGE" { default = "taslanidis/gvirtus:cuda12.6.3-cudnn-ubuntu22.04" }
variable "BUILD_JOBS" { default = "" }
# The ccache the builder reads for the build machine's platform (Dockerfile.builder): the
# host's, from images/build.sh; this folder holds none.
variable "CCACHE" { default = "images/no-ccache" }
# Where target "tools" writes the image tests' helpers (one folder per platform).
variable "TOOLS_DIR" { default = "build/images/tools" }

group "default" {
  targets = ["labeler", "device-plugin", "webhook", "backend", "kai-reservation"]
}

# Context: the repository; Dockerfile.builder.dockerignore keeps it to the sources.
target "builder" {
  context    = "."
  contexts   = { ccache = CCACHE }
  dockerfile = "images/Dockerfile.builder"
  args       = { BASE_IMAGE = BASE_IMAGE, BUILD_JOBS = BUILD_JOBS }
  platforms  = split(",", PLATFORMS)
}

# The same builder for the backend's platforms (a named context must match the
# platforms of the image that uses it; BuildKit shares the identical steps).
target "builder-backend" {
  inherits  = ["builder"]
  platforms = split(",", BACKEND_PLATFORMS)
}

target "_runtime" {
  context   = "images"
  contexts  = { "gvirtus-k8s-builder" = "target:builder" }
  platforms = split(",", PLATFORMS)
  labels    = { "org.opencontainers.image.version" = TAG }
}

target "labeler" {
  inherits   = ["_runtime"]
  dockerfile = "Dockerfile.labeler"
  args       = { BUILDER_IMAGE = "gvirtus-k8s-builder", VERSION = TAG }
  tags       = ["${REGISTRY}/labeler:${TAG}"]
}

target "device-plugin" {
  inherits   = ["_runtime"]
  dockerfile = "Dockerfile.device-plugin"
  args       = { BUILDER_IMAGE = "gvirtus-k8s-builder", VERSION = TAG }
  tags       = ["${REGISTRY}/device-plugin:${TAG}"]
}

target "webhook" {
  inherits   = ["_runtime"]
  dockerfile = "Dockerfile.webhook"
  args       = { BUILDER_IMAGE = "gvirtus-k8s-builder", VERSION = TAG }
  tags       = ["${REGISTRY}/webhook:${TAG}"]
}

# KAI-Scheduler's GPU reservation pod for virtual GPUs (KAI's binder flag
# --resource-reservation-pod-image): it runs the image without arguments.
target "kai-reservation" {
  inherits   = ["_runtime"]
  dockerfile = "Dockerfile.kai-reservation"
  args       = { BUILDER_IMAGE = "gvirtus-k8s-builder", VERSION = TAG }
  tags       = ["${REGISTRY}/kai-reservation:${TAG}"]
}

# A stand-in for the GVirtuS image on machines without GPUs or its registry.
target "gvirtus-standin" {
  context    = "images"
  dockerfile = "Dockerfile.gvirtus-standin"
  args       = { BASE_IMAGE = BASE_IMAGE }
  platforms  = split(",", BACKEND_PLATFORMS)
}

target "backend" {
  inherits   = ["_runtime"]
  dockerfile = "Dockerfile.backend"
  contexts = GVIRTUS_IMAGE == "standin" ? {
    "gvirtus-k8s-builder" = "target:builder-backend"
    "gvirtus-image"       = "target:gvirtus-standin"
  } : { "gvirtus-k8s-builder" = "target:builder-backend" }
  args = {
    BUILDER_IMAGE = "gvirtus-k8s-builder"
    GVIRTUS_IMAGE = GVIRTUS_IMAGE == "standin" ? "gvirtus-image" : GVIRTUS_IMAGE
    VERSION       = TAG
  }
  platforms = split(",", BACKEND_PLATFORMS)
  tags      = ["${REGISTRY}/backend:${TAG}${GVIRTUS_IMAGE == "standin" ? "-standin" : ""}"]
}

# The application image of the demo and the end-to-end tests (tests/e2e/testapp), on
# the base image; for the build machine's platform only.
target "testapp" {
  context = "tests/e2e/testapp"
  args    = { BASE_IMAGE = BASE_IMAGE }
  tags    = ["${REGISTRY}/testapp:${TAG}"]
}

# The image tests' helpers from the builder (a static id printer per platform), written
# to TOOLS_DIR/<os>_<arch>/ instead of an image.
target "tools" {
  context            = "images"
  contexts           = { "gvirtus-k8s-builder" = "target:builder" }
  dockerfile-inline  = "FROM gvirtus-k8s-builder AS build\nFROM scratch\nCOPY --from=build /out/tools/ /\n"
  platforms          = split(",", PLATFORMS)
  output             = ["type=local,dest=${TOOLS_DIR}"]
}

# The kubectl plugin's krew payload from the builder (launcher, binary, libraries), one
# folder per platform under PLUGIN_DIR; images/release.sh packs and checksums them.
variable "PLUGIN_DIR" { default = "build/release/plugin" }
target "kubectl-plugin" {
  context           = "images"
  contexts          = { "gvirtus-k8s-builder" = "target:builder" }
  dockerfile-inline = "FROM gvirtus-k8s-builder AS build\nFROM scratch\nCOPY --from=build /out/kubectl-gvirtus/ /\n"
  platforms         = split(",", PLATFORMS)
  output            = ["type=local,dest=${PLUGIN_DIR}"]
}
