#!/bin/bash
# User-space lookups before/after (issue 15's "no regression"): parapet
# bench classify on ClassBench sets, two binaries alternated, ROUNDS
# rounds, one JSON line per measurement:
#   BEFORE=/path/parapet AFTER=/path/parapet ROUNDS=3 ./classify_ab.sh > ab.jsonl
# HEAD=2000: only each trace's first 2,000 packets (keys that stay in the
# caches, so the walk is timed rather than the stream of keys).
set -eu
DATA=${CLASSBENCH:-/work/shared/data/classbench}
SETS=${SETS:-"acl1_10k fw1_10k ipc1_10k acl1_100k"}
ROUNDS=${ROUNDS:-3}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for set in $SETS; do
  if [ -n "${HEAD:-}" ]; then
    zcat "$DATA/${set}_trace.gz" | head -"$HEAD" > "$tmp/$set.trace"
  fi
done
for r in $(seq 1 "$ROUNDS"); do
  for set in $SETS; do
    for b in before after; do
      bin=$BEFORE; [ "$b" = after ] && bin=$AFTER
      trace=$DATA/${set}_trace.gz; [ -n "${HEAD:-}" ] && trace=$tmp/$set.trace
      out=$(timeout 600 "$bin" bench classify "$DATA/$set.gz" "$trace" --json --runs 7 2>/dev/null | tail -1)
      echo "{\"round\":$r,\"set\":\"$set\",\"binary\":\"$b\",\"result\":$out}"
    done
  done
done
