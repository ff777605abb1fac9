#!/bin/sh
# Correctness suite for acl_bench (see check.py for what is checked).
#   1k sets: generated traces (traces.sh), exact linear oracle on every packet;
#            scalar for all twelve sets, every algorithm for acl1/fw1/ipc1.
#   10k sets with published traces: oracle on every 20th packet, all algos.
#   100k sets (FULL=1 only; fw1_100k builds for ~35 s): oracle every 1000th.
set -u
here=$(cd "$(dirname "$0")" && pwd)
data=${CLASSBENCH:-/work/shared/data/classbench}
make -s -C "$here" >/dev/null || exit 1
"$here/traces.sh" || exit 1
fail=0
run() { python3 "$here/check.py" "$@" || fail=1; }
algos="scalar sse avx2 avx512x16 avx512x32"
for n in acl1 acl2 acl3 acl4 acl5 fw1 fw2 fw3 fw4 fw5 ipc1 ipc2; do
    run "$data/${n}_1k" "$here/traces/${n}_1k_trace.gz"
done
for n in acl1 fw1 ipc1; do
    for a in $algos; do
        [ $a = scalar ] && continue
        run "$data/${n}_1k" "$here/traces/${n}_1k_trace.gz" --algo $a --no-oracle
    done
done
for n in acl1 acl5 fw1 fw5 ipc1 ipc2; do
    run "$data/${n}_10k.gz" "$data/${n}_10k_trace.gz" --oracle-every 20
    for a in $algos; do
        [ $a = scalar ] && continue
        run "$data/${n}_10k.gz" "$data/${n}_10k_trace.gz" --algo $a --no-oracle
    done
done
if [ "${FULL:-0}" = 1 ]; then
    for n in acl1 fw1 ipc1; do
        run "$data/${n}_100k.gz" "$data/${n}_100k_trace.gz" --oracle-every 1000
    done
fi
[ $fail = 0 ] && echo "check.sh: ALL PASS" || echo "check.sh: FAILURES"
exit $fail
