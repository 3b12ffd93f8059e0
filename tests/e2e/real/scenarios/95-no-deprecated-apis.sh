#!/usr/bin/env bash
# Nothing of ours asks the API server for a deprecated API or sends a field it ignores.
# The API server answers such a request with a Warning header, which every component
# logs once ("the API server warns"): no component's log may hold one. Run after the
# other real-node scenarios, so every component has made its requests. The API server's
# own count (apiserver_requested_deprecated_apis) is printed beside it: it does not say
# who asked (the control plane's own controllers and the tests' kubectl count too).
# shellcheck source=../../scenarios/lib.sh
source "$(dirname "$0")/../../scenarios/lib.sh"
version=$(k version -o json 2>/dev/null | sed -nE 's/.*"gitVersion": "([^"]+)".*/\1/p' | tail -1)
warned=""
pods=$(jp pods -n "$system_ns" -o 'jsonpath={range .items[*]}{.metadata.name}{"\n"}{end}')
for pod in $pods; do
  lines=$(k logs -n "$system_ns" "$pod" --all-containers 2>/dev/null | grep 'the API server warns' || true)
  [ -z "$lines" ] || warned+="$pod: $lines"$'\n'
done
if [ -z "$warned" ]; then
  ok "no API server warning in the logs of $(wc -w <<<"$pods") pods of ours on $version"
else
  bad "the API server warned our components on $version:"
  sed 's/^/          /' <<<"$warned" >&2
fi
deprecated=$(k get --raw /metrics 2>/dev/null | grep '^apiserver_requested_deprecated_apis{' || true)
say "deprecated APIs requested by anyone so far: ${deprecated:-none}"
finish
