#!/bin/sh
# Counts `parapet lint` findings over every file of ../shared/corpus that
# `parapet check` accepts (iptables and nft) and over ClassBench sets: one
# TSV line per file (findings by kind, unproven rules, exit code, seconds),
# then totals. A long run: it belongs here, not in `make test`.
#
# usage: bench/analysis/corpus_lint.sh BIN [TIME_LIMIT] [SETS]
#   e.g. bench/analysis/corpus_lint.sh target/release/parapet 30 "acl1_10k fw1_10k"
set -eu
bin=$1 limit=${2:-30} sets=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
corpus=${PARAPET_CORPUS:-$here/../../../shared/corpus}
data=${DATA:-$here/../../../shared/data/classbench}
tmp=${TMPDIR:-/tmp}/parapet-corpus-lint
mkdir -p "$tmp"
count() {
    python3 -c '
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception:
    print("-\t-\t-\t-"); sys.exit()
k = [f["kind"] for f in d["findings"]]
print("%d\t%d\t%d\t%d" % (k.count("unreachable"), k.count("redundant"),
      len(k) - k.count("unreachable") - k.count("redundant"), len(d["unproven"])))
' "$1"
}
printf 'file\tunreachable\tredundant\tother\tunproven\texit\tseconds\n'
files=""
for f in "$corpus"/iptables/* "$corpus"/nft/*; do
    "$bin" check "$f" >/dev/null 2>&1 && files="$files $f"
done
for set in $sets; do
    [ -s "$tmp/$set" ] || gunzip -c "$data/$set.gz" > "$tmp/$set" 2>/dev/null || cp "$data/$set" "$tmp/$set"
    files="$files $tmp/$set"
done
for f in $files; do
    start=$(date +%s.%N)
    set +e; "$bin" lint "$f" --json --time-limit "$limit" > "$tmp/out.json" 2>"$tmp/err"; rc=$?; set -e
    end=$(date +%s.%N)
    printf '%s\t%s\t%s\t%.2f\n' "$(basename "$f")" "$(count "$tmp/out.json")" "$rc" "$(echo "$end - $start" | bc)"
done
