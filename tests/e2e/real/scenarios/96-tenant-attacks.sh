#!/usr/bin/env bash
# A hostile tenant in a shared cluster: a ServiceAccount with the `edit` role in its own
# namespace (kubectl --as, so the API server authorizes and the admission policies judge
# that account, not the admin). Each attack is tried as a tenant would, and each is
# refused: by the NetworkPolicy agent (E2E_NETWORK_POLICY=1: kube-network-policies runs on
# the nodes), by the backend side's session check (only the pods the webhook lists in the
# backend pod's gvirtus.io/peers), by the admission policies (one clear line each), or by
# a ResourceQuota. The pod that was given a backend still reaches it. Then a node taken over
# (its kubelet's certificate, its labeler's token) and the webhook taken over (its pod's
# token) try to widen their reach, and RBAC or the policies refuse them.
# shellcheck source=../../scenarios/lib.sh
source "$(dirname "$0")/../../scenarios/lib.sh"
mapfile -t backends < <(jp pods -n "$system_ns" -l app.kubernetes.io/component=backend \
  -o 'jsonpath={range .items[*]}{.metadata.name} {.status.podIP}{"\n"}{end}')
[ ${#backends[@]} -ge 2 ] || skip "needs two backend pods"
use_test_namespace
tenant=system:serviceaccount:$test_ns:tenant
k create serviceaccount tenant -n "$test_ns" >/dev/null
k create rolebinding tenant-edit -n "$test_ns" --clusterrole=edit --serviceaccount="$test_ns:tenant" >/dev/null
as_tenant() { k --as="$tenant" --as-group=system:serviceaccounts "$@"; }
field() { jp pod "$1" -n "$test_ns" -o "jsonpath=$2"; }
running() { [ "$(field "$1" '{.status.phase}')" = Running ]; }

# probe POD IP [PORT]: "echo" (the backend answered), "closed" (connected, then closed before
# any reply: the session check; or no echo, from a port that is not GVirtuS) or "dropped" (no
# connection within 5 s: NetworkPolicy). PORT: 9999.
probe() {
  local status=0
  reply=$(k exec -n "$test_ns" "$1" -- timeout 5 tcp-echo-probe "$2" "${3:-9999}" 2>/dev/null) || status=$?
  if [ "$status" = 0 ] && [ "$reply" = gvirtus ]; then echo echo
  elif [ "$status" = 124 ]; then echo dropped
  else echo closed; fi
}
# refused DESCRIPTION EXPECTED_TEXT COMMAND...: the tenant's command fails and says why.
refused() {
  local what=$1 expected=$2 out
  shift 2
  if out=$("$@" 2>&1); then
    bad "$what: allowed ($out)"
  elif grep -q -- "$expected" <<<"$out"; then
    ok "$what: refused: $(grep -o -- "$expected.*" <<<"$out" | head -n 1 | cut -c1-140)"
  else
    bad "$what: refused, but not for the expected reason ($expected): $out"
  fi
}

say "the tenant's own GVirtuS pod"
test_pod own '  labels: {gvirtus.io/enabled: "true"}' "" | as_tenant apply -f - >/dev/null
eventually "the tenant's GVirtuS pod runs" running own || finish
own_ip=$(field own '{.status.podIP}')
assigned=$(field own '{.metadata.annotations.gvirtus\.io/backend-pod}')
assigned=${assigned#*/}
for backend in "${backends[@]}"; do
  if [ "${backend% *}" = "$assigned" ]; then mine=${backend#* }; else other=${backend#* } other_pod=${backend% *}; fi
done
[ -n "${mine:-}" ] && [ -n "${other:-}" ] || { bad "own was assigned \"$assigned\", not a backend pod"; finish; }
listed() { jp pod "$1" -n "$system_ns" -o 'jsonpath={.metadata.annotations.gvirtus\.io/peers}' | tr , '\n' | grep -qx "$2"; }
eventually "the webhook lists own ($own_ip) in gvirtus.io/peers of $assigned" listed "$assigned" "$own_ip"
[ "$(probe own "$mine")" = echo ] && ok "own reaches its backend $mine" || bad "own cannot reach its backend $mine"
result=$(probe own "$other")
[ "$result" = closed ] && ok "own, labelled but assigned to $assigned, is closed by $other_pod's session check" ||
  bad "own to the other backend $other: $result"
listed "$other_pod" "$own_ip" && bad "$other_pod lists own" || ok "$other_pod does not list own"

say "pods the webhook did not assign"
test_pod plain "" "" | as_tenant apply -f - >/dev/null
eventually "the plain pod runs" running plain
# The agent drops its first packet (no connection at all); without one, the session check
# closes the connection before the backend reads a byte.
expected_block=closed
[ "${E2E_NETWORK_POLICY:-0}" = 1 ] && expected_block=dropped
result=$(probe plain "$mine")
[ "$result" = "$expected_block" ] && ok "a pod without the label cannot reach $mine ($result)" ||
  bad "plain to $mine: $result (expected $expected_block)"
# A tenant writes the assignment itself: on a pod without the label the webhook never
# sees it, so the admission policy refuses it at creation...
refused "create an unlabelled pod that names a backend" "annotations written by the GVirtuS webhook" \
  as_tenant apply -f - < <(test_pod forged "  annotations:
    gvirtus.io/backend: \"$mine:9999\"
    gvirtus.io/backend-pod: \"$system_ns/$assigned\"" "")
# ... and on a labelled pod the webhook honours a named backend only when it knows it and
# it can take the pod, and then writes the backend pod itself.
refused "create a GVirtuS pod that names an address that is no backend" "is not a known GVirtuS backend" \
  as_tenant apply -f - < <(test_pod nowhere '  labels: {gvirtus.io/enabled: "true"}
  annotations: {gvirtus.io/backend: "10.0.0.1:9999"}' "")
test_pod chooser '  labels: {gvirtus.io/enabled: "true"}
  annotations:
    gvirtus.io/backend: "'"$other:9999"'"
    gvirtus.io/backend-pod: "'"$system_ns/$assigned"'"' "" | as_tenant apply -f - >/dev/null
chosen_pod=$(field chooser '{.metadata.annotations.gvirtus\.io/backend-pod}')
[ "$chosen_pod" = "$system_ns/$other_pod" ] &&
  ok "a forged gvirtus.io/backend-pod is replaced by the pod that owns the named backend ($chosen_pod)" ||
  bad "chooser's backend-pod: \"$chosen_pod\", not $system_ns/$other_pod"
plain_ip=$(field plain '{.status.podIP}')
for backend in "${backends[@]}"; do
  listed "${backend% *}" "$plain_ip" && bad "${backend% *} lists the plain pod" || ok "${backend% *} does not list the plain pod"
done

say "the webhook's port: only the API server (overlays/webhook-networkpolicy)"
if [ "${E2E_NETWORK_POLICY:-0}" = 1 ]; then
  # The address of a webhook pod that is not being deleted.
  webhook_ip() {
    k get pods -n "$system_ns" -l app.kubernetes.io/name=gvirtus-webhook -o json |
      jq -r '[.items[] | select(.metadata.deletionTimestamp == null) | .status.podIP // empty][0] // empty'
  }
  result=$(probe own "$(webhook_ip)" 8443)
  [ "$result" = closed ] && ok "without the policy a tenant's pod connects to the webhook's port 8443" ||
    bad "own to the webhook's port without the policy: $result"
  # Where the API server calls the webhook from: here a host process, reaching the pods
  # through the node containers from the host's address on their network.
  api_source=$(ip -4 route get "$(webhook_ip)" | sed -n 's/.* src \([0-9.]*\).*/\1/p')
  repo=$(cd "$(dirname "$0")/../../../.." && pwd)
  sed -e "s#192.0.2.0/24#$api_source/32#" -e "s/namespace: gvirtus-system/namespace: $system_ns/" \
    "$repo/overlays/webhook-networkpolicy/networkpolicy.yaml" | k apply -f - >/dev/null &&
    ok "the overlay's NetworkPolicy, with the API server's address $api_source/32" ||
    bad "the overlay's NetworkPolicy was not applied"
  # The agent judges new connections only, and the API server keeps its own to the webhook
  # open: new webhook pods make it open new ones, which the policy judges.
  if k rollout restart deployment/gvirtus-webhook -n "$system_ns" >/dev/null &&
    k rollout status deployment/gvirtus-webhook -n "$system_ns" --timeout="${timeout_s}s" >/dev/null; then
    ok "the webhook restarted under the policy"
  else
    bad "the webhook did not restart within ${timeout_s}s"
  fi
  webhook_dropped() { [ "$(probe own "$(webhook_ip)" 8443)" = dropped ]; }
  eventually "a tenant's pod can no longer reach the webhook's port" webhook_dropped || true
  # The API server still reaches it: a server-side dry run is admitted by the webhook
  # (failurePolicy Fail: were the webhook cut off, the create would fail), and mutated: given
  # a backend, or the gate of a pod that waits for one.
  if out=$(test_pod np-dry-run '  labels: {gvirtus.io/enabled: "true"}' "" |
    as_tenant create --dry-run=server -f - \
      -o 'jsonpath={.metadata.annotations.gvirtus\.io/backend}{.spec.schedulingGates[*].name}' 2>&1) &&
    [ -n "$out" ]; then
    ok "the API server still calls the webhook: a GVirtuS pod is admitted, given $out"
  else
    bad "with the policy, admission fails: $out"
  fi
  k delete networkpolicy gvirtus-webhook -n "$system_ns" --ignore-not-found >/dev/null 2>&1 || true
fi

say "edits the admission policies refuse"
refused "label the plain pod gvirtus.io/enabled=true" "gvirtus.io/enabled" \
  as_tenant label pod plain -n "$test_ns" gvirtus.io/enabled=true
refused "point own at the other backend" "gvirtus.io/" \
  as_tenant annotate pod own -n "$test_ns" "gvirtus.io/backend=$other:9999" --overwrite
refused "make own look like a heavy GPU user" "gvirtus.io/" \
  as_tenant annotate pod own -n "$test_ns" gvirtus.io/gpu-memory=80Gi --overwrite
refused "write gvirtus.io/peers on a backend pod" "forbidden" \
  as_tenant annotate pod "$assigned" -n "$system_ns" "gvirtus.io/peers=$plain_ip" --overwrite
[ "$(field own '{.metadata.annotations.gvirtus\.io/backend}')" = "$mine:9999" ] &&
  ok "own still names its backend $mine:9999" || bad "own's backend changed"

say "GVirtuS pods that would escape the count or the session check"
refused "a GVirtuS pod that asks for nvidia.com/gpu: 0 (uncounted by the quota)" "nvidia.com/gpu below 1" \
  as_tenant apply -f - < <(test_pod zero-gpus '  labels: {gvirtus.io/enabled: "true"}' \
    '      resources: {limits: {nvidia.com/gpu: "0"}}')
# On the host network a pod's address is its node's: listed as a peer, it would let every
# process of that node through the session check.
refused "a host-network GVirtuS pod" "cannot use the host network" \
  as_tenant apply -f - < <(test_pod host-net '  labels: {gvirtus.io/enabled: "true"}' "" |
    sed 's/^spec:$/spec:\n  hostNetwork: true/')

say "quota: a GPU share still counts against nvidia.com/gpu where KAI does not schedule the pod"
# own and chooser hold one GPU each: room for one more.
k create quota gpus -n "$test_ns" --hard=requests.nvidia.com/gpu=3 >/dev/null
quota_counts() { [ -n "$(jp resourcequota gpus -n "$test_ns" -o 'jsonpath={.status.used.requests\.nvidia\.com/gpu}')" ]; }
eventually "the quota counts the namespace's GPUs" quota_counts
share_pod() {
  test_pod "$1" '  labels: {gvirtus.io/enabled: "true"}
  annotations: {gpu-fraction: "0.5"}' ""
}
if out=$(share_pod share-1 | as_tenant apply -f - 2>&1); then
  limit=$(field share-1 '{.spec.containers[0].resources.limits.nvidia\.com/gpu}')
  [ "$limit" = 1 ] && ok "share-1 (gpu-fraction 0.5) keeps nvidia.com/gpu: 1" || bad "share-1 limit: \"$limit\""
else
  bad "share-1 refused: $out"
fi
refused "a fourth GPU pod in a namespace with a quota of 3" "exceeded quota" \
  as_tenant apply -f - < <(share_pod share-2)

# A node taken over: whoever holds its kubelet's client certificate, or the tokens of the
# pods on it, tries to make it a backend so that tenants' CUDA traffic comes to it.
node=$(field own '{.spec.nodeName}')
if container=$(node_container "$node"); then
  say "a node taken over ($node): its kubelet's own certificate and its labeler's token"
  creds=$(mktemp -d)
  docker exec "$container" cat /etc/kubernetes/pki/ca.crt >"$creds/ca.crt"
  docker exec "$container" cat /etc/kubernetes/pki/kubelet.crt >"$creds/kubelet.crt"
  docker exec "$container" cat /etc/kubernetes/pki/kubelet.key >"$creds/kubelet.key"
  server=$(k config view --minify -o jsonpath='{.clusters[0].cluster.server}')
  as_node() {
    kubectl --kubeconfig=/dev/null --server="$server" --certificate-authority="$creds/ca.crt" \
      --client-certificate="$creds/kubelet.crt" --client-key="$creds/kubelet.key" --request-timeout=30s "$@"
  }
  labeler=$(jp pods -n "$system_ns" -l app.kubernetes.io/component=labeler \
    --field-selector "spec.nodeName=$node" -o 'jsonpath={.items[0].metadata.uid}')
  # The token the kubelet wrote for the labeler's pod, read where the node keeps it.
  token=$(docker exec "$container" sh -c "cat /var/lib/kubelet/pods/$labeler/volumes/kubernetes.io~projected/*/token" 2>/dev/null || true)
  as_labeler() {
    kubectl --kubeconfig=/dev/null --server="$server" --certificate-authority="$creds/ca.crt" \
      --token="$token" --request-timeout=30s "$@"
  }
  opted=$(jp node "$node" -o 'jsonpath={.metadata.labels.gvirtus\.io/backend\.allowed}')
  [ "$(as_node auth whoami -o 'jsonpath={.status.userInfo.username}' 2>&1)" = "system:node:$node" ] &&
    ok "the kubelet's certificate is system:node:$node" || bad "the kubelet's certificate is not system:node:$node"
  refused "$node (its kubelet) opts itself in as a backend" "may not opt its node in as a GVirtuS backend" \
    as_node label node "$node" gvirtus.io/backend.allowed=true gvirtus.io/gpu.present=true --overwrite
  # A kubelet may patch its Node's status but not read it, so no kubectl: one PATCH.
  # No --fail: the reply is printed either way, the Node (allowed) or a Status (refused).
  status_reply=$(curl -sS --max-time 30 --cacert "$creds/ca.crt" --cert "$creds/kubelet.crt" \
    --key "$creds/kubelet.key" -X PATCH -H 'Content-Type: application/merge-patch+json' \
    --data '{"metadata": {"labels": {"gvirtus.io/backend.allowed": "true"}}}' \
    "$server/api/v1/nodes/$node/status" 2>&1)
  if grep -q "may not opt its node in as a GVirtuS backend" <<<"$status_reply"; then
    ok "$node (its kubelet) through its status: refused: $(grep -o 'may not opt[^"]*' <<<"$status_reply" | head -n 1)"
  else
    bad "$node (its kubelet) through its status: $(head -c 300 <<<"$status_reply")"
  fi
  if [ -n "$token" ]; then
    refused "$node (its labeler's token) opts itself in as a backend" "refused: gvirtus.io/backend.allowed" \
      as_labeler label node "$node" gvirtus.io/backend.allowed=true --overwrite
  else
    bad "no token of the labeler's pod $labeler on $node"
  fi
  [ "$(jp node "$node" -o 'jsonpath={.metadata.labels.gvirtus\.io/backend\.allowed}')" = "$opted" ] &&
    ok "$node's gvirtus.io/backend.allowed is still \"$opted\"" || bad "$node's gvirtus.io/backend.allowed changed"
  rm -rf "$creds"
fi

# The webhook taken over (it parses what any pod sends to its port): the token its pod
# holds, read where its node keeps it, tries to widen the webhook's reach.
# (A here-string ends the line: jp's value has no newline, read fails on a line without
# one, and the scenario runs with -e.)
webhook_pod=$(jp pods -n "$system_ns" -l app.kubernetes.io/name=gvirtus-webhook \
  -o 'jsonpath={.items[0].metadata.uid} {.items[0].spec.nodeName}')
read -r webhook_uid webhook_node <<<"$webhook_pod"
if [ -n "${webhook_node:-}" ] && container=$(node_container "$webhook_node"); then
  say "the webhook taken over: its pod's token, from $webhook_node"
  creds=$(mktemp -d)
  docker exec "$container" cat /etc/kubernetes/pki/ca.crt >"$creds/ca.crt"
  token=$(docker exec "$container" sh -c "cat /var/lib/kubelet/pods/$webhook_uid/volumes/kubernetes.io~projected/*/token" 2>/dev/null || true)
  server=$(k config view --minify -o jsonpath='{.clusters[0].cluster.server}')
  as_webhook() {
    kubectl --kubeconfig=/dev/null --server="$server" --certificate-authority="$creds/ca.crt" \
      --token="$token" --request-timeout=30s "$@"
  }
  if [ -n "$token" ]; then
    # One patch would send it every Secret created in the cluster. (A PATCH alone: kubectl
    # patch would first GET the object, which the token may not either.)
    widen='[{"op":"add","path":"/webhooks/0/rules/-","value":{"apiGroups":[""],"apiVersions":["v1"],"operations":["CREATE"],"resources":["secrets"]}}]'
    reply=$(curl -sS --max-time 30 --cacert "$creds/ca.crt" -H "Authorization: Bearer $token" -X PATCH \
      -H 'Content-Type: application/json-patch+json' --data-binary "$widen" \
      "$server/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/gvirtus-webhook" |
      jq -r 'if .kind == "Status" then .message else .kind end' 2>&1)
    if grep -q 'cannot patch resource "mutatingwebhookconfigurations"' <<<"$reply"; then
      ok "the webhook's token widens its own rules to Secrets: refused: $(grep -o 'cannot patch.*' <<<"$reply" | cut -c1-140)"
    else
      bad "the webhook's token widens its own rules to Secrets: $reply"
    fi
    refused "the webhook's token asks for the backend shim's token (a service-account-token Secret)" \
      'cannot create resource "secrets"' as_webhook create -n "$system_ns" -f - <<'SECRET'
apiVersion: v1
kind: Secret
metadata: {name: stolen-token, annotations: {kubernetes.io/service-account.name: gvirtus-backend}}
type: kubernetes.io/service-account-token
SECRET
    # What its RBAC allows (patch of any pod) the policy gvirtus-webhook-pods narrows to
    # what a release writes.
    # webhook_patch WHAT EXPECTED POD BODY: a strategic merge patch of POD with its token.
    webhook_patch() {
      local reply
      reply=$(curl -sS --max-time 30 --cacert "$creds/ca.crt" -H "Authorization: Bearer $token" -X PATCH \
        -H 'Content-Type: application/strategic-merge-patch+json' --data-binary "$4" \
        "$server/api/v1/namespaces/$test_ns/pods/$3" |
        jq -r 'if .kind == "Status" then .message else .kind end' 2>&1)
      [[ $reply == *"$2"* ]] && ok "$1: refused: ${reply##*denied request: }" || bad "$1: $reply"
    }
    webhook_patch "the webhook's token annotates a pod that is not a GVirtuS pod" \
      "may change only GVirtuS pods" plain '{"metadata":{"annotations":{"gvirtus.io/backend":"10.0.0.1:9999"}}}'
    webhook_patch "the webhook's token swaps the image of a GVirtuS pod" \
      "not its containers, images" own '{"spec":{"containers":[{"name":"app","image":"evil.example/app:1"}]}}'
    rules=$(jp mutatingwebhookconfiguration gvirtus-webhook -o 'jsonpath={.webhooks[*].rules[*].resources}')
    grep -q secrets <<<"$rules" && bad "the webhook's rules name secrets: $rules" ||
      ok "the webhook's rules are unchanged ($rules)"
  else
    bad "no token of the webhook's pod $webhook_uid on $webhook_node"
  fi
  rm -rf "$creds"
fi
finish
