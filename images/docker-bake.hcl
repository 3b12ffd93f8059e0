# Multi-platform images for a registry, with docker buildx bake (images/buildx.sh runs
# it). The C++ is compiled once per platform, in target "builder", which every runtime
# image takes as its BUILDER_IMAGE through a named context.
#
#   REGISTRY=ghcr.io/acme/gvirtus-k8s TAG=0.1.0 docker buildx bake -f images/docker-bake.hcl --push
#
# Images: $REGISTRY/{labeler,device-plugin,webhook,backend}:$TAG. The backend is built
# only for BACKEND_PLATFORMS (default linux/amd64): it extends GVIRTUS_IMAGE, and
# upstream's GVirtuS image exists for amd64 only.

variable "REGISTRY" { default = "" }
variable "TAG" { default = "dev" }
variable "PLATFORMS" { default = "linux/amd64,linux/arm64" }
variable "BACKEND_PLATFORMS" { default = "linux/amd64" }
variable "BASE_IMAGE" { default = "debian:bookworm-slim" }
variable "GVIRTUS_IMAGE" { default = "taslanidis/gvirtus:cuda12.6.3-cudnn-ubuntu22.04" }

group "default" {
  targets = ["labeler", "device-plugin", "webhook", "backend"]
}

# Context: the repository; Dockerfile.builder.dockerignore keeps it to the sources.
target "builder" {
  context    = "."
  dockerfile = "images/Dockerfile.builder"
  args       = { BASE_IMAGE = BASE_IMAGE }
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

target "backend" {
  inherits   = ["_runtime"]
  dockerfile = "Dockerfile.backend"
  contexts   = { "gvirtus-k8s-builder" = "target:builder-backend" }
  args = {
    BUILDER_IMAGE = "gvirtus-k8s-builder"
    GVIRTUS_IMAGE = GVIRTUS_IMAGE
    VERSION       = TAG
  }
  platforms = split(",", BACKEND_PLATFORMS)
  tags      = ["${REGISTRY}/backend:${TAG}"]
}
