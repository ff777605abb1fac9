#!/bin/bash
# Same-run before/after: interleaved per set and round, pinned to CPU 1.
D=/work/shared/data/classbench
W=/tmp/cg_c2/worst; mkdir -p $W
for n in 25 25600; do /tmp/parapet_before_c2 gen worst-case $n --trace $W/worst_$n.trace --packets 10000 > $W/worst_$n.rules; done
OUT=/tmp/cg_c2/bench.jsonl; : > $OUT
for round in 1 2 3; do
  for s in acl1_10k fw1_10k ipc1_10k acl1_100k fw1_100k ipc1_100k worst_25 worst_25600; do
    case $s in worst_*) r=$W/$s.rules; t=$W/$s.trace;; *) r=$D/$s.gz; t=$D/${s}_trace.gz;; esac
    for b in before after; do
      load=$(cut -d' ' -f1 /proc/loadavg)
      line=$(taskset -c 1 /tmp/parapet_${b}_c2 bench classify $r $t --engine auto --json --runs 7 | grep '^{')
      echo "{\"set\":\"$s\",\"bin\":\"$b\",\"round\":$round,\"load\":$load,\"r\":$line}" >> $OUT
    done
  done
done
echo done
