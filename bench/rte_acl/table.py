#!/usr/bin/env python3
"""Markdown table from acl_bench JSON lines (stdin or files)."""
import fileinput
import json
import os

rows = [json.loads(l) for l in fileinput.input() if l.strip().startswith("{")]
print("| set | rules | algo | build s (wall / cpu) | memory MB | Mlookups/s wall median [min-max] "
      "| Mlookups/cpu-s median [min-max] | runs |")
print("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |")
for r in rows:
    name = os.path.basename(r["rules_file"]).replace(".gz", "")
    m = lambda k: r[k] / 1e6
    cpu = (f"{m('cpu_lookups_per_sec_median'):.2f} [{m('cpu_min'):.2f}-{m('cpu_max'):.2f}]"
           if "cpu_lookups_per_sec_median" in r else "-")
    bc = f" / {r['build_cpu_ms']/1e3:.1f}" if "build_cpu_ms" in r else ""
    print(f"| {name} | {r['rules']} | {r['algo']} | {r['build_ms']/1e3:.1f}{bc} | "
          f"{r['memory_bytes']/2**20:.1f} | "
          f"{m('lookups_per_sec_median'):.2f} [{m('min'):.2f}-{m('max'):.2f}] | {cpu} | {r['runs']} |")
