#!/usr/bin/env bash
# The arguments the manifests give each container are flags its binary knows: each
# binary (from the build, GVIRTUS_BIN_DIR) is run with the manifest's arguments and
# --help added last (before the backend command), which parses them all and exits 0, or
# exits 2 naming an unknown or bad flag. Catches a flag renamed in the code but not in
# manifests/.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
bin_dir=${GVIRTUS_BIN_DIR:-$repo/build/bin}

for entry in labeler/daemonset.yaml=gvirtus-labeler device-plugin/daemonset.yaml=gvirtus-device-plugin \
    webhook/deployment.yaml=gvirtus-webhook backend/daemonset.yaml=gvirtus-backend-shim; do
  file=$manifests/${entry%%=*} program=${entry#*=}
  if [ ! -x "$bin_dir/$program" ]; then
    bad "$program: not built in $bin_dir"
    continue
  fi
  if ! text=$(k create --dry-run=client --validate=false -f "$file" \
      -o jsonpath='{range .spec.template.spec.containers[0].args[*]}{@}{"\n"}{end}') ||
      [ -z "$text" ]; then
    bad "$program: no arguments read from $file"
    continue
  fi
  mapfile -t args <<<"$text"
  command=()
  for arg in "${args[@]}"; do
    arg=${arg//\$(GVIRTUS_HOME)/\/usr\/local\/gvirtus}
    if [ "$arg" = -- ] && [ ${#command[@]} -gt 0 ] && [[ " ${command[*]} " != *" --help "* ]]; then
      command+=(--help)
    fi
    command+=("$arg")
  done
  [[ " ${command[*]} " == *" --help "* ]] || command+=(--help)
  if out=$("$bin_dir/$program" "${command[@]}" 2>&1 >/dev/null); then
    ok "$program accepts ${args[*]}"
  else
    bad "$program rejects the manifest's arguments: $out"
  fi
done

# Each overlay: the webhook's arguments with its flags added. One line per object: its kind
# and the first container's arguments as a JSON array (a jsonpath range would stop at the
# first object without containers).
if [ -x "$bin_dir/gvirtus-webhook" ]; then
  for overlay in autoscale:--autoscale-candidates= dra:--dra; do
    name=${overlay%%:*} flag=${overlay#*:}
    line=$(k kustomize "$repo/overlays/$name" | k create --dry-run=client --validate=false -f - \
      -o jsonpath='{.kind}{" "}{.spec.template.spec.containers[0].args}{"\n"}' | grep '^Deployment ' || true)
    mapfile -t args < <(sed 's/^Deployment \["//; s/"\]$//; s/","/\n/g' <<<"$line")
    if [[ " ${args[*]} " != *" $flag"* ]]; then
      bad "overlays/$name: the webhook has no $flag (${args[*]})"
    elif out=$("$bin_dir/gvirtus-webhook" "${args[@]}" --help 2>&1 >/dev/null); then
      ok "gvirtus-webhook (overlays/$name) accepts ${args[*]}"
    else
      bad "gvirtus-webhook rejects overlays/$name's arguments: $out"
    fi
  done
fi
finish
