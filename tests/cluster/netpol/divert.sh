#!/bin/sh
# Hands the first packet of each new connection to kube-network-policies' queue, then
# runs the agent.
#
# Why this rule exists: the agent diverts those packets itself with an nftables `queue`
# statement, and this machine's kernel has none (CONFIG_NFT_QUEUE is not set: the
# agent's table is refused, it logs "syncing nftables rules" errors and keeps going).
# The kernel does have iptables' NFQUEUE target, which feeds the same netlink queue the
# agent reads, so the verdicts are still the agent's own.
#
# Like the agent's own rules: only new connections, in POSTROUTING (after Service DNAT,
# before SNAT, bridged pod-to-pod traffic included through br_netfilter), and not the
# node's own traffic (the agent skips root-owned node sockets so that the kubelet's
# probes and system daemons are never blocked). --queue-bypass: while no agent listens,
# packets pass, so a node whose agent is being restarted keeps its network.
set -eu
queue=${NFQUEUE_ID:-100}
rule="-m conntrack --ctstate NEW -m addrtype ! --src-type LOCAL -m comment --comment kube-network-policies -j NFQUEUE --queue-num $queue --queue-bypass"
# shellcheck disable=SC2086
iptables -t mangle -C POSTROUTING $rule 2>/dev/null || iptables -t mangle -A POSTROUTING $rule
echo "divert.sh: new connections to NFQUEUE $queue (iptables, mangle POSTROUTING)" >&2
exec /usr/local/bin/kube-network-policies --nfqueue-id="$queue" "$@"
