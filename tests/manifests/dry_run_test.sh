#!/usr/bin/env bash
# Every manifest is accepted by the API server (server-side dry run: schema, strict field
# validation, admission), both ways of installing: `kubectl apply -k manifests/` and, per
# component, `kubectl apply -f manifests/<component>/`. The Pod Security warnings of the
# namespace (warn=restricted) show that the labeler, the webhook and the backend pass
# "restricted" and that the device plugin deviates only by its host paths and UID 0.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
trap 'delete_manifests' EXIT

say "namespace"
if out=$(k apply --dry-run=server -f "$manifests/namespace.yaml" 2>&1); then ok "namespace.yaml (dry run)"
else bad "namespace.yaml: $out"; fi
# A server-side dry run of namespaced objects needs their namespace to exist.
delete_manifests
k apply -f "$manifests/namespace.yaml" >/dev/null
enforce=$(k get namespace "$ns" -o jsonpath='{.metadata.labels.pod-security\.kubernetes\.io/enforce} {.metadata.labels.pod-security\.kubernetes\.io/warn} {.metadata.labels.pod-security\.kubernetes\.io/audit}')
[ "$enforce" = "privileged restricted restricted" ] && ok "Pod Security enforce/warn/audit: $enforce" ||
  bad "Pod Security labels: \"$enforce\""

say "kubectl apply --dry-run=server -k manifests/"
if out=$(k apply --dry-run=server -k "$manifests" 2>&1); then
  ok "all of manifests/ ($(grep -c 'server dry run' <<<"$out") objects)"
else
  bad "apply -k manifests/:"; echo "$out" >&2
fi

for component in labeler device-plugin webhook backend policy; do
  say "component $component"
  if ! out=$(k apply --dry-run=server -f "$manifests/$component/" 2>&1); then
    bad "apply -f manifests/$component/:"; echo "$out" >&2; continue
  fi
  ok "apply -f manifests/$component/ ($(grep -c 'server dry run' <<<"$out") objects)"
  if ! k apply --dry-run=server -k "$manifests/$component" >/dev/null 2>&1; then
    bad "apply -k manifests/$component"
  else
    ok "apply -k manifests/$component"
  fi
  # -k and -f must install the same objects.
  from_k=$(k kustomize "$manifests/$component" | k apply --dry-run=client -o name -f - | sort)
  from_f=$(k apply --dry-run=client -o name -f "$manifests/$component/" | sort)
  [ -n "$from_k" ] && [ "$from_k" = "$from_f" ] && ok "-k and -f install the same objects" ||
    bad "-k and -f differ: $(diff <(echo "$from_k") <(echo "$from_f") | tr '\n' ' ')"
  warnings=$(grep -i 'would violate PodSecurity' <<<"$out" || true)
  case $component in
    device-plugin)
      # Exactly the deviations the manifest explains: host paths and UID 0.
      rest=$(sed -E 's/^Warning: would violate PodSecurity "restricted:latest": //;
        s/restricted volume types \(volumes "device-plugins", "cdi" use restricted volume type "hostPath"\)//;
        s/runAsNonRoot != true \(container "device-plugin" must not set securityContext.runAsNonRoot=false\)//;
        s/runAsUser=0 \(container "device-plugin" must not set runAsUser=0\)//; s/[, ]//g' <<<"$warnings")
      if [ -n "$warnings" ] && [ -z "$rest" ]; then
        ok "restricted: only hostPath and UID 0 deviate (as documented)"
      else
        bad "device plugin Pod Security warnings: ${warnings:-none}"
      fi
      # ... and nothing more: not privileged, no capability, no host namespace, no
      # escalation, read-only root, RuntimeDefault seccomp, only the two host folders.
      c='.spec.template.spec.containers[0].securityContext' p=.spec.template.spec
      template="{$c.privileged} {$c.allowPrivilegeEscalation} {$c.readOnlyRootFilesystem}"
      template+=" {$c.capabilities.drop} {$c.capabilities.add} {$p.securityContext.seccompProfile.type}"
      template+=" {$p.hostNetwork}{$p.hostPID}{$p.hostIPC} {$p.automountServiceAccountToken}"
      template+=" {$p.volumes[*].hostPath.path}"
      got=$(k apply --dry-run=server -f "$manifests/$component/daemonset.yaml" -o "jsonpath=$template" \
        2>/dev/null | tr -s ' ' ' ')
      want='false false true ["ALL"] RuntimeDefault false /var/lib/kubelet/device-plugins /etc/cdi'
      [ "$got" = "$want" ] && ok "device plugin: least privilege ($got)" ||
        bad "device plugin security: got \"$got\", want \"$want\""
      ;;
    *)
      [ -z "$warnings" ] && ok "passes Pod Security restricted" || bad "restricted: $warnings"
      ;;
  esac
done

say "overlays/autoscale (everything, with the backend autoscaler)"
if out=$(k apply --dry-run=server -k "$repo/overlays/autoscale" 2>&1); then
  ok "apply -k overlays/autoscale ($(grep -c 'server dry run' <<<"$out") objects)"
  grep -q '^clusterrole.rbac.authorization.k8s.io/gvirtus-webhook-autoscale ' <<<"$out" &&
    ok "adds ClusterRole gvirtus-webhook-autoscale" || bad "no ClusterRole gvirtus-webhook-autoscale: $out"
else
  bad "apply -k overlays/autoscale:"; echo "$out" >&2
fi

say "overlays/dra (everything, with the DRA slice publisher)"
if out=$(k apply --dry-run=server -k "$repo/overlays/dra" 2>&1); then
  ok "apply -k overlays/dra ($(grep -c 'server dry run' <<<"$out") objects)"
  for object in deviceclass.resource.k8s.io/gpu.gvirtus.io clusterrole.rbac.authorization.k8s.io/gvirtus-webhook-dra \
    validatingadmissionpolicy.admissionregistration.k8s.io/gvirtus-webhook-slices \
    validatingadmissionpolicy.admissionregistration.k8s.io/gvirtus-webhook-claim-status; do
    grep -q "^$object " <<<"$out" && ok "adds $object" || bad "no $object: $out"
  done
else
  bad "apply -k overlays/dra:"; echo "$out" >&2
fi
# The claim templates and the pod of the examples, CEL included, as the API server takes them.
if out=$(k apply --dry-run=server -n default -f "$repo/overlays/dra/examples" 2>&1); then
  ok "overlays/dra/examples: $(grep -c 'server dry run' <<<"$out") objects accepted"
else
  bad "overlays/dra/examples:"; echo "$out" >&2
fi

say "nothing was created by the dry runs"
left=$(k get all,serviceaccounts,roles,rolebindings,networkpolicies,poddisruptionbudgets -n "$ns" \
  -o name 2>/dev/null | grep -v '^serviceaccount/default$' || true)
left+=$(k get clusterroles,clusterrolebindings,mutatingwebhookconfigurations \
  -o name 2>/dev/null | grep gvirtus || true)
left+=$(k get validatingadmissionpolicies,validatingadmissionpolicybindings \
  -o name 2>/dev/null | grep gvirtus || true)
[ -z "$left" ] && ok "no objects left" || bad "objects exist after dry runs: $left"
finish
