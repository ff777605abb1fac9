#!/usr/bin/env bash
# The stage profile (issue 15; docs/dataplane.md, "Profile", "Session 14:
# stage prices"): `parapet bench dataplane --stages` at XDP on 1 rule,
# nf-HiPAC's worst case at 25 and 25,600 rules, ClassBench acl1_10k and
# fw1_10k (when DATA has them), each repeated and --distinct: ns above the
# floor up to each stop and each stage's price, all in the same runs.
# Needs root. Writes OUT/results.jsonl and OUT/report.md.
#   bench/dataplane/stages.sh [OUT]
# P=path/to/parapet picks the binary (default: a release build of this
# checkout); ROUNDS=N repeats the whole series N times (default 1).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-bench/results/stages-$(date -u +%Y%m%dT%H%M%SZ)}
DATA=${DATA:-/work/shared/data/classbench}
ROUNDS=${ROUNDS:-1}
if [ -z "${P:-}" ]; then
  cargo build --release -q -p parapet
  P=$PWD/target/release/parapet
fi
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
{
  echo "kernel $(uname -r), $(nproc) CPUs, $(date -u +%FT%TZ), binary $P"
  echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$OUT/machine.txt"

# NAME RULES TRACE REPEATED-ARGS DISTINCT-ARGS
sets=()
printf '*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -p tcp --dport 9 -j DROP\nCOMMIT\n' > "$OUT/one.rules"
$P gen worst-case 25 --trace "$OUT/one.trace" --packets 256 > /dev/null
sets+=("one $OUT/one.rules $OUT/one.trace")
for n in 25 25600; do
  $P gen worst-case $n --trace "$OUT/wc$n.trace" --packets 256 > "$OUT/wc$n.rules"
  sets+=("wc$n $OUT/wc$n.rules $OUT/wc$n.trace")
done
for s in acl1_10k fw1_10k; do
  [ -f "$DATA/$s.gz" ] && sets+=("$s $DATA/$s.gz $DATA/${s}_trace.gz")
done

: > "$OUT/results.jsonl"
for round in $(seq 1 "$ROUNDS"); do
  for s in "${sets[@]}"; do
    read -r name rules trace <<< "$s"
    case $name in
      one|wc*) rep="--sample 64 --repeat 200"; dis="--sample 256" ;;
      *) rep="--sample 256 --repeat 100"; dis="--sample 4096" ;;
    esac
    # shellcheck disable=SC2086 # rep and dis are argument lists
    for form in "$rep" "$dis --distinct"; do
      $P bench dataplane "$rules" "$trace" --hook xdp $form --runs 7 --stages --json \
        | sed "s/^{/{\"set\":\"$name\",\"round\":$round,/" >> "$OUT/results.jsonl" \
        || echo "{\"set\":\"$name\",\"round\":$round,\"error\":\"failed\"}" >> "$OUT/results.jsonl"
    done
  done
done
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/machine.txt"
python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
rows = [json.loads(l) for l in open(f"{out}/results.jsonl") if l.strip()]
names = ["parse", "decide", "key", "descent", "merge", "full"]
head = ("| ruleset | form | round | floor | " + " | ".join(
    "finish" if n == "full" else n for n in names) + " | above floor |")
lines = ["Each stage's price: ns per packet, median over runs of (stop − the stop "
         "before it) [min–max]; above floor: the whole program, median [min–max].", "",
         head, "| --- | --- | ---: | ---: | " + " | ".join("---:" for _ in names) + " | ---: |"]
for r in rows:
    if "error" in r:
        lines.append(f"| {r['set']} | failed | {r['round']} |" + " |" * (len(names) + 2))
        continue
    st = {s["stage"]: s for s in r["stages"]}
    cells = [f"{st[n]['price_ns']:.0f} [{st[n]['price_ns_min']:.0f}–{st[n]['price_ns_max']:.0f}]" for n in names]
    lines.append(f"| {r['set']} | {r['mode']} | {r['round']} | {r['floor_ns_per_packet']:.0f} | " + " | ".join(cells)
                 + f" | {r['above_floor_ns']:.0f} [{r['above_floor_ns_min']:.0f}–{r['above_floor_ns_max']:.0f}] |")
open(f"{out}/report.md", "w").write("\n".join(lines) + "\n\n" + open(f"{out}/machine.txt").read())
print("\n".join(lines))
PY
