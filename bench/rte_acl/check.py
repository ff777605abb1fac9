#!/usr/bin/env python3
"""Correctness check for acl_bench --dump against the ClassBench data.

For every trace line, with rte_acl's answer m (0-based filter index):
  1. m != -1 and m <= g, g = generating filter (last trace column): the
     generating filter matches its own header, so a first-match classifier
     can never answer a later line or "no match";
  2. filter m really matches the header (independent Python matcher);
  3. for --algo other than scalar: identical to the scalar dump;
  4. m equals the first match of a linear scan in Python, on every
     --oracle-every'th packet (default every packet; the oracle is pure
     Python, so use e.g. 10 for 10k/100k sets).
Exit status 0 iff all checks pass.

usage: check.py RULES TRACE [--bin ./acl_bench] [--algo scalar]
                [--oracle-every K] [--no-oracle]
"""
import argparse
import os
import subprocess
import sys
import time

import cb


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("rules")
    ap.add_argument("trace")
    ap.add_argument("--bin", default=os.path.join(here, "acl_bench"))
    ap.add_argument("--algo", default="scalar")
    ap.add_argument("--oracle-every", type=int, default=1)
    ap.add_argument("--no-oracle", action="store_true")
    a = ap.parse_args()

    def dump(algo):
        out = subprocess.run([a.bin, "--dump", "--algo", algo, "--mem", "4096", a.rules, a.trace],
                             check=True, stdout=subprocess.PIPE, text=True).stdout
        return [int(x) for x in out.split()]

    got = dump(a.algo)
    vs_scalar = ""
    if a.algo != "scalar":
        ref = dump("scalar")
        diff = sum(1 for x, y in zip(got, ref) if x != y) + abs(len(got) - len(ref))
        vs_scalar = f", differs-from-scalar={diff}"
    rules = cb.read_rules(a.rules)
    pkts = cb.read_trace(a.trace)
    if len(got) != len(pkts):
        print(f"FAIL: {len(got)} results for {len(pkts)} packets")
        return 1

    bad_gen = bad_match = bad_oracle = no_gen = oracle_n = 0
    first_err = []
    t0 = time.time()
    for k, (p, m) in enumerate(zip(pkts, got)):
        g = p[5]
        if g is None:
            no_gen += 1
        elif m == -1 or m > g:
            bad_gen += 1
            if len(first_err) < 5:
                first_err.append(f"line {k+1}: rte_acl={m} generator={g}")
        if m != -1 and not cb.matches(rules[m], p):
            bad_match += 1
            if len(first_err) < 5:
                first_err.append(f"line {k+1}: rte_acl={m} does not match header {p[:5]}")
        if not a.no_oracle and k % a.oracle_every == 0:
            oracle_n += 1
            o = cb.first_match(rules, p)
            if o != m:
                bad_oracle += 1
                if len(first_err) < 5:
                    first_err.append(f"line {k+1}: rte_acl={m} linear={o}")
    n = len(pkts)
    ok = bad_gen == 0 and bad_match == 0 and bad_oracle == 0 \
        and (not vs_scalar or vs_scalar.endswith("=0"))
    earlier = sum(1 for p, m in zip(pkts, got) if p[5] is not None and m != -1 and m < p[5])
    print(f"{'PASS' if ok else 'FAIL'} {os.path.basename(a.rules)} / {os.path.basename(a.trace)} "
          f"algo={a.algo}: {n} packets, {len(rules)} rules; "
          f"after-generator-or-miss={bad_gen}, matched-rule-does-not-match={bad_match}, "
          f"linear-oracle mismatches={bad_oracle}/{oracle_n}{vs_scalar}; "
          f"matched earlier than generator={earlier}"
          + (f"; no generator column={no_gen}" if no_gen else "")
          + f" ({time.time()-t0:.1f}s)")
    for e in first_err:
        print("  " + e)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
