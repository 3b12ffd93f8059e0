#!/usr/bin/env bash
# One backend process per pod (the shim's --sessions=per-pod, the default), on real nodes.
# The stand-in backend serves every connection of a process as a thread and shares its
# state among them, as GVirtuS does, so each check below fails when pods share a process
# (--sessions=shared): two GVirtuS pods on one backend are served by two processes; a
# second connection from a pod reaches that pod's process; what one pod writes cannot be
# read through the other's session; a crash of one pod's process closes only that pod's
# connections, the other goes on answering and the backend stays Ready. A backend process
# cannot read the shim's ServiceAccount token (the guard's Landlock fence). A pod's process
# cannot allocate past the pod's GPU memory share (the guard's cap).
# shellcheck source=../../scenarios/lib.sh
source "$(dirname "$0")/../../scenarios/lib.sh"
use_test_namespace
field() { jp pod "$1" -n "$test_ns" -o "jsonpath=$2"; }
running() { [ "$(field "$1" '{.status.phase}')" = Running ]; }

# One frontend more than there are backends, each holding a connection (pigeonhole: two
# of them share a backend, whatever the policy spreads).
backends=$(jp pods -n "$system_ns" -l app.kubernetes.io/component=backend -o 'jsonpath={.items[*].metadata.name}' | wc -w)
[ "$backends" -ge 1 ] || skip "no backend pod"
count=$((backends + 1))
# Each asks for 1 GiB of GPU memory: its backend process is capped at that share.
for i in $(seq 1 "$count"); do
  test_pod "iso-$i" '  labels: {gvirtus.io/enabled: "true"}
  annotations: {gvirtus.io/gpu-memory: 1Gi}' \
    '      command: ["gvirtus-frontend-standin"]' | k apply -f - >/dev/null
done
for i in $(seq 1 "$count"); do
  eventually "iso-$i runs" running "iso-$i" || finish
