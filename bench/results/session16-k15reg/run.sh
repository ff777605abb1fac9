#!/usr/bin/env bash
# issue 15, session 16 (k15reg), docs/benchmarks.md §64: the tree form's
# load time before and after (fields in registers, guarded exits, common
# checks at the roots) and its per-packet cost, against the main program's
# image walker (auto), same rulesets and packets, floor interleaved. Run
# from this directory as root with PARAPET=the parapet after the change
# and BEFORE=a parapet built from main before it (kernel-timed: debug
# builds time the same BPF programs); DATA=the ClassBench directory; SETS
# and ENGINES to run part of it. Every run is bounded by `timeout`
# (LIMIT_BEFORE, LIMIT seconds): main's tree program took minutes to load
# ClassBench 10k and did not load nf-HiPAC's worst case at 25,600 rules.
set -u
P=${PARAPET:-parapet}
B=${BEFORE:-}
D=${DATA:-/work/shared/data/classbench}
SETS=${SETS:-wc256 wc2560 wc25600 acl1_10k ipc1_10k fw1_10k}
ENGINES=${ENGINES:-auto tree-before tree-after}
LIMIT=${LIMIT:-300}
LIMIT_BEFORE=${LIMIT_BEFORE:-480}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
for n in 256 2560 25600; do
  "$P" gen worst-case "$n" --trace "$T/wc$n.trace" --packets 64 > "$T/wc$n.rules"
done
for s in acl1_10k ipc1_10k fw1_10k; do
  zcat "$D/$s.gz" > "$T/$s.rules"; zcat "$D/${s}_trace.gz" > "$T/$s.trace"
done
echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for set in $SETS; do
  for engine in $ENGINES; do
    case $set in
      *_10k) args=(--format classbench --sample 128 --repeat 100 --runs 7) ;;
      *) args=(--sample 64 --repeat 200 --runs 7) ;;
    esac
    case $engine in
      auto) bin=$P; eng=auto; limit=$LIMIT ;;
      tree-after) bin=$P; eng=generated-tree; limit=$LIMIT ;;
      tree-before) bin=$B; eng=generated-tree; limit=$LIMIT_BEFORE ;;
    esac
    [ -n "$bin" ] || continue
    started=$(date +%s)
    out=$(timeout "$limit" "$bin" bench dataplane "$T/$set.rules" "$T/$set.trace" --hook xdp \
      --engine "$eng" "${args[@]}" --json 2>"$T/err")
    rc=$?
    wall=$(( $(date +%s) - started ))
    if [ $rc -eq 0 ]; then
      echo "$out" | sed "s/^{/{\"set\":\"$set\",\"variant\":\"$engine\",\"wall_s\":$wall,/"
    else
      why=$(tail -c 300 "$T/err" | tr '\n"' ' \047')
      [ $rc -eq 124 ] && why="not loaded in $limit s (timeout)"
      echo "{\"set\":\"$set\",\"variant\":\"$engine\",\"wall_s\":$wall,\"failed\":\"$why\"}"
    fi
    echo "$set $engine done (rc $rc, ${wall}s): load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
  done
done
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
