# shellcheck shell=bash disable=SC2154  # ns, name, repo, pods: real-nodes-bench.sh's
# A lost node (issue 56, item 4), sourced by real-nodes-bench.sh with name, ns, repo,
# E2E_TEST_IMAGE, now_ms, percentile, frontends_deployment, answered_pods and
# tests/lib/log.sh: a Deployment's frontends hold sessions on both backends; the node
# container of the backend serving most of them is killed (its kubelet, containerd and
# every process of its pods with it: a real loss, where `docker pause` would freeze only
# the kubelet). Per frontend of that backend: from the kill to its replacement Running with
# a session its new backend answered. The bound it is held to: kube-controller-manager's
# --node-monitor-grace-period (the node marked NotReady, its pods not ready), then the
# webhook's --backend-lost-grace (the follower recreates them), then 30 s.
#   lost_node FRONTENDS

# flag_of PROCESS FLAG: a running control-plane process's flag value ("" when not given).
flag_of() { pgrep -a -f "$1" | tr ' ' '\n' | sed -n "s/^--$2=//p" | head -n 1; }

# seconds DURATION: Go's "3m20s" or "40s" in seconds.
seconds() {
  awk -v d="$1" 'BEGIN {s = 0; while (match(d, /^[0-9.]+[hms]/)) {v = substr(d, 1, RLENGTH - 1);
    u = substr(d, RLENGTH, 1); s += v * (u == "h" ? 3600 : u == "m" ? 60 : 1); d = substr(d, RLENGTH + 1)}
    print s}'
}

lost_node() {
  local frontends=$1 victim affected old grace lost_grace started not_ready="" t deadline
  say "node lost: $frontends frontends on both backends, the busier backend's node killed"
  frontends_deployment lostnode "$frontends"
  all_up() { [ "$(answered_pods lostnode | grep -c .)" = "$frontends" ]; }
  wait_until 180 "the $frontends frontends to connect" all_up || { say "they did not all connect"; return 1; }
  # Each frontend's backend node, from the backend pod the webhook gave it.
  declare -A node_of=()
  while read -r pod node; do node_of[$pod]=$node; done < <(kubectl -n gvirtus-system get pods \
    -l app.kubernetes.io/component=backend -o jsonpath='{range .items[*]}{.metadata.name} {.spec.nodeName}{"\n"}{end}')
  victim=$(kubectl -n "$ns" get pods -l bench=lostnode \
    -o jsonpath='{range .items[*]}{.metadata.annotations.gvirtus\.io/backend-pod}{"\n"}{end}' |
    while read -r pod; do echo "${node_of[${pod##*/}]:-}"; done | sort | uniq -c | sort -rn | awk 'NR == 1 {print $2}')
  affected=$(kubectl -n "$ns" get pods -l bench=lostnode \
    -o jsonpath='{range .items[*]}{.metadata.annotations.gvirtus\.io/backend-pod}{"\n"}{end}' |
    while read -r pod; do echo "${node_of[${pod##*/}]:-}"; done | grep -cx "$victim")
  old=$(answered_pods lostnode | cut -d' ' -f1)
  grace=$(flag_of kube-controller-manager node-monitor-grace-period)
  lost_grace=$(kubectl -n gvirtus-system get deployment gvirtus-webhook \
    -o jsonpath='{.spec.template.spec.containers[0].args}' | tr ',"[]' '\n' | sed -n 's/^--backend-lost-grace=//p')
  grace=${grace:-40s} lost_grace=${lost_grace:-1m30s}
  say "killing node $victim ($affected of $frontends frontends on its backend; node grace $grace, backend-lost grace $lost_grace)"
  declare -A back=()
  started=$(now_ms)
  docker kill "gvirtus-$name-$victim" >/dev/null
  deadline=$((SECONDS + $(seconds "$grace") + $(seconds "$lost_grace") + 240))
  while [ ${#back[@]} -lt "$affected" ] && [ $SECONDS -lt $deadline ]; do
    t=$(now_ms)
    if [ -z "$not_ready" ] && [ "$(kubectl get node "$victim" \
      -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" != True ]; then
      not_ready=$((t - started))
    fi
    while read -r uid _; do
      [ -n "$uid" ] && ! grep -qx "$uid" <<<"$old" && [ -z "${back[$uid]:-}" ] && back[$uid]=$((t - started))
    done < <(answered_pods lostnode)
    sleep 0.5
  done
  kubectl -n "$ns" delete deployment lostnode --wait=false >/dev/null
  [ ${#back[@]} -gt 0 ] || { say "none of the $affected frontends ran again"; return 1; }
  printf '\nnode lost: %s killed (docker kill), %d of %d frontends on its backend -> replacement Running and answered\n' \
    "$victim" "$affected" "$frontends"
  [ ${#back[@]} = "$affected" ] ||
    printf '  only %d of %d ran again within the bound + 210 s (the figures are theirs)\n' ${#back[@]} "$affected"
  printf '  frontends      p50 %6s ms   p95 %6s ms\n' "$(printf '%s\n' "${back[@]}" | percentile 50)" \
    "$(printf '%s\n' "${back[@]}" | percentile 95)"
  printf '  node NotReady after %s ms; bound: node grace %s + backend-lost grace %s + 30 s = %s s\n' \
    "${not_ready:-?}" "$grace" "$lost_grace" "$(($(seconds "$grace") + $(seconds "$lost_grace") + 30))"
}
