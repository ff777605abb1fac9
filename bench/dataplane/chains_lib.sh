# Sourced by the per-packet price scripts (strings.sh, tcp_options.sh):
# from the repository root, with PARAPET (default target/release/parapet)
# in P and a scratch directory D removed on exit, they write 11-rule
# chains whose last rule is the one priced, and pcaps of 64 frames.
set -euo pipefail
cd "$(dirname "$0")/../.."
P=${PARAPET:-target/release/parapet}
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT

# chain PROTO NAME LAST: $D/NAME.rules, ten rules dropping PROTO to ports
# 1000-1009, then `-A INPUT -p PROTO LAST -j DROP` (the rule priced).
chain() {
    local proto=$1 name=$2 last=$3 i
    {
        printf '%s\n' "*filter" ":INPUT ACCEPT [0:0]"
        for i in $(seq 1000 1009); do
            printf '%s\n' "-A INPUT -p $proto -m $proto --dport $i -j DROP"
        done
        printf '%s\n' "-A INPUT -p $proto $last -j DROP" "COMMIT"
    } >"$D/$name.rules"
}

# pcap NAME udp SIZE FILL: $D/NAME.pcap, 64 UDP datagrams of SIZE bytes
# (IP header on) to port 53, their payload FILL repeated.
# pcap NAME syn OPTIONS: 64 SYNs to port 22 with the option area OPTIONS
# (hex). Both from 10.0.0.(i+1):(40000+i) to 10.0.0.200.
pcap() {
    python3 - "$D/$1.pcap" "${@:2}" <<'PY'
import struct, sys
path, kind, args = sys.argv[1], sys.argv[2], sys.argv[3:]
def csum(b):
    s = sum((b[i] << 8) + b[i + 1] for i in range(0, len(b), 2))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff
def l4(i):
    if kind == "udp":
        size, fill = int(args[0]), args[1].encode()
        payload = (fill * size)[: size - 28]
        return 17, struct.pack("!HHHH", 40000 + i, 53, 8 + len(payload), 0) + payload
    opts = bytes.fromhex(args[0])
    return 6, struct.pack("!HHIIBBHHH", 40000 + i, 22, 1, 0, (5 + len(opts) // 4) << 4,
                          0x02, 65535, 0, 0) + opts
out = struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1)
for i in range(64):
    proto, seg = l4(i)
    ip = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(seg), 1, 0, 64, proto, 0,
                               bytes([10, 0, 0, i + 1]), bytes([10, 0, 0, 200])))
    ip[10:12] = struct.pack("!H", csum(bytes(ip)))
    f = bytes([2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 8, 0]) + bytes(ip) + seg
    out += struct.pack("<IIII", 0, 0, len(f), len(f)) + f
open(path, "wb").write(out)
PY
}

# timed CHAIN PCAP LABEL [FLAGS...]: `== CHAIN, LABEL`, then CHAIN timed
# on PCAP's 64 frames (`parapet bench dataplane --sample 64 FLAGS`).
timed() {
    echo "== $1, $3"
    "$P" bench dataplane "$D/$1.rules" "$D/$2.pcap" --sample 64 "${@:4}"
}
