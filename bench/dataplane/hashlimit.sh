#!/bin/sh
# The cost of a -m hashlimit condition at XDP (docs/benchmarks.md §21): one
# UDP rule without and with a hashlimit (srcip,dstport keys), interleaved
# over ROUNDS rounds, `parapet bench dataplane --hook xdp --json` each.
# Usage (root): bench/dataplane/hashlimit.sh [PARAPET] [ROUNDS]
set -eu
P=${1:-target/release/parapet}
ROUNDS=${2:-2}
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
printf '*filter\n:INPUT DROP [0:0]\n-A INPUT -p udp -m udp --dport 53 -j ACCEPT\nCOMMIT\n' >"$D/plain.v4"
printf '*filter\n:INPUT DROP [0:0]\n-A INPUT -p udp -m udp --dport 53 -m hashlimit --hashlimit-upto 1000000/sec --hashlimit-burst 5 --hashlimit-mode srcip,dstport --hashlimit-name bench -j ACCEPT\nCOMMIT\n' >"$D/hashlimit.v4"
i=0
while [ $i -lt 256 ]; do
	echo "$((167772161 + i)) 167772162 $((1000 + i)) 53 17"
	i=$((i + 1))
done >"$D/t.trace"
r=1
while [ $r -le "$ROUNDS" ]; do
	for rules in plain hashlimit; do
		printf '%s round %s load %s\t' "$rules" "$r" "$(cut -d' ' -f1 /proc/loadavg)"
		"$P" bench dataplane "$D/$rules.v4" "$D/t.trace" --hook xdp --json
	done
	r=$((r + 1))
done
