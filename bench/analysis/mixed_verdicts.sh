#!/bin/sh
# Writes an iptables-save copy of a ClassBench filter set in which every
# second rule is DROP instead of ACCEPT (policy DROP as in ClassBench):
# ClassBench lists have one verdict, so their runs of same-verdict rules
# are the whole list; this variant has runs one rule long, the worst case
# for searches that settle runs in bulk (benchmarks.md §32). Fails (and
# writes nothing) when `parapet list` cannot write the set as iptables-save
# (a port range on a rule for any protocol, as perturb.py's edits make in
# fw1 and ipc1).
#
# usage: bench/analysis/mixed_verdicts.sh PARAPET IN OUT
set -eu
"$1" list "$2" --input-format classbench --format iptables-save > "$3.tmp" || {
    rm -f "$3.tmp"
    exit 1
}
awk '/^-A / { n++; if (n % 2 == 0) sub(/-j ACCEPT$/, "-j DROP") } { print }' "$3.tmp" > "$3"
rm -f "$3.tmp"
