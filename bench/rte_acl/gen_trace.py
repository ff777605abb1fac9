#!/usr/bin/env python3
"""Generate a ClassBench-format trace from a filter set (the shared data has
no traces for the *_1k sets).

Each header: pick a filter uniformly at random, then for each field pick the
low end (p=1/4), the high end (p=1/4) or a uniform value inside the filter's
range (p=1/2); a wildcard protocol becomes one of 6/17/1/uniform. Output is
ClassBench trace format: sip dip sport dport proto flags gen_index, with
flags 0 and gen_index the 0-based index of the generating filter.

This is NOT ClassBench's trace_generator (no Pareto locality, no corner
bias model); it is deterministic for a given --seed and Python >= 3.2.

usage: gen_trace.py RULES OUT[.gz] [--n 100000] [--seed 1]
"""
import argparse
import gzip
import random
import sys

import cb


def pick(rng, lo, hi):
    x = rng.random()
    if x < 0.25:
        return lo
    if x < 0.5:
        return hi
    return rng.randint(lo, hi)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("rules")
    ap.add_argument("out")
    ap.add_argument("--n", type=int, default=100000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rules = cb.read_rules(a.rules)
    rng = random.Random(a.seed)
    opener = gzip.open if a.out.endswith(".gz") else open
    with opener(a.out, "wt") as f:
        for _ in range(a.n):
            i = rng.randrange(len(rules))
            r = rules[i]
            sip = pick(rng, r[0], r[1])
            dip = pick(rng, r[2], r[3])
            sp = pick(rng, r[4], r[5])
            dp = pick(rng, r[6], r[7])
            if r[9] == 0xFF:
                pr = r[8]
            else:
                # any value v with v & mask == value
                while True:
                    c = rng.random()
                    pr = 6 if c < 0.4 else 17 if c < 0.7 else 1 if c < 0.8 else rng.randrange(256)
                    if pr & r[9] == r[8]:
                        break
            f.write(f"{sip}\t{dip}\t{sp}\t{dp}\t{pr}\t0\t{i}\n")
    print(f"gen_trace: {a.n} headers from {len(rules)} filters -> {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
