#!/usr/bin/env bash
# Two parapet binaries on the same rulesets, interleaved (issue 15's
# before/after): `parapet bench dataplane` at XDP on 1 rule, nf-HiPAC's
# worst case at 25 and 25,600 rules and ClassBench acl1_10k and fw1_10k
# (when DATA has them), repeated and --distinct; each round runs both
# binaries on each case back to back, the order alternating by round.
# Needs root. Writes OUT/results.jsonl and OUT/report.md.
#   bench/dataplane/before_after.sh BEFORE AFTER [OUT]     (ROUNDS=3)
set -euo pipefail
cd "$(dirname "$0")/../.."
BEFORE=$1 AFTER=$2
OUT=${3:-bench/results/before-after-$(date -u +%Y%m%dT%H%M%SZ)}
DATA=${DATA:-/work/shared/data/classbench}
ROUNDS=${ROUNDS:-3}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
{
  echo "kernel $(uname -r), $(nproc) CPUs, $(date -u +%FT%TZ)"
  echo "before: $BEFORE"; echo "after: $AFTER"
  echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$OUT/machine.txt"
sets=()
printf '*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -p tcp --dport 9 -j DROP\nCOMMIT\n' > "$OUT/one.rules"
$AFTER gen worst-case 25 --trace "$OUT/one.trace" --packets 256 > /dev/null
sets+=("one $OUT/one.rules $OUT/one.trace")
for n in 25 25600; do
  $AFTER gen worst-case $n --trace "$OUT/wc$n.trace" --packets 256 > "$OUT/wc$n.rules"
  sets+=("wc$n $OUT/wc$n.rules $OUT/wc$n.trace")
done
for s in acl1_10k fw1_10k; do
  [ -f "$DATA/$s.gz" ] && sets+=("$s $DATA/$s.gz $DATA/${s}_trace.gz")
done
: > "$OUT/results.jsonl"
for round in $(seq 1 "$ROUNDS"); do
  order="before after"; [ $((round % 2)) = 0 ] && order="after before"
  for s in "${sets[@]}"; do
    read -r name rules trace <<< "$s"
    case $name in
      one|wc*) rep="--sample 64 --repeat 200"; dis="--sample 256" ;;
      *) rep="--sample 256 --repeat 100"; dis="--sample 4096" ;;
    esac
    for form in "$rep" "$dis --distinct"; do
      for which in $order; do
        bin=$BEFORE; [ "$which" = after ] && bin=$AFTER
        # shellcheck disable=SC2086 # form is an argument list
        $bin bench dataplane "$rules" "$trace" --hook xdp $form --runs 7 --json \
          | sed "s/^{/{\"set\":\"$name\",\"bin\":\"$which\",\"round\":$round,/" >> "$OUT/results.jsonl" \
          || echo "{\"set\":\"$name\",\"bin\":\"$which\",\"round\":$round,\"error\":\"failed\"}" >> "$OUT/results.jsonl"
      done
    done
  done
done
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/machine.txt"
python3 - "$OUT" <<'PY'
import collections, json, statistics, sys
out = sys.argv[1]
rows = [json.loads(l) for l in open(f"{out}/results.jsonl") if l.strip()]
by = collections.defaultdict(list)
for r in rows:
    if "error" not in r:
        by[(r["set"], r["mode"], r["bin"])].append(r)
lines = ["ns above the floor: median of the rounds' medians [min–max over every run]; "
         "after/before per round in the last column.", "",
         "| ruleset | form | before | after | after − before | after/before by round |",
         "| --- | --- | ---: | ---: | ---: | --- |"]
seen = []
for (s, m, b) in by:
    if (s, m) not in seen:
        seen.append((s, m))
for s, m in seen:
    bef, aft = by.get((s, m, "before"), []), by.get((s, m, "after"), [])
    if not bef or not aft:
        continue
    def cell(rs):
        med = statistics.median(r["above_floor_ns"] for r in rs)
        return med, f"{med:.0f} [{min(r['above_floor_ns_min'] for r in rs):.0f}–{max(r['above_floor_ns_max'] for r in rs):.0f}]"
    bm, bc = cell(bef)
    am, ac = cell(aft)
    ratios = ", ".join(f"{a['above_floor_ns']/b['above_floor_ns']:.2f}"
                       for b, a in zip(sorted(bef, key=lambda r: r["round"]), sorted(aft, key=lambda r: r["round"])))
    lines.append(f"| {s} | {m} | {bc} | {ac} | {am - bm:+.0f} | {ratios} |")
open(f"{out}/report.md", "w").write("\n".join(lines) + "\n\n" + open(f"{out}/machine.txt").read())
print("\n".join(lines))
PY
