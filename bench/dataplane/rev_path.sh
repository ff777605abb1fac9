#!/usr/bin/env bash
# The per-packet price of the reverse-path check in the kernel dataplane
# (docs/benchmarks.md §75): the same 11-rule prerouting chain with its last
# rule `fib saddr . iif oif missing drop` (or `fib saddr oif missing
# drop`) or, as the baseline, `udp dport 30 drop`, timed at XDP and tc on
# 64 UDP datagrams from sources routed back through the input interface
# (none dropped), in a namespace made for it (r0 10.81.0.1/24, r1
# 10.82.0.1/24, 10.83.0.0/24 through r1; test runs report r0 as the input
# interface, --iif), baseline and check alternating, then once each with
# the stage profile. Needs root; PARAPET=path/to/parapet.
set -euo pipefail
cd "$(dirname "$0")/../.."
P=$(realpath "${PARAPET:-target/release/parapet}")
D=$(mktemp -d)
NS=pp-bench-rpath-$$
cleanup() { ip netns del "$NS" 2>/dev/null || true; rm -rf "$D"; }
trap cleanup EXIT
ip netns add "$NS"
ip -n "$NS" link set lo up
for i in 0 1; do
    ip -n "$NS" link add r$i type veth peer name r${i}p
    ip -n "$NS" link set r$i up
    ip -n "$NS" link set r${i}p up
    ip -n "$NS" addr add 10.8$((i + 1)).0.1/24 dev r$i
done
ip -n "$NS" route add 10.83.0.0/24 dev r1
python3 - "$D" <<'PY'
import struct, sys
d = sys.argv[1]
head = ["table inet t {", "\tchain pre {",
        "\t\ttype filter hook prerouting priority -300; policy accept;"] + [
    f"\t\tudp dport {1000 + i} drop" for i in range(10)]
for name, last in [("plain", "udp dport 30 drop"),
                   ("iif", "fib saddr . iif oif missing drop"),
                   ("any", "fib saddr oif missing drop")]:
    with open(f"{d}/{name}.nft", "w") as f:
        f.write("\n".join(head + [f"\t\t{last}", "\t}", "}"]) + "\n")
def csum(b):
    s = sum((b[i] << 8) + b[i + 1] for i in range(0, len(b), 2))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff
out = struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1)
for i in range(64):
    udp = struct.pack("!HHHH", 40000 + i, 22, 8 + 18, 0) + bytes(18)
    ip = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 1, 0, 64, 17, 0,
                               bytes([10, 81, 0, i + 2]), bytes([10, 81, 0, 1])))
    ip[10:12] = struct.pack("!H", csum(bytes(ip)))
    f = bytes([2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 8, 0]) + bytes(ip) + udp
    out += struct.pack("<IIII", 0, 0, len(f), len(f)) + f
open(f"{d}/udp.pcap", "wb").write(out)
PY
bench() { ip netns exec "$NS" "$P" bench dataplane "$@" --chain t/pre --iif r0 --sample 64; }
for hook in xdp tc; do
    for round in 1 2; do
        for k in plain iif any; do
            echo "== $hook $k, round $round"
            bench "$D/$k.nft" "$D/udp.pcap" --hook $hook
        done
    done
done
for k in plain iif; do
    echo "== xdp $k, stages"
    bench "$D/$k.nft" "$D/udp.pcap" --stages
done
