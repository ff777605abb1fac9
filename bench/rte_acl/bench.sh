#!/bin/sh
# Measurement matrix for bench/rte_acl/README.md: acl1/fw1/ipc1 x 1k/10k/100k, every
# algorithm this CPU supports.  JSON lines go to stdout and are appended to
# bench/results/rte_acl-DATE/rte_acl.jsonl (OUT overrides the directory); progress and load averages to stderr.
#   1k:   generated trace (traces.sh; the shared data has no 1k traces)
#   10k, 100k: the published ClassBench traces of the same name
# usage: bench.sh [SET ...]  e.g. bench.sh fw1_10k   (default: all nine)
# Extra acl_bench options via ACL_BENCH_OPTS (default "--runs 7 --min-run-ms 200").
set -eu
here=$(cd "$(dirname "$0")" && pwd)
data=${CLASSBENCH:-/work/shared/data/classbench}
opts=${ACL_BENCH_OPTS:-"--runs 7 --min-run-ms 200"}
make -s -C "$here"
out=${OUT:-$here/../results/rte_acl-$(date -u +%Y-%m-%d)}
mkdir -p "$out"
sets=${*:-"acl1_1k fw1_1k ipc1_1k acl1_10k fw1_10k ipc1_10k acl1_100k fw1_100k ipc1_100k"}
for s in $sets; do
    case $s in
    *_1k)   "$here/traces.sh" "${s%_1k}"; rules="$data/$s"; trace="$here/traces/${s}_trace.gz" ;;
    *)      rules="$data/$s.gz"; trace="$data/${s}_trace.gz" ;;
    esac
    echo "bench.sh: $s  load: $(cut -d' ' -f1-3 /proc/loadavg)  $(date -u +%H:%M:%S)" >&2
    # shellcheck disable=SC2086
    "$here/acl_bench" $opts --mem 4096 "$rules" "$trace" | tee -a "$out/rte_acl.jsonl"
done
