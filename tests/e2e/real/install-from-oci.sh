#!/usr/bin/env bash
# A release installed as operators install one: images/release.sh publishes this tree
# to the loopback registry (images, chart as an OCI artifact, plugin archives), then
# `helm install gvirtus oci://localhost:5000/gvirtus-k8s/charts/gvirtus` on the real-node
# cluster from which whatever was installed before has been removed. Its pods must run
# from the registry's images with no --set, and a GVirtuS pod must run against a backend.
# Run by real/run-e2e.sh with the cluster's environment; exits like a scenario.
#   real/install-from-oci.sh
# Environment: HELM (helm binary), E2E_TEST_IMAGE, E2E_BACKEND_NODE (opted in).
# shellcheck source=../scenarios/lib.sh
source "$(dirname "$0")/../scenarios/lib.sh"
repo=$(cd "$(dirname "$0")/../../.." && pwd)
helm=${HELM:?HELM must name the helm binary}
release=gvirtus
state=$repo/build/release

say "images/release.sh: the release to the loopback registry"
if ! HELM=$helm bash "$repo/images/release.sh" 2>"$repo/build/release-local.log"; then
  tail -n 30 "$repo/build/release-local.log" >&2
  bad "images/release.sh failed"
  finish
fi
grep -E '^\s+(images|plugin|chart|localhost)|install:' "$repo/build/release-local.log" >&2 || true
tag=$(sed -nE 's/^version: (.*)$/\1/p' <(tar -xzOf "$state"/gvirtus-*.tgz gvirtus/Chart.yaml))
chart=oci://localhost:5000/gvirtus-k8s/charts/gvirtus
for platform in linux_amd64 linux_arm64; do
  archive=$state/kubectl-gvirtus_${tag}_$platform.tar.gz
  sum=$(sha256sum "$archive" 2>/dev/null | cut -d' ' -f1)
  if [ -n "$sum" ] && grep -q "sha256: $sum" "$state/gvirtus.yaml"; then
    ok "krew manifest names the $platform archive with its sha256"
  else
    bad "krew manifest lacks the $platform archive's sha256"
  fi
done
# The amd64 plugin from its archive, on this machine, outside any image.
plugin_dir=$(mktemp -d)
tar -C "$plugin_dir" -xzf "$state/kubectl-gvirtus_${tag}_linux_amd64.tar.gz"
if version=$(env -i "$plugin_dir/kubectl-gvirtus" --version 2>&1); then
  ok "the plugin runs from its unpacked archive: $version"
else
  bad "the unpacked plugin does not run: $version"
fi
rm -rf "$plugin_dir"

say "what was installed before is removed"
k delete mutatingwebhookconfiguration gvirtus-webhook --ignore-not-found >/dev/null
k delete namespace "$system_ns" --ignore-not-found --wait=false >/dev/null
eventually "namespace $system_ns gone" bash -c "! kubectl get namespace $system_ns >/dev/null 2>&1"
k delete clusterrole,clusterrolebinding,validatingadmissionpolicy,validatingadmissionpolicybinding \
  -l app.kubernetes.io/part-of=gvirtus --ignore-not-found >/dev/null 2>&1 || true

say "helm install $release $chart --version $tag"
if out=$("$helm" install "$release" "$chart" --version "$tag" --plain-http -n default 2>&1); then
  ok "helm install from the OCI registry"
else
  bad "helm install: $out"
  finish
fi
images=$("$helm" get manifest "$release" -n default | sed -nE 's/^ *image: "?([^" ]+)"?$/\1/p' | sort -u)
if [ -n "$images" ] && ! grep -v '^localhost:5000/gvirtus-k8s/' <<<"$images" >/dev/null; then
  ok "every image is the release's: $(tr '\n' ' ' <<<"$images")"
else
  bad "images not from the release: $(tr '\n' ' ' <<<"$images")"
fi
bash "$(dirname "$0")/../scenarios/10-install-ready.sh" && ok "the chart's components ready (scenario 10)" ||
  bad "the chart's components are not ready (scenario 10 above)"

say "a GVirtuS pod runs against a backend of the chart's"
use_test_namespace
k apply -n "$test_ns" -f - >/dev/null <<POD
apiVersion: v1
kind: Pod
metadata:
  name: cuda-app
  labels: {gvirtus.io/enabled: "true"}
spec:
  restartPolicy: Never
  containers:
    - name: app
      image: $test_image
      command: ["sh", "-c", "cat /etc/gvirtus/properties.json && sleep 3600"]
      resources: {limits: {nvidia.com/gpu: 1}}
POD
running() { [ "$(k get pod cuda-app -n "$test_ns" -o jsonpath='{.status.phase}')" = Running ]; }
eventually "the GVirtuS pod Running" running
backend=$(k get pod cuda-app -n "$test_ns" -o jsonpath='{.metadata.annotations.gvirtus\.io/backend}')
[ -n "$backend" ] && ok "assigned backend $backend" || bad "no gvirtus.io/backend annotation"

say "helm uninstall"
"$helm" uninstall "$release" -n default --wait --timeout 3m >/dev/null && ok "helm uninstall" ||
  bad "helm uninstall"
finish
