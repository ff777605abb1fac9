#!/bin/bash
# As classify_ab.sh, on the first 2,000 packets of each trace: keys that
# stay in the caches, so the walk is timed rather than the stream of keys
# (a key grew from 26 words to 57 between the binaries compared here).
set -eu
DATA=${CLASSBENCH:-/work/shared/data/classbench}
SETS=${SETS:-"acl1_10k fw1_10k ipc1_10k"}
ROUNDS=${ROUNDS:-3}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for set in $SETS; do zcat "$DATA/${set}_trace.gz" | head -2000 > "$tmp/$set.trace"; done
for r in $(seq 1 "$ROUNDS"); do
  for set in $SETS; do
    for b in before after; do
      bin=$BEFORE; [ "$b" = after ] && bin=$AFTER
      out=$(timeout 600 "$bin" bench classify "$DATA/$set.gz" "$tmp/$set.trace" --json --runs 7 2>/dev/null | tail -1)
      echo "{\"round\":$r,\"set\":\"$set\",\"binary\":\"$b\",\"result\":$out}"
    done
  done
done
