#!/usr/bin/env python3
"""Checks that two `parapet diff --json` outputs describe the same packets:
per pair of deciding rules and verdicts (a, a_verdict, b, b_verdict), the
same number of points (the sum of 2^points_log2 over its boxes, to a
relative 1e-9). Two comparisons of one pair may cut the packets into other
boxes (the changed-rules path and the every-region path do), so boxes are
not compared one by one. Exit 0 when the same, 1 otherwise (the first
mismatches printed).

usage: same_differences.py BEFORE.json AFTER.json
"""
import json
import sys
from collections import defaultdict


def points(path):
    report = json.load(open(path))
    if not report["complete"]:
        sys.exit(f"{path}: not complete, nothing to compare")
    out = defaultdict(float)
    for d in report["differences"]:
        out[(d["a"], d["a_verdict"], d["b"], d["b_verdict"])] += 2.0 ** d["points_log2"]
    return out, len(report["differences"])


(before, nb), (after, na) = points(sys.argv[1]), points(sys.argv[2])
bad = [
    (k, before.get(k, 0.0), after.get(k, 0.0))
    for k in sorted(set(before) | set(after), key=str)
    if abs(before.get(k, 0.0) - after.get(k, 0.0)) > 1e-9 * max(before.get(k, 0.0), after.get(k, 0.0))
]
for k, b, a in bad[:10]:
    print(f"{k}: {b:.6g} points before, {a:.6g} after")
print(f"{len(before)} rule pairs, {nb} boxes before; {len(after)} rule pairs, {na} boxes after; {len(bad)} differ")
sys.exit(1 if bad else 0)
