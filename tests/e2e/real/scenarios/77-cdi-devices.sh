#!/usr/bin/env bash
# A pod asking for nvidia.com/gpu: 2 on a frontend node gets two virtual devices: the
# device plugin's Allocate answer (GVIRTUS_VGPU_IDS) and, through containerd's CDI
# support, the environment of the CDI spec the plugin wrote for each device.
# shellcheck source=../../scenarios/lib.sh
source "$(dirname "$0")/../../scenarios/lib.sh"
use_test_namespace
test_pod two-gpus "" '      resources: {limits: {nvidia.com/gpu: 2}}' | k apply -f - >/dev/null
running() { [ "$(jp pod two-gpus -n "$test_ns" -o 'jsonpath={.status.phase}')" = Running ]; }
eventually "a pod asking nvidia.com/gpu: 2 runs" running || finish
env=$(k exec -n "$test_ns" two-gpus -- env 2>&1 | grep '^GVIRTUS_' | sort)
say "its GVirtuS environment: $(tr '\n' ' ' <<<"$env")"
ids=$(sed -n 's/^GVIRTUS_VGPU_IDS=//p' <<<"$env")
[ "$(tr ',' '\n' <<<"$ids" | grep -c .)" = 2 ] && ok "GVIRTUS_VGPU_IDS names 2 devices ($ids)" ||
  bad "GVIRTUS_VGPU_IDS: ${ids:-missing}"
cdi=$(grep -v '^GVIRTUS_VGPU_IDS=' <<<"$env" | grep -c '^GVIRTUS_' || true)
[ "$cdi" = 2 ] && ok "2 variables from the CDI spec (containerd applied it)" || bad "CDI variables: $cdi"
finish
