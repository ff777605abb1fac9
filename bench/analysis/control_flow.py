#!/usr/bin/env python3
"""Rewrites a one-chain iptables-save set (as mixed_verdicts.sh and
perturb.py write) into the control flow real rulesets have: user chains
entered by jumps and by gotos, with RETURNs in the middle of them, in the
shapes of Docker's and ufw's chains (../shared/corpus/iptables/
diekmann_containern_topos1.rules, ufw_before.rules):

  - an isolation chain first, as DOCKER-ISOLATION: two DROPs of one
    bridge's addresses arriving on another bridge, then RETURN;
  - INPUT's rules cut into chains of CHAIN deciding rules (Z0, Z1, ...),
    entered in order with `-j Zk`; every chain starts with a RETURN for
    one interface (as DOCKER's `-i docker0 -j RETURN`), so that RETURN
    skips the whole chain for that interface's packets;
  - every third chain is also entered by a goto for another interface
    before its jump (`-i gwK -g Zk`): those packets never come back to
    INPUT, the goto skips every later chain;
  - every fourth chain has a RETURN half way down for a source block (as
    ufw's `ufw-user-input` skipping the rest for a range).

A rule's chain depends only on how many deciding rules (ACCEPT, DROP,
REJECT) come before it, so a set and perturb.py's copy of it (which keeps
that count: a jump edit adds a `-j PERTURB` line, kept with the rule after
it) are cut at the same rules, and the copy differs from the set only where
perturb.py edited it.

usage: control_flow.py IN OUT [CHAIN]
"""
import sys

src, dst = sys.argv[1], sys.argv[2]
chain_len = int(sys.argv[3]) if len(sys.argv) > 3 else 100
lines = open(src).read().splitlines()

head, rules, tail = [], [], []
for line in lines:
    if line.startswith("-A INPUT "):
        rules.append(line[len("-A INPUT "):])
    elif rules or line == "COMMIT":
        tail.append(line)
    else:
        head.append(line)

# Cut into chains by deciding rules; a non-deciding line (a jump) goes
# with the deciding rule after it.
chains, current, deciding = [], [], 0
for rule in rules:
    current.append(rule)
    if rule.split(" -j ")[-1].split()[0] in ("ACCEPT", "DROP", "REJECT"):
        deciding += 1
        if deciding % chain_len == 0:
            chains.append(current)
            current = []
if current:
    chains.append(current)

names = [f"Z{k}" for k in range(len(chains))]
out = list(head)
at = next(i for i, l in enumerate(out) if l.startswith(":INPUT")) + 1
out[at:at] = [f":{n} - [0:0]" for n in ["ISOLATION"] + names]
out += [
    "-A INPUT -j ISOLATION",
    "-A ISOLATION -i br-a -s 172.18.0.0/16 -j DROP",
    "-A ISOLATION -i br-b -s 172.17.0.0/16 -j DROP",
    "-A ISOLATION -j RETURN",
]
for k, (name, body) in enumerate(zip(names, chains)):
    if k % 3 == 0:
        out.append(f"-A INPUT -i gw{k} -g {name}")
    out.append(f"-A INPUT -j {name}")
    out.append(f"-A {name} -i dock{k} -j RETURN")
    for j, rule in enumerate(body):
        if k % 4 == 1 and j == len(body) // 2:
            out.append(f"-A {name} -s 198.18.{k % 256}.0/24 -j RETURN")
        out.append(f"-A {name} {rule}")
out += tail
open(dst, "w").write("\n".join(out) + "\n")
