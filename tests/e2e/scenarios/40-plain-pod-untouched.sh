#!/usr/bin/env bash
# A pod that is not a GVirtuS pod and has no gpu-scheduling-map is admitted unchanged.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
use_test_namespace

test_pod plain "" "" | k apply -f - >/dev/null
annotations=$(jp pod plain -n "$test_ns" -o jsonpath='{.metadata.annotations}')
gates=$(jp pod plain -n "$test_ns" -o jsonpath='{.spec.schedulingGates}')
volumes=$(jp pod plain -n "$test_ns" -o jsonpath='{.spec.volumes[*].name}')
[[ $annotations != *gvirtus.io* ]] && ok "no gvirtus.io annotations" || bad "annotations: $annotations"
[ -z "$gates" ] && ok "no scheduling gate" || bad "scheduling gates: $gates"
[[ $volumes != *gvirtus-config* ]] && ok "no gvirtus-config volume" || bad "volumes: $volumes"
eventually "it runs" bash -c "[ \"\$(kubectl get pod plain -n $test_ns -o jsonpath='{.status.phase}')\" = Running ]"
finish
