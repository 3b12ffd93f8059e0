#!/usr/bin/env bash
# Nothing the cluster has served so far was a deprecated API: the API server counts every
# request to one (apiserver_requested_deprecated_apis, with the release that removes it).
# Run after the other scenarios, so every component of ours (and the tests' own kubectl)
# has made its requests; on v1.37 this is what would break first on the next release.
source "$(dirname "$0")/../../scenarios/lib.sh"
metrics=$(k get --raw /metrics) || { bad "GET /metrics of the API server"; finish; }
deprecated=$(grep '^apiserver_requested_deprecated_apis{' <<<"$metrics" || true)
version=$(k version -o json 2>/dev/null | sed -nE 's/.*"gitVersion": "([^"]+)".*/\1/p' | tail -1)
if [ -z "$deprecated" ]; then
  ok "no request to a deprecated API on $version"
else
  bad "requests to deprecated APIs on $version:"
  sed 's/^/          /' <<<"$deprecated" >&2
fi
finish