done
declare -A on_backend
a="" b=""
for i in $(seq 1 "$count"); do
  backend=$(field "iso-$i" '{.metadata.annotations.gvirtus\.io/backend-pod}')
  if [ -n "${on_backend[$backend]:-}" ]; then
    a=${on_backend[$backend]} b=iso-$i backend_pod=${backend#*/}
    break
  fi
  on_backend[$backend]=iso-$i
done
[ -n "$b" ] || { bad "no two of iso-1..$count share a backend"; finish; }
say "$a and $b share the backend $backend_pod"
# The frontends' own connections are open (their first ping answered) before any check.
answered() { k logs -n "$test_ns" "$1" 2>/dev/null | grep -q '^backend answered'; }
eventually "$a's frontend is connected" answered "$a" || finish
eventually "$b's frontend is connected" answered "$b" || finish

# standin POD LINE: a new connection from POD to its backend (the address its
# properties.json names), one line of the stand-in's protocol, and the reply.
standin() {
  # shellcheck disable=SC2016 # the script runs in the pod, with the pod's variables
  k exec -n "$test_ns" "$1" -- bash -c '
    config=${GVIRTUS_CONFIG:-${GVIRTUS_HOME:-/usr/local/gvirtus}/etc/properties.json}
    address=$(sed -nE "s/.*\"server_address\" *: *\"([0-9.]+)\".*/\1/p" "$config" | head -n 1)
    port=$(sed -nE "s/.*\"port\" *: *\"([0-9]+)\".*/\1/p" "$config" | head -n 1)
    exec 3<>"/dev/tcp/$address/$port" || exit 1
    printf "%s\n" "$1" >&3
    IFS= read -r -t 5 reply <&3 || exit 1
    printf "%s\n" "$reply"' _ "$2" 2>/dev/null
}

pid_a=$(standin "$a" "standin pid")
pid_b=$(standin "$b" "standin pid")
[[ $pid_a == pid\ * && $pid_b == pid\ * ]] || { bad "no pid from the backend: '$pid_a' '$pid_b'"; finish; }
[ "$pid_a" != "$pid_b" ] && ok "$a and $b are served by two processes ($pid_a, $pid_b)" ||
  bad "$a and $b share one backend process ($pid_a)"
again=$(standin "$a" "standin pid")
[ "$again" = "$pid_a" ] && ok "a second connection from $a reaches $a's process" ||
  bad "a second connection from $a reached '$again', not $pid_a"

[ "$(standin "$a" "standin put secret-of-$a")" = ok ] || bad "$a could not write its note"
got=$(standin "$a" "standin get")
[ "$got" = "got secret-of-$a" ] && ok "$a reads back what it wrote, over another connection" ||
  bad "$a read '$got'"
got=$(standin "$b" "standin get")
[ "$got" = "got " ] && ok "$b cannot read what $a wrote" || bad "$b read '$got' through its own session"

# A tenant that takes its backend process over finds the shim's ServiceAccount token fenced
# off (--hide-from-backend, Landlock), and the rest of the container as before. Where the
# container runtime's seccomp profile refuses Landlock, the shim must say so at its start.
token=/var/run/secrets/kubernetes.io/serviceaccount/token
shim_log=$(k logs -n "$system_ns" "$backend_pod" --all-containers 2>&1)
if grep -q "Landlock is not available" <<<"$shim_log"; then
  ok "Landlock refused on this node's runtime: $backend_pod warns that its backend processes can read the token"
  [ "$(standin "$b" "standin read $token")" != "cannot read: Permission denied" ] ||
    bad "the token is fenced off, though the shim says Landlock is not available"
elif grep -q "the backend processes cannot read the hidden folder" <<<"$shim_log"; then
  got=$(standin "$b" "standin read $token")
  [ "$got" = "cannot read: Permission denied" ] && ok "$b's backend process cannot read the shim's token ($got)" ||
    bad "$b's backend process reads the shim's token: '$got'"
  # Nor another pod's process of the same container, though they share a user.
  got=$(standin "$a" "standin read /proc/${pid_b#pid }/environ")
  [ "$got" = "cannot read: Permission denied" ] && ok "$a's process cannot read $b's process's environment ($got)" ||
    bad "$a's process reads /proc/${pid_b#pid }/environ of $b's: '$got'"
else
  bad "$backend_pod says nothing of the fence around its token"
fi
got=$(standin "$b" "standin read /etc/hostname")
[[ $got == read\ * ]] && ok "$b's backend process reads its other files (/etc/hostname: $got)" ||
  bad "$b's backend process cannot read /etc/hostname: '$got'"

# The pod's share (1 GiB), from the webhook's gvirtus.io/peer-memory through the shim to the
# guard in its process: 2 GiB are refused before they reach the CUDA runtime (the stand-in
# image's counts 16 GiB), half a GiB is not, and the runtime's total is the share.
a_ip=$(field "$a" '{.status.podIP}')
shares=$(jp pod "$backend_pod" -n "$system_ns" -o 'jsonpath={.metadata.annotations.gvirtus\.io/peer-memory}')
[[ ,$shares, == *",$a_ip=1024,"* ]] && ok "$backend_pod's gvirtus.io/peer-memory gives $a ($a_ip) 1024 MiB" ||
  bad "$backend_pod's gvirtus.io/peer-memory is '$shares', without $a_ip=1024"
got=$(standin "$a" "standin cuda malloc $((2 << 30))")
[ "$got" = "2 0" ] && ok "$a's process is refused 2 GiB past its 1 GiB share (cudaErrorMemoryAllocation)" ||
  bad "$a's 2 GiB allocation answered '$got'"
got=$(standin "$a" "standin cuda malloc $((1 << 29))")
[[ $got == 0\ * ]] && ok "$a's process is given half a GiB within its share" || bad "$a's half GiB answered '$got'"
got=$(standin "$a" "standin cuda meminfo")
[ "$got" = "0 $((1 << 29)) $((1 << 30))" ] && ok "$a's process sees its share as the GPU: $got" ||
  bad "$a's cudaMemGetInfo answered '$got'"

restarts_a=$(field "$a" '{.status.containerStatuses[0].restartCount}')
standin "$a" "standin crash" >/dev/null && bad "the crash answered"
[ "$(standin "$b" "standin pid")" = "$pid_b" ] && ok "$b's process still answers after $a's crashed" ||
  bad "$b's process is gone with $a's"
restarted() { [ "$(field "$a" '{.status.containerStatuses[0].restartCount}')" -gt "${restarts_a:-0}" ]; }
eventually "$a's frontend saw its connection closed (its container restarted)" restarted
b_restarts=$(field "$b" '{.status.containerStatuses[0].restartCount}')
[ "$b_restarts" = 0 ] && ok "$b's frontend kept its connection" || bad "$b's container restarted $b_restarts times"
fresh() {
  local pid
  pid=$(standin "$a" "standin pid") && [[ $pid == pid\ * ]] && [ "$pid" != "$pid_a" ]
}
eventually "$a is served by a fresh process" fresh
ready() {
  [ "$(jp pod "$backend_pod" -n "$system_ns" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}')" = True ]
}
ready && ok "the backend pod $backend_pod stayed Ready" || bad "the backend pod $backend_pod is not Ready"
k delete pods -n "$test_ns" --all --wait=true --timeout=60s >/dev/null 2>&1 || true
finish
