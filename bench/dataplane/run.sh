#!/usr/bin/env bash
# Kernel-side cost per packet of parapet's eBPF program (BPF_PROG_TEST_RUN,
# JIT on): nf-HiPAC's worst-case series 25…25,600 and ClassBench sets.
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
  done
done
if [ -d "$DATA" ]; then
  for s in acl1_10k fw1_10k ipc1_10k acl1_100k fw1_100k ipc1_100k; do
    [ -f "$DATA/$s.gz" ] || continue
    trace="$DATA/${s}_trace.gz"; [ -f "$trace" ] || trace="$DATA/${s%_*}_10k_trace.gz"
    $P bench dataplane "$DATA/$s.gz" "$trace" --hook xdp --sample 256 --repeat 100 --runs 7 --json \
      | sed "s/^{/{\"set\":\"$s\",/" >> "$OUT/results.jsonl" || echo "{\"set\":\"$s\",\"error\":\"failed\"}" >> "$OUT/results.jsonl"
  done
fi
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/machine.txt"
python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
rows = [json.loads(l) for l in open(f"{out}/results.jsonl") if l.strip()]
lines = ["| set | hook | rules | engine | image KiB | ns/packet median [min–max] | Mpps (1 core) |", "| --- | --- | ---: | --- | ---: | ---: | ---: |"]
for r in rows:
    if "error" in r:
        lines.append(f"| {r['set']} | | | failed | | | |")
        continue
    lines.append(f"| {r['set']} | {r['hook']} | {r['rules']} | {r['engine']} | {r['image_bytes']/1024:.0f} | {r['ns_per_packet']:.0f} [{r['ns_per_packet_min']:.0f}–{r['ns_per_packet_max']:.0f}] | {1e3/r['ns_per_packet']:.2f} |")
for hook in ("xdp", "tc"):
    wc = [r for r in rows if r.get("set") == "worst-case" and r.get("hook") == hook]
    if len(wc) >= 2:
        lines.append("")
        lines.append(f"Flatness at {hook}: ns/packet at {wc[-1]['rules']-1} rules / at {wc[0]['rules']-1} rules = {wc[-1]['ns_per_packet']/wc[0]['ns_per_packet']:.2f} (1.00 = flat; the target is a rate ≥ 0.8× the 25-rule rate, i.e. this ≤ 1.25)")
open(f"{out}/report.md", "w").write("\n".join(lines) + "\n\n" + open(f"{out}/machine.txt").read())
print("\n".join(lines))
PY
