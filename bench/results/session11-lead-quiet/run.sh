#!/usr/bin/env bash
# issue 15, session 11 (lead): a quiet-machine re-run of main (adaeba4) XDP walker,
# nothing else running. In a directory with parapet-main (release build of
# main) and wc25.*, wc25600.* made by `parapet gen worst-case N --trace
# wcN.trace --packets 64 > wcN.rules`.
set -u
D=${DATA:-../shared/data/classbench}
echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
for round in 1 2 3; do
  for set in wc25 wc25600 acl1_10k fw1_10k; do
      case $set in
        wc*) args=("$set.rules" "$set.trace" --sample 64 --repeat 200 --runs 7) ;;
        *) args=("$D/$set.gz" "$D/${set}_trace.gz" --sample 256 --repeat 100 --runs 7) ;;
      esac
      ./parapet-main bench dataplane "${args[@]}" --hook xdp --json \
        | sed "s/^{/{\"round\":$round,\"set\":\"$set\",/"
  done
done
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
