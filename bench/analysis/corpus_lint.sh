#!/bin/sh
# Counts `parapet lint` findings over every file of ../shared/corpus that
# `parapet check` accepts (iptables and nft) and over ClassBench sets: one
# TSV line per file (findings and warnings by kind, unproven rules, exit
# code, seconds), then a line of totals. A long run: it belongs here, not in `make test`.
#
# usage: bench/analysis/corpus_lint.sh BIN [TIME_LIMIT] [SETS]
#   e.g. bench/analysis/corpus_lint.sh target/release/parapet 30 "acl1_10k fw1_10k"
set -eu
bin=$1 limit=${2:-30} sets=${3:-}
# Correlation warnings per file (lint's default is 10; the cap is the
# count, so a file at the cap has at least that many).
correlations=${CORRELATIONS:-10}
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
    print("\t".join("-" * 7)); sys.exit()
k = [f["kind"] for f in d["findings"]]
w = [f["kind"] for f in d.get("warnings", [])]
print("\t".join(str(n) for n in (k.count("unreachable"), k.count("redundant"),
      k.count("empty-match"), k.count("unreached-chain"),
      w.count("returning-chain"), w.count("correlation"), len(d["unproven"]))))
' "$1"
}
printf 'file\tunreachable\tredundant\tempty_match\tunreached_chain\treturning_chain\tcorrelation\tunproven\texit\tseconds\n'
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
    set +e
    "$bin" lint "$f" --json --time-limit "$limit" --correlations "$correlations" > "$tmp/out.json" 2>"$tmp/err"
    rc=$?
    set -e
    end=$(date +%s.%N)
    printf '%s\t%s\t%s\t%.2f\n' "$(basename "$f")" "$(count "$tmp/out.json")" "$rc" "$(echo "$end - $start" | bc)"
done > "$tmp/table.tsv"
cat "$tmp/table.tsv"
awk -F'\t' '{ for (i = 2; i <= 8; i++) if ($i ~ /^[0-9]+$/) t[i] += $i
    if ($9 == 1) f++; else if ($9 == 0) c++; else e++ }
    END { printf "total (%d files: %d with findings, %d clean, %d exit 2)", NR, f, c, e
          for (i = 2; i <= 8; i++) printf "\t%d", t[i]; printf "\n" }' "$tmp/table.tsv"
