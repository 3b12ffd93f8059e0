# shellcheck shell=bash disable=SC2034  # sourced: its variables are for the sourcing script
# Versions of the operator tools used by the tests (helm, promtool); the cache folder is
# keyed by them. Sourced by build-tools.sh and by the tests that run the tools.
HELM_VERSION=v3.21.4
# The Kubernetes minor of helm's client-go (v0.36.x in helm v3.21.4's go.mod): what
# `helm template` and `helm lint` assume without a cluster, as helm's own Makefile sets it.
HELM_K8S_MINOR=36
# promtool: Prometheus v3.5 (LTS), whose Go module is v0.305.0; the version is pinned in
# tests/tools/modules/promtool/go.mod (keep the two equal).
PROMETHEUS_VERSION=v3.5.0
# shellcheck source=../cluster/versions.sh
source "$(dirname "${BASH_SOURCE[0]}")/../cluster/versions.sh"
TOOLS_CACHE=$CLUSTER_CACHE/tools
HELM_BIN=$TOOLS_CACHE/helm-$HELM_VERSION/helm
PROMTOOL_BIN=$TOOLS_CACHE/promtool-$PROMETHEUS_VERSION/promtool
