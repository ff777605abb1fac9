#!/usr/bin/env bash
# The per-packet price of -m string in the kernel dataplane
# (docs/benchmarks.md §72): the same 11-rule chain with its last rule
# searching the datagram for "needle" (--algo bm) or, as the baseline,
# matching port 30, timed at XDP on 64 UDP datagrams to port 53 that
# do not hold the pattern (the search runs to the end: the worst case
# for a miss), of 64, 512 and 1,400 bytes; and an adversarial chain
# (pattern "aaaaaaab" over 1,400 bytes of "a": the search backs up at
# every byte). Baseline and string chains alternate; then once each
# with the stage profile. Needs root; PARAPET=path/to/parapet.
set -euo pipefail
cd "$(dirname "$0")/../.."
P=${PARAPET:-target/release/parapet}
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
python3 - "$D" <<'PY'
import struct, sys
d = sys.argv[1]
head = ["*filter", ":INPUT ACCEPT [0:0]"] + [
    f"-A INPUT -p udp -m udp --dport {1000 + i} -j DROP" for i in range(10)]
for name, last in [("plain", "-m udp --dport 30"),
                   ("string", "-m string --algo bm --string needle"),
                   ("adversarial", "-m string --algo kmp --string aaaaaaab")]:
    with open(f"{d}/{name}.rules", "w") as f:
        f.write("\n".join(head + [f"-A INPUT -p udp {last} -j DROP", "COMMIT"]) + "\n")
def csum(b):
    s = sum((b[i] << 8) + b[i + 1] for i in range(0, len(b), 2))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff
def pcap(name, size, fill):
    out = struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1)
    for i in range(64):
        payload = (fill * size)[: size - 28]
        udp = struct.pack("!HHHH", 40000 + i, 53, 8 + len(payload), 0) + payload
        ip = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 1, 0, 64, 17, 0,
                                   bytes([10, 0, 0, i + 1]), bytes([10, 0, 0, 200])))
        ip[10:12] = struct.pack("!H", csum(bytes(ip)))
        f = bytes([2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 8, 0]) + bytes(ip) + udp
        out += struct.pack("<IIII", 0, 0, len(f), len(f)) + f
    open(f"{d}/{name}.pcap", "wb").write(out)
for size in (64, 512, 1400):
    pcap(f"udp{size}", size, b"GET /index.html HTTP/1.1 nee")
pcap("aaaa1400", 1400, b"a")
PY
for round in 1 2; do
    for size in 64 512 1400; do
        for k in plain string; do
            echo "== $k, $size bytes, round $round"
            "$P" bench dataplane "$D/$k.rules" "$D/udp$size.pcap" --sample 64
        done
    done
    for k in plain adversarial; do
        echo "== $k, 1400 bytes of a, round $round"
        "$P" bench dataplane "$D/$k.rules" "$D/aaaa1400.pcap" --sample 64
    done
done
for k in plain string; do
    echo "== $k, 1400 bytes, stages"
    "$P" bench dataplane "$D/$k.rules" "$D/udp1400.pcap" --sample 64 --stages
done
