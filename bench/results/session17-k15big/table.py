#!/usr/bin/env python3
"""docs/benchmarks.md §69's table from results.jsonl (stdin)."""
import json, sys
rows = {}
for line in sys.stdin:
    line = line.strip()
    if not line.startswith("{"):
        continue
    r = json.loads(line)
    rows.setdefault(r["set"], {})["tree" if r["engine"].startswith("generated") else "walker"] = r
def cell(r):
    return f'{r["above_floor_ns"]:.0f} [{r["above_floor_ns_min"]:.0f}–{r["above_floor_ns_max"]:.0f}]'
print("| ruleset | walker (`auto`) | tree attached | programs | instructions (largest) | walked | load | floor |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for s, e in rows.items():
    w, t = e.get("walker"), e.get("tree")
    tr = t.get("tree", {}) if t else {}
    print(f'| {s} | {cell(w) if w else "–"} | {("**" + cell(t) + "**") if t else "–"} | '
          f'{tr.get("programs", "–")} | {t["program_insns"]:,} ({tr.get("largest", 0):,}) | '
          f'{t["verified_insns"]:,} | {t["load_ms"] / 1000:.1f} s | '
          f'{t["floor_ns_per_packet"]:.0f} |' if t else f'| {s} | {cell(w)} | – | | | | | |')
