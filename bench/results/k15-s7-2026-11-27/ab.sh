#!/usr/bin/env bash
# ab.sh ROUNDS OUT BIN... : interleaved bench classify, cpu ns per lookup
R=$1; OUT=$2; shift 2
D=/work/shared/data/classbench
: > $OUT
for r in $(seq 1 $R); do
  for b in "$@"; do
    for s in acl1_10k fw1_10k ipc1_10k; do
      $b bench classify $D/$s.gz $D/${s}_trace.gz --json --runs 5 | python3 -c "import json,sys; r=json.load(sys.stdin); print('$(basename $b)', '$s', 1e9/r['cpu_lookups_per_sec'], 1e9/r['lookups_per_sec'])" >> $OUT
    done
  done
done
python3 - $OUT <<'PY'
import sys, statistics as st
g={}
for l in open(sys.argv[1]):
    b,s,c,w=l.split(); g.setdefault((s,b),[]).append((float(c),float(w)))
for (s,b),v in sorted(g.items()):
    c=[x[0] for x in v]; w=[x[1] for x in v]
    print(f"{s:10} {b:24} cpu {st.median(c):6.1f} [{min(c):.1f}-{max(c):.1f}] wall {st.median(w):6.1f} n={len(v)}")
PY
