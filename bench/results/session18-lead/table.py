#!/usr/bin/env python3
"""ab.jsonl -> a markdown table: ns per lookup, median [min-max] over rounds."""
import json, sys, statistics
rows = [json.loads(l) for l in sys.stdin if l.strip()]
sets = list(dict.fromkeys(r["set"] for r in rows))
print("| set | before ns/lookup | after ns/lookup | after/before |")
print("| --- | ---: | ---: | ---: |")
for s in sets:
    v = {b: sorted(r["result"]["ns_per_lookup"] for r in rows if r["set"] == s and r["binary"] == b) for b in ("before", "after")}
    m = {b: statistics.median(x) for b, x in v.items()}
    f = lambda b: f"{m[b]:.1f} [{v[b][0]:.1f}–{v[b][-1]:.1f}]"
    print(f"| {s} | {f('before')} | {f('after')} | {m['after']/m['before']:.2f} |")
