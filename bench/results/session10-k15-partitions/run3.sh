#!/usr/bin/env bash
# round 3 of the ClassBench sets (round 2's were disturbed: floors of 160-930 ns)
set -u
D=${DATA:-/work/wt/shared/data/classbench}
echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
for set in acl1_10k fw1_10k; do
  for bin in before after; do
    ./parapet-$bin bench dataplane "$D/$set.gz" "$D/${set}_trace.gz" --sample 256 --repeat 100 --runs 7 --hook xdp --json \
      | sed "s/^{/{\"round\":3,\"set\":\"$set\",\"bin\":\"$bin\",/"
  done
done
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
