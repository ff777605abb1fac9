#!/usr/bin/env bash
# Kernel-side cost per packet of parapet's eBPF program (BPF_PROG_TEST_RUN,
# JIT on) against the floor (a program of the same type that only passes,
# run interleaved on the same packets): nf-HiPAC's worst-case series
# 25…25,600 at xdp and tc, the ends of it at the netfilter hooks, ClassBench
# sets; each repeated (one packet many times) and --distinct (one run per
# packet, cycling through the trace); --scale at XDP (one CPU vs two).
# Needs root. Writes OUT/results.jsonl and OUT/report.md.
#   bench/dataplane/run.sh [OUT]        (ClassBench sets need ../shared/data)
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-bench/results/dataplane-$(date -u +%Y%m%dT%H%M%SZ)}
P=target/release/parapet
DATA=../shared/data/classbench
mkdir -p "$OUT"
cargo build --release -q -p parapet
: > "$OUT/results.jsonl"
echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)" > "$OUT/machine.txt"
for hook in xdp tc; do
  for n in 25 50 100 200 400 800 1600 3200 6400 12800 25600; do
    $P gen worst-case "$n" --trace "$OUT/wc.trace" --packets 64 > "$OUT/wc.rules"
    $P bench dataplane "$OUT/wc.rules" "$OUT/wc.trace" --hook "$hook" --sample 64 --repeat 200 --runs 7 --json \
      | sed "s/^{/{\"set\":\"worst-case\",/" >> "$OUT/results.jsonl"
    case $n in 25|25600)
      $P bench dataplane "$OUT/wc.rules" "$OUT/wc.trace" --hook "$hook" --sample 64 --runs 7 --distinct --json \
        | sed "s/^{/{\"set\":\"worst-case\",/" >> "$OUT/results.jsonl" ;;
    esac
  done
done
for hook in input forward output; do
  for n in 25 25600; do
    $P gen worst-case "$n" --trace "$OUT/wc.trace" --packets 64 > "$OUT/wc.rules"
    $P bench dataplane "$OUT/wc.rules" "$OUT/wc.trace" --hook "$hook" --sample 64 --repeat 200 --runs 7 --json \
      | sed "s/^{/{\"set\":\"worst-case\",/" >> "$OUT/results.jsonl" \
      || echo "{\"set\":\"worst-case\",\"hook\":\"$hook\",\"error\":\"failed\"}" >> "$OUT/results.jsonl"
  done
done
$P gen worst-case 25 --trace "$OUT/wc.trace" --packets 64 > "$OUT/wc.rules"
$P bench dataplane "$OUT/wc.rules" "$OUT/wc.trace" --hook xdp --sample 64 --repeat 1000 --runs 7 --scale --json \
  | sed "s/^{/{\"set\":\"worst-case (scale)\",/" >> "$OUT/results.jsonl"
if [ -d "$DATA" ]; then
  for s in acl1_10k fw1_10k ipc1_10k acl1_100k fw1_100k ipc1_100k; do
    [ -f "$DATA/$s.gz" ] || continue
    trace="$DATA/${s}_trace.gz"; [ -f "$trace" ] || trace="$DATA/${s%_*}_10k_trace.gz"
    $P bench dataplane "$DATA/$s.gz" "$trace" --hook xdp --sample 256 --repeat 100 --runs 7 --json \
      | sed "s/^{/{\"set\":\"$s\",/" >> "$OUT/results.jsonl" || echo "{\"set\":\"$s\",\"error\":\"failed\"}" >> "$OUT/results.jsonl"
    $P bench dataplane "$DATA/$s.gz" "$trace" --hook xdp --sample 4096 --runs 7 --distinct --json \
      | sed "s/^{/{\"set\":\"$s\",/" >> "$OUT/results.jsonl" || echo "{\"set\":\"$s\",\"error\":\"failed\"}" >> "$OUT/results.jsonl"
  done
fi
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/machine.txt"
python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
rows = [json.loads(l) for l in open(f"{out}/results.jsonl") if l.strip()]
lines = ["| set | hook | mode | rules | engine | image KiB | ns/packet median [min–max] | floor | above floor [min–max] | Mpps (1 core) |", "| --- | --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |"]
for r in rows:
    if "error" in r:
        lines.append(f"| {r['set']} | {r.get('hook', '')} | | | failed | | | | | |")
        continue
    lines.append(f"| {r['set']} | {r['hook']} | {r['mode']} | {r['rules']} | {r['engine']} | {r['image_bytes']/1024:.0f} | {r['ns_per_packet']:.0f} [{r['ns_per_packet_min']:.0f}–{r['ns_per_packet_max']:.0f}] | {r['floor_ns_per_packet']:.0f} | {r['above_floor_ns']:.0f} [{r['above_floor_ns_min']:.0f}–{r['above_floor_ns_max']:.0f}] | {1e3/r['ns_per_packet']:.2f} |")
    if "scale_ratio" in r:
        lines.append(f"| | scale: {r['scale_pps_1cpu']/1e6:.2f} Mpps on one CPU, {r['scale_pps_2cpu']/1e6:.2f} on two = {r['scale_ratio']:.2f}x [{r['scale_ratio_min']:.2f}–{r['scale_ratio_max']:.2f}] | | | | | | | | |")
for hook in ("xdp", "tc"):
    wc = [r for r in rows if r.get("set") == "worst-case" and r.get("hook") == hook and r.get("mode") == "repeated"]
    if len(wc) >= 2:
        lines.append("")
        lines.append(f"Flatness at {hook}: ns/packet at {wc[-1]['rules']-1} rules / at {wc[0]['rules']-1} rules = {wc[-1]['ns_per_packet']/wc[0]['ns_per_packet']:.2f} (1.00 = flat; the target is a rate ≥ 0.8× the 25-rule rate, i.e. this ≤ 1.25); above the floor: {wc[0]['above_floor_ns']:.0f} → {wc[-1]['above_floor_ns']:.0f} ns")
open(f"{out}/report.md", "w").write("\n".join(lines) + "\n\n" + open(f"{out}/machine.txt").read())
print("\n".join(lines))
PY
