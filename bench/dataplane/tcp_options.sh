#!/usr/bin/env bash
# The per-packet price of --tcp-option in the kernel dataplane
# (docs/benchmarks.md §65): the same 11-rule chain with its last rule
# testing option kind 30 or, as the baseline, port 30, timed at XDP on
# 64 SYNs with a 20-byte option area (MSS, SACK permitted, timestamps,
# NOP, window scale), baseline and option chain alternating, then once
# each with the stage profile. Needs root; PARAPET=path/to/parapet.
set -euo pipefail
cd "$(dirname "$0")/../.."
P=${PARAPET:-target/release/parapet}
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
python3 - "$D" <<'PY'
import struct, sys
d = sys.argv[1]
head = ["*filter", ":INPUT ACCEPT [0:0]"] + [
    f"-A INPUT -p tcp -m tcp --dport {1000 + i} -j DROP" for i in range(10)]
for name, last in [("plain", "--dport 30"), ("opt", "--tcp-option 30")]:
    with open(f"{d}/{name}.rules", "w") as f:
        f.write("\n".join(head + [f"-A INPUT -p tcp -m tcp {last} -j DROP", "COMMIT"]) + "\n")
def csum(b):
    s = sum((b[i] << 8) + b[i + 1] for i in range(0, len(b), 2))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff
opts = bytes.fromhex("020405b40402080a000000010000000001030307")
out = struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1)
for i in range(64):
    tcp = struct.pack("!HHIIBBHHH", 40000 + i, 22, 1, 0, (5 + len(opts) // 4) << 4,
                      0x02, 65535, 0, 0) + opts
    ip = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 1, 0, 64, 6, 0,
                               bytes([10, 0, 0, i + 1]), bytes([10, 0, 0, 200])))
    ip[10:12] = struct.pack("!H", csum(bytes(ip)))
    f = bytes([2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 8, 0]) + bytes(ip) + tcp
    out += struct.pack("<IIII", 0, 0, len(f), len(f)) + f
open(f"{d}/syn.pcap", "wb").write(out)
PY
for round in 1 2; do
    for k in plain opt; do
        echo "== $k, round $round"
        "$P" bench dataplane "$D/$k.rules" "$D/syn.pcap" --sample 64
    done
done
for k in plain opt; do
    echo "== $k, stages"
    "$P" bench dataplane "$D/$k.rules" "$D/syn.pcap" --sample 64 --stages
done
