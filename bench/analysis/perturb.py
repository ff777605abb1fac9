#!/usr/bin/env python3
"""Writes a copy of a filter set with 1 % of its rules changed.
Deterministic (seeded), so every run of bench/analysis/run.sh diffs the
same pair.

A ClassBench set (one verdict, 5-tuple rules): half of the changed rules
swapped with their successor (reordered), half edited (the destination port
range narrowed to its low end).

An iptables-save set (as mixed_verdicts.sh writes, every rule deciding,
several verdicts): the changed rules take turns at five edits that change
verdicts across the mixed rules, not only ports:
  0. reorder: swapped with the next rule;
  1. verdict: ACCEPT becomes DROP, DROP (or REJECT) becomes ACCEPT;
  2. REJECT: the rule rejects instead (`-j REJECT`);
  3. protocol: the rule's protocol and ports become ICMP echo requests
     (`-p icmp --icmp-type 8`) or, every other time, GRE (`-p gre`), with
     its addresses and verdict kept;
  4. jump: the rule jumps to a user chain PERTURB (ICMP rejected, UDP
     dropped, the rest RETURNs) and is repeated after the jump, so only the
     rule's ICMP and UDP packets change verdict.

usage: perturb.py IN OUT [PERCENT] [SEED]
"""
import random
import re
import sys

src, dst = sys.argv[1], sys.argv[2]
percent = float(sys.argv[3]) if len(sys.argv) > 3 else 1.0
rng = random.Random(int(sys.argv[4]) if len(sys.argv) > 4 else 16)
lines = open(src).read().splitlines()


def picks(n):
    """Which of n rules change: 1 % of them, at least one, never the last."""
    k = max(1, int(n * percent / 100))
    return rng.sample(range(n - 1), k)


def classbench(lines):
    for count, i in enumerate(picks(len(lines))):
        if count % 2 == 0:
            lines[i], lines[i + 1] = lines[i + 1], lines[i]
        else:
            f = lines[i].split("\t")
            lo = f[3].split(":")[0].strip()
            f[3] = f"{lo} : {lo}"
            lines[i] = "\t".join(f)
    return lines


# A rule's protocol, its match module and its ports.
PROTO_AND_PORTS = re.compile(r" -p \S+( -m (tcp|udp|icmp))?( --[sd]port \S+| --icmp-type \S+)*")
TARGET = re.compile(r" -j (\S+)( --reject-with \S+)?$")


def iptables_save(lines):
    rules = [i for i, l in enumerate(lines) if l.startswith("-A INPUT ")]
    # The last rules of mixed_verdicts.sh's output are its catch-alls:
    # leave them, so every edit changes a ClassBench rule.
    edits = {}
    for count, r in enumerate(sorted(picks(len(rules) - 2))):
        edits[rules[r]] = (count, rules[r + 1])
    out = []
    jumps = False
    swapped = {}
    for i, line in enumerate(lines):
        line = swapped.pop(i, line)
        count, nxt = edits.get(i, (None, None))
        kind = None if count is None else count % 5
        target = TARGET.search(line)
        if kind == 0:
            swapped[nxt] = line
            line = lines[nxt]
        elif kind == 1 and target:
            verdict = "DROP" if target.group(1) == "ACCEPT" else "ACCEPT"
            line = line[: target.start()] + f" -j {verdict}"
        elif kind == 2 and target:
            line = line[: target.start()] + " -j REJECT"
        elif kind == 3:
            proto = " -p icmp -m icmp --icmp-type 8" if count % 10 == 3 else " -p gre"
            stripped = PROTO_AND_PORTS.sub("", line)
            t = TARGET.search(stripped)
            line = stripped[: t.start()] + proto + stripped[t.start():]
        elif kind == 4 and target:
            out.append(line[: target.start()] + " -j PERTURB")
            jumps = True
        out.append(line)
    if jumps:
        at = next(i for i, l in enumerate(out) if l.startswith(":INPUT")) + 1
        out.insert(at, ":PERTURB - [0:0]")
        commit = len(out) - 1 - out[::-1].index("COMMIT")
        out[commit:commit] = [
            "-A PERTURB -p icmp -j REJECT",
            "-A PERTURB -p udp -j DROP",
            "-A PERTURB -j RETURN",
        ]
    return out


if any(l.startswith("*") for l in lines):
    lines = iptables_save(lines)
else:
    lines = classbench(lines)
open(dst, "w").write("\n".join(lines) + "\n")
