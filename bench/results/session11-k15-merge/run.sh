#!/usr/bin/env bash
# issue 15, session 11 (k15): before/after the merge loop as a may_goto loop
# (no iterator), interleaved: each set, each round, before then after.
# In a directory with parapet-before, parapet-after and the gen outputs:
#   parapet gen worst-case 25 --trace wc25.trace --packets 64 > wc25.rules
#   parapet gen worst-case 25600 --trace wc25600.trace --packets 64 > wc25600.rules
set -u
D=${DATA:-/work/wt/shared/data/classbench}
echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
for round in 1 2; do
  for set in wc25 wc25600 acl1_10k fw1_10k; do
    for bin in before after; do
      case $set in
        wc*) args=("$set.rules" "$set.trace" --sample 64 --repeat 200 --runs 7) ;;
        *) args=("$D/$set.gz" "$D/${set}_trace.gz" --sample 256 --repeat 100 --runs 7) ;;
      esac
      ./parapet-$bin bench dataplane "${args[@]}" --hook xdp --json \
        | sed "s/^{/{\"round\":$round,\"set\":\"$set\",\"bin\":\"$bin\",/"
    done
  done
done
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
