#!/bin/sh
# Writes an iptables-save copy of a ClassBench filter set in which every
# second rule is DROP instead of ACCEPT (policy DROP as in ClassBench):
# ClassBench lists have one verdict, so their runs of same-verdict rules
# are the whole list; this variant has runs one rule long, the worst case
# for searches that settle runs in bulk (benchmarks.md §32).
#
# usage: bench/analysis/mixed_verdicts.sh PARAPET IN OUT
set -eu
"$1" list "$2" --input-format classbench --format iptables-save |
    awk '/^-A / { n++; if (n % 2 == 0) sub(/-j ACCEPT$/, "-j DROP") } { print }' > "$3"
