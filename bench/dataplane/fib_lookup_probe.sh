#!/usr/bin/env bash
# What bpf_fib_lookup answers for a reverse-path check (nft's `fib saddr .
# iif oif missing`): a tc program looks a source up as a destination with
# the ingress interface a0 as `ifindex`, run once by BPF_PROG_TEST_RUN
# (bpftool prog run) in a namespace of its own: a0 10.1.0.1/24, b0
# 10.2.0.1/24, 10.3.0.0/24 through b0, 10.4.0.0/24 unreachable, no default
# route; forwarding off, then on. Prints the helper's code * 1000 + the
# answer's ifindex (0 SUCCESS, 2 UNREACHABLE, 4 NOT_FWDED, 5 FWD_DISABLED,
# 7 NO_NEIGH). Needs root, clang and bpftool; docs/hooks.md, "Reverse path".
#   bench/dataplane/fib_lookup_probe.sh
set -euo pipefail
NS=parapet-fibprobe-$$
DIR=$(mktemp -d)
PIN=/sys/fs/bpf/parapet_fibprobe_$$
cleanup() { rm -rf "$DIR"; rm -f "$PIN"; ip netns del "$NS" 2>/dev/null || true; }
trap cleanup EXIT
cat > "$DIR/probe.bpf.c" <<'EOF'
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
SEC("tc")
int fib_probe(struct __sk_buff *skb)
{
	struct bpf_fib_lookup p;
	long rc;

	__builtin_memset(&p, 0, sizeof(p));
	p.family = 2; /* AF_INET */
	p.ifindex = IFINDEX;
	p.ipv4_dst = bpf_htonl(SRC);    /* the packet's source */
	p.ipv4_src = bpf_htonl(0x0a010001); /* its destination */
	rc = bpf_fib_lookup(skb, &p, sizeof(p), FLAGS);
	return rc < 0 ? 999999 : rc * 1000 + p.ifindex;
}
char LICENSE[] SEC("license") = "GPL";
EOF
ip netns add "$NS"
ip -n "$NS" link add a0 type veth peer name a1
ip -n "$NS" link add b0 type veth peer name b1
for d in lo a0 a1 b0 b1; do ip -n "$NS" link set "$d" up; done
ip -n "$NS" addr add 10.1.0.1/24 dev a0
ip -n "$NS" addr add 10.2.0.1/24 dev b0
ip -n "$NS" route add 10.3.0.0/24 dev b0
ip -n "$NS" route add unreachable 10.4.0.0/24
A0=$(ip netns exec "$NS" cat /sys/class/net/a0/ifindex)
B0=$(ip netns exec "$NS" cat /sys/class/net/b0/ifindex)
head -c 64 /dev/zero > "$DIR/pkt"
echo "kernel $(uname -r); a0 ifindex $A0, b0 ifindex $B0"
probe() { # SRC FLAGS LABEL
	clang -O2 -target bpf -I"/usr/include/$(uname -m)-linux-gnu" \
		-DIFINDEX="$A0" -DSRC="$1" -DFLAGS="$2" -c "$DIR/probe.bpf.c" -o "$DIR/probe.o"
	bpftool prog load "$DIR/probe.o" "$PIN" type classifier
	local id
	id=$(bpftool prog show pinned "$PIN" | sed -n '1s/:.*//p')
	printf '%-44s %s\n' "$3" "$(ip netns exec "$NS" bpftool prog run id "$id" data_in "$DIR/pkt" repeat 1 | grep -o 'Return value: [0-9]*')"
	rm -f "$PIN"
}
for fwd in 0 1; do
	ip netns exec "$NS" sysctl -qw net.ipv4.conf.all.forwarding=$fwd
	for flags in 0 6; do # 0: input lookup; 6: BPF_FIB_LOOKUP_OUTPUT | SKIP_NEIGH
		probe 0x0a010007 $flags "fwd $fwd flags $flags 10.1.0.7 (via a0)"
		probe 0x0a030007 $flags "fwd $fwd flags $flags 10.3.0.7 (via b0)"
		probe 0x0a040007 $flags "fwd $fwd flags $flags 10.4.0.7 (unreachable)"
		probe 0xc0000207 $flags "fwd $fwd flags $flags 192.0.2.7 (no route)"
		probe 0x0a020001 $flags "fwd $fwd flags $flags 10.2.0.1 (local)"
	done
done
