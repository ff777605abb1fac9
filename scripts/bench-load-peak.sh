#!/usr/bin/env bash
# parapetd's memory around its load: VmHWM (peak) and VmRSS in KiB when
# ready, and after its first attach (which loads the eBPF program), with
# the load in a child process (the default) and in parapetd itself
# (--load-in-process), alternating, ROUNDS each. docs/benchmarks.md §63.
# Usage (root): scripts/bench-load-peak.sh PARAPETD [ROUNDS]
set -euo pipefail
PARAPETD=$(realpath "$1")
ROUNDS=${2:-5}
NS=plpeak-$$
ip netns add "$NS"
ip netns exec "$NS" ip link set lo up
WORK=$(mktemp -d)
cleanup() { ip netns del "$NS" 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

status() { awk -v f="$2:" '$1 == f { print $2 }' "/proc/$1/status"; }

one() { # MODE EXTRA-FLAGS...
    local mode=$1 dir pid
    shift
    dir=$(mktemp -d -p "$WORK")
    # network namespace only: the pins go to the host's bpffs
    nsenter --net="/run/netns/$NS" "$PARAPETD" --socket "$dir/sock" --state-dir "$dir/state" \
        --pin-dir "/sys/fs/bpf/plpeak-$$" --no-fsync "$@" 2>"$dir/log" &
    pid=$!
    for _ in $(seq 1 600); do [ -S "$dir/sock" ] && break; sleep 0.05; done
    sleep 0.2
    local hwm0 rss0
    hwm0=$(status "$pid" VmHWM); rss0=$(status "$pid" VmRSS)
    python3 - "$dir/sock" <<'EOF'
import json, socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
s.sendall((json.dumps({"cmd": "attach", "iface": "lo", "hook": "xdp", "mode": "skb"}) + "\n").encode())
buf = b""
while not buf.endswith(b"\n"):
    chunk = s.recv(65536)
    if not chunk:
        break
    buf += chunk
r = json.loads(buf)
assert r.get("ok"), r
EOF
    echo "$mode ready_hwm=$hwm0 ready_rss=$rss0 loaded_hwm=$(status "$pid" VmHWM) loaded_rss=$(status "$pid" VmRSS)"
    kill -9 "$pid"; wait "$pid" 2>/dev/null || true
    nsenter --net="/run/netns/$NS" "$PARAPETD" --socket "$dir/sock" --state-dir "$dir/state" \
        --pin-dir "/sys/fs/bpf/plpeak-$$" --remove-pinned 2>/dev/null
}

for r in $(seq 1 "$ROUNDS"); do
    one child
    one in-process --load-in-process
done
