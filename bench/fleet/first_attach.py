#!/usr/bin/env python3
"""A fresh parapetd's first attach: how long `attach` (XDP, skb mode, on a
veth of its own) takes when it loads the programs, for each binary given,
alternating, in a private network namespace (root). With STRACE=1 each
round also records when each `bpf(BPF_PROG_LOAD)` of the loader child
started and how long it took (strace -f -tt -T), to show which programs
are verified and whether one after the other.

Usage: sudo bench/fleet/first_attach.py [--rounds 3] [--bans N] LABEL=PATH...
Prints one JSON line per round and binary.
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time

import outage
import run


def one(binary, bans, trace):
    tmp = tempfile.mkdtemp(prefix="parapet-first-attach-")
    d = os.path.join(tmp, "n")
    os.makedirs(d)
    sock = os.path.join(d, "s")
    argv = [binary, "--socket", sock, "--state-dir", os.path.join(d, "st")]
    st = os.path.join(tmp, "strace")
    if trace:
        argv = ["strace", "-f", "-tt", "-T", "-e", "trace=bpf", "-o", st] + argv
    # its own process group: under strace, killing strace alone would
    # leave parapetd (and its pins) behind
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=open(os.path.join(d, "log"), "w"), start_new_session=True)
    res = {"bans": bans, "load": os.getloadavg()[0]}
    try:
        run.wait("parapetd up", 30, lambda: os.path.exists(sock))
        time.sleep(0.1)
        node = type("Node", (), {})()
        node.c = run.Client(sock)
        i = 0
        while i < bans:
            k = min(10_000, bans - i)
            node.c.call(cmd="ban", elems=[run.addr(1 + i + j) for j in range(k)], timeout=3600)
            i += k
        res["first_attach_s"] = round(outage.enforce(node, 0), 2)
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        # (under strace, parapetd is strace's child: gone a moment later)
        for _ in range(500):
            try:
                os.killpg(p.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.01)
        outage.remove_pins(binary, type("N", (), {"dir": d})())
        outage.remove_dummies(1)
    if trace:
        # strace -f splits a call that another thread's interrupts into
        # "<unfinished ...>" and "<... bpf resumed>" lines, by thread id
        loads, started = [], {}
        for line in open(st):
            f = line.split()
            if "BPF_PROG_LOAD" in line and 'prog_name="parapet' in line:
                name = line.split('prog_name="')[1].split('"')[0]
                if "unfinished" in line:
                    started[f[0]] = (name, f[1])
                else:
                    loads.append({"prog": name, "at": f[1],
                                  "s": float(line.rsplit("<", 1)[1].rstrip(">\n"))})
            elif "bpf resumed" in line and f[0] in started:
                name, at = started.pop(f[0])
                loads.append({"prog": name, "at": at,
                              "s": float(line.rsplit("<", 1)[1].rstrip(">\n"))})
        res["prog_loads"] = loads
    shutil.rmtree(tmp, ignore_errors=True)
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bans", type=int, default=0)
    ap.add_argument("bins", nargs="+", help="LABEL=PATH")
    a = ap.parse_args()
    outage.private_netns()
    bins = [b.split("=", 1) for b in a.bins]
    for r in range(a.rounds):
        for label, path in bins:
            res = one(path, a.bans, bool(os.environ.get("STRACE")))
            print(json.dumps({"round": r, "bin": label, **res}), flush=True)


if __name__ == "__main__":
    main()
