#!/bin/sh
# Generate the missing *_1k traces (the shared ClassBench data has none) into
# bench/rte_acl/traces/NAME_1k_trace.gz, deterministically (seed 1, 100k headers).
# usage: traces.sh [NAME ...]   (default: all twelve 1k sets)
set -e
here=$(cd "$(dirname "$0")" && pwd)
data=${CLASSBENCH:-/work/shared/data/classbench}
mkdir -p "$here/traces"
names=${*:-"acl1 acl2 acl3 acl4 acl5 fw1 fw2 fw3 fw4 fw5 ipc1 ipc2"}
for n in $names; do
    out="$here/traces/${n}_1k_trace.gz"
    [ -s "$out" ] || python3 "$here/gen_trace.py" "$data/${n}_1k" "$out" --n 100000 --seed 1
done
