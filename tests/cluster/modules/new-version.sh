#!/usr/bin/env bash
# Writes the wrapper module for one Kubernetes or etcd release, to commit beside the
# others: modules/kubernetes/VERSION or modules/etcd/VERSION (go.mod and go.sum).
#   bash tests/cluster/modules/new-version.sh kubernetes v1.36.3
#   bash tests/cluster/modules/new-version.sh etcd v3.6.16
# k8s.io/kubernetes points its staging modules at ./staging paths, which a plain
# `go build` of a module that requires it refuses; each is pinned here to the release's
# own v0.MINOR.PATCH from the module proxy. etcd's go.mod uses relative replaces likewise.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
what=${1:?usage: new-version.sh kubernetes|etcd VERSION}
version=${2:?usage: new-version.sh kubernetes|etcd VERSION}
proxy=$(go env GOPROXY); proxy=${proxy%%,*}
proxy=${proxy:-https://proxy.golang.org}
dir=$here/$what/$version
mkdir -p "$dir"
case $what in
kubernetes)
  upstream=$(curl -fsS "$proxy/k8s.io/kubernetes/@v/$version.mod") ||
    { echo "new-version.sh: k8s.io/kubernetes $version is not served by $proxy" >&2; exit 1; }
  go_line=$(grep -m1 '^go ' <<<"$upstream")
  staging=$(awk '$2 == "=>" && $3 ~ /^\.\/staging\// {print $1}' <<<"$upstream")
  staging_version=v0.${version#v1.}
  {
    echo "// Wrapper module that builds Kubernetes $version's control plane, kubelet and"
    echo "// kube-proxy for the local clusters; written by ../../new-version.sh."
    echo "module gvirtus.io/tests/cluster/kubernetes"
    echo
    echo "$go_line"
    echo
    echo "tool ("
    for cmd in kube-apiserver kube-controller-manager kube-proxy kube-scheduler kubectl kubelet; do
      printf '\tk8s.io/kubernetes/cmd/%s\n' "$cmd"
    done
    echo ")"
    echo
    echo "require k8s.io/kubernetes $version"
    for module in $staging; do
      echo
      echo "replace $module => $module $staging_version"
    done
  } >"$dir/go.mod"
  ;;
etcd)
  upstream=$(curl -fsS "$proxy/go.etcd.io/etcd/server/v3/@v/$version.mod") ||
    { echo "new-version.sh: go.etcd.io/etcd/server/v3 $version is not served by $proxy" >&2; exit 1; }
  {
    echo "// Wrapper module that builds etcd $version for the local clusters; written by"
    echo "// ../../new-version.sh (etcd's go.mod uses relative replaces)."
    echo "module gvirtus.io/tests/cluster/etcd"
    echo
    grep -m1 '^go ' <<<"$upstream"
    echo
    echo "tool go.etcd.io/etcd/server/v3"
    echo
    echo "require go.etcd.io/etcd/server/v3 $version"
    for module in api/v3 client/pkg/v3 client/v3 pkg/v3; do
      echo
      echo "replace go.etcd.io/etcd/$module => go.etcd.io/etcd/$module $version"
    done
  } >"$dir/go.mod"
  ;;
*) echo "new-version.sh: unknown part '$what' (kubernetes or etcd)" >&2; exit 2 ;;
esac
(cd "$dir" && GOFLAGS=-mod=mod GOTOOLCHAIN=local go mod tidy)
echo "$dir"
