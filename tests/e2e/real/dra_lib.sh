# shellcheck shell=bash disable=SC2154  # test_ns, k, jp: the scenario's (tests/e2e/scenarios/lib.sh)
# Shared by the DRA scenarios (real/scenarios/79-dra-claims.sh, kai/40-dra-claims.sh),
# sourced after tests/e2e/scenarios/lib.sh: claim templates, and what a pod's claim and its
# properties.json name.

# claim_template NAME [MEMORY]: a ResourceClaimTemplate of the test namespace for one
# device of gpu.gvirtus.io and MEMORY of it (without MEMORY, the device whole).
claim_template() {
  local capacity=""
  [ -z "${2:-}" ] || capacity=", capacity: {requests: {memory: $2}}"
  cat <<YAML
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: $1, namespace: $test_ns}
spec:
  spec:
    devices:
      requests:
        - name: gpu
          exactly: {deviceClassName: gpu.gvirtus.io$capacity}
YAML
}

# allocation POD: the first device result of the pod's first claim, as JSON.
allocation() {
  local claim
  claim=$(jp pod "$1" -n "$test_ns" -o 'jsonpath={.status.resourceClaimStatuses[0].resourceClaimName}')
  k get resourceclaim "$claim" -n "$test_ns" -o json | jq -c '.status.allocation.devices.results[0]'
}

# device_endpoint POOL DEVICE: "IP:PORT" of that device in its pool's slice.
device_endpoint() {
  k get resourceslices -o json | jq -r --arg pool "$1" --arg device "$2" '
    .items[] | select(.spec.driver == "gpu.gvirtus.io" and .spec.pool.name == $pool) |
    .spec.devices[] | select(.name == $device) |
    "\(.attributes.ip.string):\(.attributes.port.int)"' | head -1
}

# config_endpoint POD: "IP:PORT" that the properties.json at $GVIRTUS_CONFIG names in POD.
config_endpoint() {
  # shellcheck disable=SC2016  # the pod's shell expands it
  k exec -n "$test_ns" "$1" -- sh -c 'cat "$GVIRTUS_CONFIG"' 2>&1 |
    jq -r '.communicator[0].endpoint | "\(.server_address):\(.port)"' 2>/dev/null || true
}

# check_allocated POD CLAIM [WHAT]: POD's properties.json names the device the scheduler
# allocated to CLAIM, and (with the echo backend) POD reaches that backend through its
# NetworkPolicy and its peer list. WHAT, if given, says what the claim was made for.
check_allocated() {
  local pod=$1 claim=$2 what=${3:+ for $3} result pool device want got
  result=$(k get resourceclaim "$claim" -n "$test_ns" -o json | jq -c '.status.allocation.devices.results[0]')
  pool=$(jq -r .pool <<<"$result") device=$(jq -r .device <<<"$result")
  want=$(device_endpoint "$pool" "$device")
  got=$(config_endpoint "$pod")
  [ -n "$want" ] && [ "$got" = "$want" ] &&
    ok "$pod: properties.json at \$GVIRTUS_CONFIG names $got, the device $pool/$device the scheduler allocated$what" ||
    bad "$pod: properties.json names \"$got\", allocated $pool/$device at \"$want\""
  if [ "${E2E_BACKEND_ECHO:-0}" = 1 ] && [ -n "$want" ]; then
    reached() { [ "$(k exec -n "$test_ns" "$pod" -- timeout 5 tcp-echo-probe "${want%:*}" "${want##*:}" 2>&1)" = gvirtus ]; }
    eventually "$pod reaches its backend $want (on its peer list)" reached
  fi
}
