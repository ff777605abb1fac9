#!/usr/bin/env bash
# Lookup work per packet of two or more `parapet` binaries, counted by
# callgrind instead of timed: instructions, stores, D1 misses and branch
# mispredictions inside `FastPath::first_match_ids` (the batch path `bench
# classify` times), divided by the lookups made. Deterministic, so it can
# compare binaries on a machine too loaded for timings to mean anything;
# it says nothing about real cache latencies or the hardware prefetcher.
#   bench/classify/callgrind_ab.sh OUT SETS BIN...
#   e.g. bench/classify/callgrind_ab.sh /tmp/cg acl1_10k,fw1_10k,ipc1_10k old/parapet new/parapet
# Each (binary, set) is one valgrind run (~4-10 min under load; they run in
# parallel, two at a time). Needs ../shared/data/classbench.
set -euo pipefail
OUT=$1; SETS=$2; shift 2
DATA=$(cd "$(dirname "$0")/../.." && pwd)/../shared/data/classbench
mkdir -p "$OUT"
jobs=()
for s in ${SETS//,/ }; do
  for b in "$@"; do
    tag=$(basename "$(dirname "$b")")-$(basename "$b")
    jobs+=("$tag $s $b")
  done
done
run() {
  local tag=$1 s=$2 b=$3
  valgrind --tool=callgrind --cache-sim=yes --branch-sim=yes \
    --callgrind-out-file="$OUT/$tag-$s.out" --toggle-collect='*first_match_ids*' \
    "$b" bench classify "$DATA/$s.gz" "$DATA/${s}_trace.gz" --json --runs 5 \
    > "$OUT/$tag-$s.json" 2> "$OUT/$tag-$s.err"
}
i=0
for j in "${jobs[@]}"; do
  # shellcheck disable=SC2086
  run $j &
  i=$((i + 1))
  if [ $((i % 2)) -eq 0 ]; then wait; fi
done
wait
python3 - "$OUT" "$DATA" "${jobs[@]}" <<'PY'
import gzip, json, sys
out, data, jobs = sys.argv[1], sys.argv[2], [j.split()[:2] for j in sys.argv[3:]]
print("| set | binary | instructions | stores | D1 misses | mispredictions |")
print("| --- | --- | ---: | ---: | ---: | ---: |")
for tag, s in jobs:
    r = json.load(open(f"{out}/{tag}-{s}.json"))
    # The warm-up pass over the trace's keys, then `runs` runs of
    # `lookups_per_run` (under callgrind a pass takes > 100 ms: one pass).
    keys = sum(1 for l in gzip.open(f"{data}/{s}_trace.gz", "rt") if l.strip())
    lookups = keys + r["runs"] * r["lookups_per_run"]
    line = [l for l in open(f"{out}/{tag}-{s}.err") if "Collected" in l][0].split()[3:]
    ir, dr, dw, i1, d1r, d1w, *_rest = map(int, line)
    bc, bcm = int(line[9]), int(line[10])
    f = lambda x: f"{x / lookups:.1f}"
    print(f"| {s} | {tag} | {f(ir)} | {f(dw)} | {f(d1r + d1w)} | {f(bcm)} |")
PY
