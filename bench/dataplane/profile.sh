#!/usr/bin/env bash
# Where parapet's eBPF program spends its time (issue 15): rerun after any
# change to bpf/ and compare OUT/profile.md with docs/dataplane.md "Profile".
#   bench/dataplane/profile.sh [OUT]          needs root; about 3 minutes
# For each ruleset (1 rule, nf-HiPAC worst case 25 and 25,600, ClassBench
# acl1_10k when ../shared/data is there):
#  1. `parapet bench dataplane` at xdp and tc, repeated and --distinct:
#     kernel-timed ns/packet against the floor (a program that only passes);
#  2. the program attached at XDP to a veth in a namespace this script
#     makes: xlated instructions per stage (BTF line info of `bpftool prog
#     dump xlated linum`), jited bytes, the verifier's processed insns;
#  3. real UDP traffic through it (bounded: PACKETS packets, 20 s at most)
#     with kernel.bpf_stats_enabled=1: run_time_ns / run_cnt, and perf's
#     cpu-clock samples under the program, by BPF function.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-bench/results/profile-$(date -u +%Y%m%dT%H%M%SZ)}
PACKETS=${PACKETS:-300000}
P=$PWD/target/release/parapet
PY=$PWD/bench/dataplane/profile.py
DATA=${DATA:-../shared/data/classbench}
NS_A=k15prof-a NS_B=k15prof-b
[ "$(id -u)" = 0 ] || { echo "profile.sh: needs root" >&2; exit 1; }
command -v bpftool >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bpftool >/dev/null
command -v perf >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq linux-perf >/dev/null || true
cargo build --release -q -p parapet
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
stats_before=$(sysctl -n kernel.bpf_stats_enabled)
cleanup() {
  [ -f "$OUT/run.pid" ] && $P stop "$OUT/run.pid" >/dev/null 2>&1 || true
  ip netns del $NS_A 2>/dev/null || true
  ip netns del $NS_B 2>/dev/null || true
  sysctl -qw kernel.bpf_stats_enabled="$stats_before"
}
trap cleanup EXIT
{
  echo "kernel $(uname -r), $(nproc) CPUs, $(date -u +%FT%TZ)"
  echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg) (measured while other work ran on the machine)"
} > "$OUT/machine.txt"

# the rulesets: NAME RULES TRACE
sets=()
printf '*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -p tcp --dport 9 -j DROP\nCOMMIT\n' > "$OUT/one.rules"
$P gen worst-case 25 --trace "$OUT/one.trace" --packets 256 > /dev/null
sets+=("one $OUT/one.rules $OUT/one.trace")
for n in 25 25600; do
  $P gen worst-case $n --trace "$OUT/wc$n.trace" --packets 256 > "$OUT/wc$n.rules"
  sets+=("wc$n $OUT/wc$n.rules $OUT/wc$n.trace")
done
[ -f "$DATA/acl1_10k.gz" ] && sets+=("acl1_10k $DATA/acl1_10k.gz $DATA/acl1_10k_trace.gz")

: > "$OUT/bench.jsonl"
for s in "${sets[@]}"; do
  read -r name rules trace <<< "$s"
  for hook in xdp tc; do
    $P bench dataplane "$rules" "$trace" --hook $hook --sample 64 --repeat 1000 --runs 5 --json \
      | sed "s/^{/{\"set\":\"$name\",/" >> "$OUT/bench.jsonl"
    $P bench dataplane "$rules" "$trace" --hook $hook --sample 4096 --runs 5 --distinct --json \
      | sed "s/^{/{\"set\":\"$name\",/" >> "$OUT/bench.jsonl"
  done
done

# the bed: NS_A (sender) -- veth -- NS_B (parapet at XDP)
ip netns add $NS_A; ip netns add $NS_B
ip link add k15prof0 netns $NS_A type veth peer name k15prof1 netns $NS_B
ip -n $NS_A addr add 10.199.0.1/24 dev k15prof0; ip -n $NS_B addr add 10.199.0.2/24 dev k15prof1
ip -n $NS_A link set k15prof0 up; ip -n $NS_B link set k15prof1 up; ip -n $NS_B link set lo up
sysctl -qw kernel.bpf_stats_enabled=1
for s in "${sets[@]}"; do
  read -r name rules trace <<< "$s"
  ip netns exec $NS_B $P run "$rules" --iface k15prof1 --background "$OUT/run.pid" > /dev/null
  id=$(bpftool prog show --json | python3 -c 'import json,sys; print(max(p["id"] for p in json.load(sys.stdin) if p.get("name")=="parapet_xdp"))')
  bpftool prog dump xlated id "$id" linum > "$OUT/$name.xlated.txt"
  bpftool prog dump jited id "$id" > "$OUT/$name.jited.txt" 2>/dev/null || true
  python3 "$PY" static "$OUT/$name.xlated.txt" > "$OUT/$name.static.json"
  python3 "$PY" info "$id" > "$OUT/$name.before.json"
  # UDP to ports 1..1024 (different paths through the image), bounded in
  # count and time; perf samples the whole machine meanwhile
  perf_pid=
  if command -v perf >/dev/null; then
    perf record -q -a -g -e cpu-clock -F 1999 -o "$OUT/$name.perf.data" -- sleep 20 > /dev/null 2>&1 & perf_pid=$!
    sleep 1
  fi
  timeout 20 ip netns exec $NS_A python3 - "$PACKETS" <<'SEND' || true
import socket, sys, time
n, s, t0 = int(sys.argv[1]), socket.socket(socket.AF_INET, socket.SOCK_DGRAM), time.monotonic()
for i in range(n):
    try:
        s.sendto(b"x" * 18, ("10.199.0.2", 1 + i % 1024))
    except OSError:
        pass
    if i % 4096 == 0 and time.monotonic() - t0 > 15:
        break
SEND
  python3 "$PY" info "$id" > "$OUT/$name.after.json"
  python3 - "$OUT/$name" <<'PY'
import json, sys
b, a = (json.load(open(f"{sys.argv[1]}.{w}.json")) for w in ("before", "after"))
a.update(run_time_ns=a["run_time_ns"] - b["run_time_ns"], run_cnt=a["run_cnt"] - b["run_cnt"])
json.dump(a, open(f"{sys.argv[1]}.traffic.json", "w"))
json.dump(a, open(f"{sys.argv[1]}.info.json", "w"))
PY
  if [ -n "$perf_pid" ]; then
    kill -INT $perf_pid 2>/dev/null || true
    wait $perf_pid 2>/dev/null || true
    # symbols resolve while the program is still loaded
    perf script -i "$OUT/$name.perf.data" 2>/dev/null > "$OUT/$name.perf.txt" || true
    ns=$(python3 -c 'import json,sys; t=json.load(open(sys.argv[1])); print(t["run_time_ns"]/max(t["run_cnt"],1))' "$OUT/$name.traffic.json")
    python3 "$PY" perf "$OUT/$name.perf.txt" "$ns" > "$OUT/$name.perf.json"
    rm -f "$OUT/$name.perf.data" "$OUT/$name.perf.txt"
  fi
  $P stop "$OUT/run.pid" > /dev/null
done
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/machine.txt"
python3 "$PY" report "$OUT"
