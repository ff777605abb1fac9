#!/usr/bin/env bash
# issue 15, session 17 (k15big), docs/benchmarks.md §69: the tree form split
# over programs entered by tail calls (ClassBench at 100k rules, more than
# one program holds) as parapetd attaches it (--engine
# generated-tree-attached) against the main program's walker (auto), same
# rulesets and packets, floor interleaved; the 10k sets and nf-HiPAC's
# worst case at 25,600 (one program, as before) for no regression. Run from
# this directory as root with PARAPET=path/to/parapet (kernel-timed: a
# debug build times the same BPF programs; load_ms is a debug build's);
# DATA=the ClassBench directory; SETS, FORMS and ENGINES to run part of it.
set -u
P=${PARAPET:-parapet}
D=${DATA:-/work/shared/data/classbench}
SETS=${SETS:-acl1_100k fw1_100k ipc1_100k acl1_10k fw1_10k wc25600}
FORMS=${FORMS:-repeated}
ENGINES=${ENGINES:-auto generated-tree-attached}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
for s in $SETS; do
  case $s in
    wc*) n=${s#wc}; "$P" gen worst-case "$n" --trace "$T/$s.trace" --packets 64 > "$T/$s.rules" ;;
    *) zcat "$D/$s.gz" > "$T/$s.rules"; zcat "$D/${s}_trace.gz" > "$T/$s.trace" ;;
  esac
done
echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for set in $SETS; do
  for form in $FORMS; do
    for engine in $ENGINES; do
      case $set-$form in
        wc*-repeated) args=(--sample 64 --repeat 200 --runs 7) ;;
        *-repeated) args=(--sample 128 --repeat 100 --runs 7) ;;
        *-distinct) args=(--sample 256 --distinct --runs 7) ;;
      esac
      fmt=(); case $set in wc*) ;; *) fmt=(--format classbench) ;; esac
      "$P" bench dataplane "$T/$set.rules" "$T/$set.trace" "${fmt[@]}" --hook xdp \
        --engine "$engine" "${args[@]}" --json | sed "s/^{/{\"set\":\"$set\",\"form\":\"$form\",/"
      echo "$set $form $engine done: load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
    done
  done
done
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
