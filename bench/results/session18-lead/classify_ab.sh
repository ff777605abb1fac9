#!/bin/bash
# User-space lookups before/after (issue 15's "no regression"): parapet
# bench classify on ClassBench sets, two binaries alternated, ROUNDS
# rounds, one JSON line per measurement:
#   BEFORE=/path/parapet AFTER=/path/parapet ROUNDS=3 ./classify_ab.sh > ab.jsonl
set -eu
DATA=${CLASSBENCH:-/work/shared/data/classbench}
SETS=${SETS:-"acl1_10k fw1_10k ipc1_10k acl1_100k"}
ROUNDS=${ROUNDS:-3}
for r in $(seq 1 "$ROUNDS"); do
  for set in $SETS; do
    for b in before after; do
      bin=$BEFORE; [ "$b" = after ] && bin=$AFTER
      out=$(timeout 600 "$bin" bench classify "$DATA/$set.gz" "$DATA/${set}_trace.gz" --json --runs 7 2>/dev/null | tail -1)
      echo "{\"round\":$r,\"set\":\"$set\",\"binary\":\"$b\",\"result\":$out}"
    done
  done
done
