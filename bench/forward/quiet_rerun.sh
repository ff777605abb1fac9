#!/usr/bin/env bash
# The FORWARD bar's re-run kit (issue 14, docs/benchmarks.md §41 and §48):
# runs the §41 experiment unattended with a release build of THIS checkout,
# and records what a reader needs to judge the numbers: commit, kernel,
# CPUs, the load average at the start and at the end, the exact command.
# Meant for a quiet machine (no other builds or tests running); it warns,
# but does not stop, when the load average at the start is above
# QUIET_MAX_LOAD (default: the number of CPUs / 2).
#
#   bash bench/forward/quiet_rerun.sh            # or: make -f Makefile.bench bench-forward-quiet
#   ARGS="--rules 25,400 --rounds 1" bash bench/forward/quiet_rerun.sh   # a short try
#
# Needs root (namespaces, veths, netfilter rules: all deleted at the end).
# Output: bench/results/forward-quiet-<UTC date>-<commit>/{report.md,
# forward.json, run.txt, log.txt}. Exit status: the benchmark's.
set -euo pipefail
cd "$(dirname "$0")/../.."

ARGS=${ARGS:-"--rules 25,25600 --rounds 5 --frames 128 --tcp-secs 2"}
CARGO=${CARGO:-cargo}
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=$(git status --porcelain 2>/dev/null | grep -v '^??' | head -1 || true)
stamp=$(date -u +%Y-%m-%dT%H%MZ)
out=${OUT:-bench/results/forward-quiet-$stamp-$commit}
target=${CARGO_TARGET_DIR:-target}
case $target in /*) ;; *) target=$PWD/$target ;; esac
max_load=${QUIET_MAX_LOAD:-$(( $(nproc) / 2 ))}

mkdir -p "$out"
run="$out/run.txt"
{
  echo "commit $commit${dirty:+ (uncommitted changes)}"
  echo "kernel $(uname -r), $(nproc) CPUs"
  echo "build start $(date -u +%FT%TZ), load average $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$run"

make -f Makefile.bench bench-deps >/dev/null
"$CARGO" build --release -p parapet-peers -p parapet -p parapet-daemon

load_start=$(cut -d' ' -f1-3 /proc/loadavg)
echo "run start $(date -u +%FT%TZ), load average $load_start" | tee -a "$run"
if awk -v l="${load_start%% *}" -v m="$max_load" 'BEGIN { exit !(l > m) }'; then
  echo "WARNING: load average ${load_start%% *} > $max_load at the start: not a quiet machine; label the numbers 'measured while other work ran'" | tee -a "$run"
fi
cmd=("$target/release/parapet-peers" forward $ARGS --report "$out/report.md" --json "$out/forward.json")
echo "command PARAPET_BIN=$target/release/parapet ${cmd[*]}" | tee -a "$run"

set +e
PARAPET_BIN="$target/release/parapet" "${cmd[@]}" 2>&1 | tee "$out/log.txt"
rc=${PIPESTATUS[0]}
set -e

echo "run end $(date -u +%FT%TZ), load average $(cut -d' ' -f1-3 /proc/loadavg), exit $rc" | tee -a "$run"
echo "results in $out"
exit "$rc"
