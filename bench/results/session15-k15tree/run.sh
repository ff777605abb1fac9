#!/usr/bin/env bash
# issue 15, session 15 (k15tree), docs/benchmarks.md §61: the compiled
# decision tree emitted as XDP code (--engine generated-tree) against the
# main program's image walker (auto), same rulesets and packets, floor
# interleaved. Run from this directory as root with PARAPET=path/to/parapet
# (kernel-timed: a debug build times the same BPF programs); DATA=the
# ClassBench directory; SETS, FORMS and ENGINES to run part of it. The
# tree program of a 10k ClassBench set takes minutes to load (the
# verifier, §61), once per form.
set -u
P=${PARAPET:-parapet}
D=${DATA:-/work/shared/data/classbench}
SETS=${SETS:-one_rule wc25 wc256 wc2560 acl1_10k ipc1_10k fw1_10k wc25600}
FORMS=${FORMS:-repeated distinct}
ENGINES=${ENGINES:-auto generated-tree}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
for n in 25 256 2560 25600; do
  "$P" gen worst-case "$n" --trace "$T/wc$n.trace" --packets 64 > "$T/wc$n.rules"
done
for s in acl1_10k ipc1_10k fw1_10k; do
  zcat "$D/$s.gz" > "$T/$s.rules"; zcat "$D/${s}_trace.gz" > "$T/$s.trace"
done
# issue 15's 1-rule ruleset and four packets (src dst sport dport proto)
printf '*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n-A INPUT -p tcp -m tcp --dport 9 -j DROP\nCOMMIT\n' > "$T/one_rule.rules"
printf '%s\n' '167772161 167772162 40000 9 6' '167772161 167772162 40000 80 6' \
  '167772161 167772162 40000 9 17' '3405803781 167772162 51000 443 6' > "$T/one_rule.trace"
echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for set in $SETS; do
  for form in $FORMS; do
    for engine in $ENGINES; do
      case $set-$form in
        *_10k-repeated) args=(--sample 128 --repeat 100 --runs 7) ;;
        *_10k-distinct) args=(--sample 256 --distinct --runs 7) ;;
        *-repeated) args=(--sample 64 --repeat 200 --runs 7) ;;
        *-distinct) args=(--sample 256 --distinct --runs 7) ;;
      esac
      fmt=(); case $set in *_10k) fmt=(--format classbench) ;; esac
      "$P" bench dataplane "$T/$set.rules" "$T/$set.trace" "${fmt[@]}" --hook xdp \
        --engine "$engine" "${args[@]}" --json | sed "s/^{/{\"set\":\"$set\",/"
      echo "$set $form $engine done: load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
    done
  done
done
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
