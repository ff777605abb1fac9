#!/usr/bin/env bash
# issue 15, session 18 (k15auto), docs/benchmarks.md §73: the price of the
# split form's tail calls. The same list's tree form as parapetd attaches
# it (--engine generated-tree-attached), in one program and split by
# --tree-budget over more programs, same packets, floor interleaved, the
# budgets alternated over ROUNDS rounds. Run from this directory as root
# with PARAPET=path/to/parapet; DATA=the ClassBench directory.
set -u
P=${PARAPET:-parapet}
D=${DATA:-/work/shared/data/classbench}
SETS=${SETS:-acl1_10k wc25600}
BUDGETS=${BUDGETS:-default 100000 50000 25000}
ROUNDS=${ROUNDS:-2}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
for s in $SETS; do
  case $s in
    wc*) n=${s#wc}; "$P" gen worst-case "$n" --trace "$T/$s.trace" --packets 64 > "$T/$s.rules" ;;
    *) zcat "$D/$s.gz" > "$T/$s.rules"; zcat "$D/${s}_trace.gz" > "$T/$s.trace" ;;
  esac
done
echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for round in $(seq 1 "$ROUNDS"); do
  order=$BUDGETS
  [ $((round % 2)) -eq 0 ] && order=$(echo "$BUDGETS" | tr ' ' '\n' | tac | tr '\n' ' ')
  for set in $SETS; do
    for b in $order; do
      case $set in
        wc*) args=(--sample 64 --repeat 200 --runs 7); fmt=() ;;
        *) args=(--sample 128 --repeat 100 --runs 7); fmt=(--format classbench) ;;
      esac
      budget=(); [ "$b" != default ] && budget=(--tree-budget "$b")
      "$P" bench dataplane "$T/$set.rules" "$T/$set.trace" "${fmt[@]}" --hook xdp \
        --engine generated-tree-attached "${budget[@]}" "${args[@]}" --json \
        | sed "s/^{/{\"set\":\"$set\",\"budget\":\"$b\",\"round\":$round,/"
      echo "$set $b round $round done: load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
    done
  done
done
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
