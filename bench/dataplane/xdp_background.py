#!/usr/bin/env python3
"""Apply and ban latency while parapetd loads the tree form (issue 15).

A parapetd in a network namespace of its own, attached at XDP to one end
of a veth pair, applies a small ruleset, then a large one whose XDP
program is the tree form (ClassBench at 100k: the split form, seconds of
verifier). A client bans a new address every --ban-every ms on its own
connection from before the large apply until the tree form is on the
link (and --tail s after), timing each reply. Reported per binary and
round: the apply's reply time, when the tree form was on the link, and
the bans' reply times (count, median, 90th percentile, max in ms) of
those sent while the apply ran and of those sent after it returned until
the tree form was on the link (the background load).

Each --binary is NAME=PATH[:FLAG,FLAG]; binaries alternate within a round.
Before the background load, parapetd loaded the XDP program inside the
apply, under its state lock (main with `--xdp-engine generated-tree`);
after it, the apply returns with the walker on the link.

    sudo bench/dataplane/xdp_background.py \
        --binary before=/path/old/parapetd:--xdp-engine,generated-tree \
        --binary after=target/debug/parapetd \
        --ruleset /work/shared/data/classbench/acl1_100k.gz --rounds 3
"""

import argparse
import gzip
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import tempfile
import threading
import time

# parapetd's log line of a swap to a split tree form
TREE_ON = re.compile(r"XDP engine generated-tree \(.*programs of")

NS = "pbg-b"
PEER = "pbg-a"


def sh(*cmd, check=True):
    return subprocess.run(cmd, check=check, capture_output=True, text=True)


def bed():
    for ns in (NS, PEER):
        sh("ip", "netns", "del", ns, check=False)
        sh("ip", "netns", "add", ns)
    sh("ip", "link", "add", "pbg0", "netns", NS, "type", "veth", "peer", "name", "pbg1", "netns", PEER)
    for ns, dev, addr in ((NS, "pbg0", "10.251.0.2/24"), (PEER, "pbg1", "10.251.0.1/24")):
        sh("ip", "-n", ns, "addr", "add", addr, "dev", dev)
        sh("ip", "-n", ns, "link", "set", dev, "up")


def unbed():
    for ns in (NS, PEER):
        sh("ip", "netns", "del", ns, check=False)


class Conn:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.connect(path)
        self.r = self.s.makefile("rb")
        self.n = 0

    def call(self, req):
        self.n += 1
        self.s.sendall((json.dumps(dict(req, v=1, id=self.n)) + "\n").encode())
        reply = json.loads(self.r.readline())
        if not reply.get("ok"):
            raise RuntimeError("parapetd: %s" % reply.get("error"))
        return reply


class Daemon:
    def __init__(self, binary, flags, work, pins):
        self.dir = tempfile.mkdtemp(dir=work)
        self.sock = os.path.join(self.dir, "sock")
        self.pins = pins
        self.err = open(os.path.join(self.dir, "err"), "w")
        self.proc = subprocess.Popen(
            ["nsenter", "--net=/run/netns/" + NS, binary, "--socket", self.sock,
             "--state-dir", os.path.join(self.dir, "state"), "--pin-dir", pins,
             "--no-fsync", "--max-rules", "131071", "--image-mib", "64"] + flags,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.err)
        t0 = time.monotonic()
        while True:
            try:
                self.conn = Conn(self.sock)
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() - t0 > 60:
                    raise RuntimeError("parapetd did not start: " + self.log())
                time.sleep(0.05)

    def log(self):
        with open(os.path.join(self.dir, "err")) as f:
            return f.read()

    def engine(self):
        s = self.conn.call({"cmd": "stats"})["dataplane"]
        att = [a for a in s["attachments"] if a["hook"] == "xdp"]
        return (att[0].get("engine") if att else None), s["xdp_engine"]

    def stop(self):
        self.proc.kill()
        self.proc.wait()
        subprocess.run([self.proc.args[2], "--remove-pinned", "--pin-dir", self.pins,
                        "--state-dir", os.path.join(self.dir, "state")],
                       capture_output=True)
        shutil.rmtree(self.pins, ignore_errors=True)


def banner(sock, stop, every, out):
    """Bans 10.200.x.y, one per request, every `every` s; (start, reply s)."""
    c = Conn(sock)
    i = 0
    while not stop.is_set():
        i += 1
        addr = "10.200.%d.%d" % (i // 250 % 250, 1 + i % 250)
        t0 = time.monotonic()
        c.call({"cmd": "ban", "elems": [addr]})
        out.append((t0, time.monotonic() - t0))
        time.sleep(every)


def one(name, binary, flags, rules, args, work):
    pins = "/sys/fs/bpf/parapet-bench-bg-%d" % os.getpid()
    d = Daemon(binary, flags, work, pins)
    try:
        d.conn.call({"cmd": "apply", "name": "small", "rules":
                     "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -p udp --dport 9 -j DROP\nCOMMIT\n"})
        d.conn.call({"cmd": "attach", "iface": "pbg0", "hook": "xdp", "mode": "native"})
        bans, stop = [], threading.Event()
        t = threading.Thread(target=banner, args=(d.sock, stop, args.ban_every / 1000, bans))
        t.start()
        time.sleep(0.5)
        t0 = time.monotonic()
        d.conn.call({"cmd": "apply", "name": "big", "format": "classbench", "rules": rules})
        applied = time.monotonic() - t0
        # the swap's log line (not `stats`: on 100k rules it reads every
        # rule's counter under the state lock, itself holding bans ~1 s)
        while not TREE_ON.search(d.log()):
            if time.monotonic() - t0 > args.timeout:
                raise RuntimeError("%s: no tree form after %d s: %s" % (name, args.timeout, d.log()))
            time.sleep(0.02)
        attached = time.monotonic() - t0
        time.sleep(args.tail)
        stop.set()
        t.join()
        e, x = d.engine()
        assert e == "generated-tree", (e, x)
        def window(lo, hi):
            ms = sorted(s * 1000 for (at, s) in bans if lo <= at < hi)
            if not ms:
                return {"n": 0}
            return {"n": len(ms), "median": round(statistics.median(ms), 1),
                    "p90": round(ms[min(len(ms) - 1, int(0.9 * len(ms)))], 1),
                    "max": round(ms[-1], 1)}
        return {
            "binary": name, "apply_ms": round(applied * 1000), "tree_on_link_ms": round(attached * 1000),
            "bans_during_apply": window(t0, t0 + applied),
            "bans_during_load": window(t0 + applied, t0 + attached),
            "reason": x.get("reason"),
        }
    finally:
        d.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", action="append", required=True, help="NAME=PATH[:FLAG,FLAG]")
    ap.add_argument("--ruleset", required=True, help="a ClassBench filter set (.gz or plain)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--ban-every", type=float, default=20, help="ms between bans")
    ap.add_argument("--tail", type=float, default=1.0, help="s of bans after the tree form is on")
    ap.add_argument("--timeout", type=float, default=900)
    args = ap.parse_args()
    opener = gzip.open if args.ruleset.endswith(".gz") else open
    with opener(args.ruleset, "rt") as f:
        rules = f.read()
    bins = []
    for b in args.binary:
        name, rest = b.split("=", 1)
        path, _, flags = rest.partition(":")
        bins.append((name, path, flags.split(",") if flags else []))
    work = tempfile.mkdtemp(prefix="parapet-bg-")
    bed()
    try:
        for r in range(args.rounds):
            for name, path, flags in bins:
                res = one(name, path, flags, rules, args, work)
                res["round"] = r + 1
                print(json.dumps(res), flush=True)
    finally:
        unbed()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
