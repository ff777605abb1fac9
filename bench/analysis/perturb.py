#!/usr/bin/env python3
"""Writes a copy of a ClassBench filter set with 1 % of its rules changed:
half of them swapped with their successor (reordered), half edited (the
destination port range narrowed to its low end). Deterministic (seeded), so
every run of bench/analysis/run.sh diffs the same pair.

usage: perturb.py IN OUT [PERCENT] [SEED]
"""
import random
import sys

src, dst = sys.argv[1], sys.argv[2]
percent = float(sys.argv[3]) if len(sys.argv) > 3 else 1.0
rng = random.Random(int(sys.argv[4]) if len(sys.argv) > 4 else 16)
lines = open(src).read().splitlines()
n = len(lines)
k = max(1, int(n * percent / 100))
for count, i in enumerate(rng.sample(range(n - 1), k)):
    if count % 2 == 0:
        lines[i], lines[i + 1] = lines[i + 1], lines[i]
    else:
        f = lines[i].split("\t")
        lo = f[3].split(":")[0].strip()
        f[3] = f"{lo} : {lo}"
        lines[i] = "\t".join(f)
open(dst, "w").write("\n".join(lines) + "\n")
