#!/usr/bin/env python3
"""A trace for the first 64 rules of a ClassBench filter (stdin): per rule,
two packets inside its box (so a linear scan stops at that rule, or at an
earlier one that also holds the packet), and one in eight packets random
(the policy's). Prints `src dst sport dport proto` lines; seeded."""
import random
import sys

rng = random.Random(15)


def prefix(s):
    addr, length = s.split("/")
    a = 0
    for part in addr.split("."):
        a = a << 8 | int(part)
    n = int(length)
    lo = a & ~((1 << (32 - n)) - 1) & 0xFFFFFFFF
    return lo, lo | ((1 << (32 - n)) - 1)


out = []
for line in sys.stdin:
    f = line.lstrip("@").split("\t")
    if len(f) < 5:
        continue
    src, dst = prefix(f[0]), prefix(f[1])
    sp = [int(x) for x in f[2].split(":")]
    dp = [int(x) for x in f[3].split(":")]
    proto, pmask = (int(x, 16) for x in f[4].split("/"))
    for _ in range(2):
        p = proto if pmask else rng.choice([6, 17])
        out.append((rng.randint(*src), rng.randint(*dst), rng.randint(*sp), rng.randint(*dp), p))
for _ in range(len(out) // 7):
    out.append((rng.getrandbits(32), rng.getrandbits(32), rng.getrandbits(16), rng.getrandbits(16), 6))
rng.shuffle(out)
for p in out:
    print(*p)
