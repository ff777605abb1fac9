#!/usr/bin/env bash
# issue 15, session 14 (k15gen), docs/benchmarks.md §57: the generated
# straight-line XDP program (with and without its per-rule counters)
# against the main program's image walker, same rulesets and packets,
# floor interleaved, both forms. Run from this directory as root with
# PARAPET=path/to/parapet (the figures are kernel-timed, so a debug build
# of the command times the same BPF programs); DATA=the ClassBench
# directory; ROUNDS (3), SETS and ENGINES (auto = the walker on the
# meta-engine's image) to run part of it.
set -u
P=${PARAPET:-parapet}
D=${DATA:-/work/shared/data/classbench}
ROUNDS=${ROUNDS:-3}
SETS=${SETS:-one_rule wc25 acl64 wc256 wc800}
ENGINES=${ENGINES:-auto generated-nocount generated}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
for n in 25 256 800; do
  "$P" gen worst-case "$n" --trace "$T/wc$n.trace" --packets 64 > "$T/wc$n.rules"
done
head -64 "$D/acl1_1k" > "$T/acl64.cb"
./trace64.py < "$T/acl64.cb" > "$T/acl64.trace"
# issue 15's 1-rule ruleset and four packets (src dst sport dport proto)
printf '*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n-A INPUT -p tcp -m tcp --dport 9 -j DROP\nCOMMIT\n' > "$T/one_rule.rules"
printf '%s\n' '167772161 167772162 40000 9 6' '167772161 167772162 40000 80 6' \
  '167772161 167772162 40000 9 17' '3405803781 167772162 51000 443 6' > "$T/one_rule.trace"
echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for round in $(seq "$ROUNDS"); do
  for set in $SETS; do
    rules=$T/$set.rules; [ -e "$rules" ] || rules=$T/$set.cb
    for engine in $ENGINES; do
      for form in repeated distinct; do
        case $form in
          repeated) args=(--sample 64 --repeat 200 --runs 7) ;;
          distinct) args=(--sample 256 --distinct --runs 7) ;;
        esac
        # (wc800 with counters is past the comparison limit: refused)
        "$P" bench dataplane "$rules" "$T/$set.trace" --hook xdp --engine "$engine" \
          "${args[@]}" --json | sed "s/^{/{\"round\":$round,\"set\":\"$set\",/"
      done
    done
  done
done
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
