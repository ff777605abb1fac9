#!/usr/bin/env python3
"""Fleet replication benchmark: real nats-server (JetStream, temp storage,
127.0.0.1) and real parapetd nodes (release build), driven over their
control sockets.

1. Ban-to-visibility latency across nodes: a probe bans a fresh address on
   one node and polls the others (`set.test`) until both have it; first
   with no other load (the baseline, same run), then while a load of
   RATE bans/s is offered across the fleet (batches, paced per node).
2. Bootstrap: node 0 is filled to BOOT bans (its local ingest time is the
   baseline), then a fresh node joins; time until it holds them all.
3. (--outage S) Broker outage under load: three nodes take OUTAGE_RATE
   bans/s (offered across them) while the broker is stopped for S seconds;
   the load stops when it is back; time from its return (port open) until
   every node holds every acknowledged ban with nothing left to publish.
4. (--snapshot-sizes N,...) Bootstrap time against the number of bans, by
   the snapshot path and, as the baseline in the same run, by replaying
   the log (a node with no snapshot on the broker): per N, node 0 holds N
   bans (snapshot written after them), a fresh node joins; time until it
   holds N.

With --ruleset (main and outage phases), each node first applies a
ruleset that drops `parapet-ban4`'s members and attaches its dataplane
(XDP, skb mode) to a veth interface of its own, so every ban it takes or
receives is also written to its kernel set map in the same commit, under
the state lock that `set.test` and `stats` take: a probe's hit then means
the ban is in that node's kernel map (the batched writes are part of the
catch-up, and the fresh node counts as holding a ban only once its
kernel set does). The whole run then happens in a private network
namespace the script makes (broker, nodes and interfaces in it; needs
root). --ruleset-baseline runs each binary's phases without the ruleset
first (keys `outage` and the main phase's, then `outage_ruleset` and
`main_ruleset`): the same-run baseline.

Usage: bench/fleet/run.py [--rate 100000] [--seconds 10] [--boot 1000000]
       [--bin LABEL=PATH ...] [--out results.json]
       [--only main,outage,snapshot] [--outage 60] [--outage-rate 10000]
       [--snapshot-sizes 10000,100000,1000000] [--ruleset [--ruleset-baseline]]
       (needs target/release/parapetd, nats-server). With several --bin, the
       whole benchmark runs once per binary, in order, in one invocation (a
       before/after comparison in the same run), each with a fresh broker.
"""

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import outage

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PARAPETD = os.path.join(ROOT, "target", "release", "parapetd")


class Client:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX)
        self.s.connect(path)
        self.f = self.s.makefile("rb")
        self.id = 0

    def call(self, **req):
        self.id += 1
        req["v"] = 1
        req["id"] = self.id
        self.s.sendall(json.dumps(req).encode() + b"\n")
        r = json.loads(self.f.readline())
        if not r.get("ok"):
            raise RuntimeError(f"{req.get('cmd')}: {r}")
        return r


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def up(port):
    try:
        socket.create_connection(("127.0.0.1", port)).close()
        return True
    except OSError:
        return False


def wait(what, limit, f, every=0.01):
    t0 = time.monotonic()
    while not f():
        if time.monotonic() - t0 > limit:
            raise SystemExit(f"timed out: {what}")
        time.sleep(every)
    return time.monotonic() - t0


class Node:
    def __init__(self, tmp, url, name, binary, extra=()):
        self.dir = os.path.join(tmp, name)
        os.makedirs(self.dir)
        self.sock = os.path.join(self.dir, "s")
        self.log = open(os.path.join(self.dir, "log"), "w")
        self.p = subprocess.Popen(
            [binary, "--socket", self.sock, "--state-dir", os.path.join(self.dir, "st"),
             "--fleet", url, "--fleet-node", name, *extra],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.log)
        wait(f"{name} up", 30, lambda: os.path.exists(self.sock))
        time.sleep(0.1)
        self.c = Client(self.sock)

    def stats(self):
        return self.c.call(cmd="stats")

    def stop(self):
        self.p.kill()
        self.p.wait()


def addr(i):
    return f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}"


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def summary(v):
    ms = [x * 1000 for x in v]
    return {"n": len(ms), "p50_ms": round(pct(ms, 50), 2), "p99_ms": round(pct(ms, 99), 2),
            "max_ms": round(max(ms), 2), "median_ms": round(statistics.median(ms), 2),
            "stdev_ms": round(statistics.pstdev(ms), 2)}


PROBE_LIMIT = 30


def probe(nodes, n, tag, timeouts=None):
    """n probes, rotating the banning node; seconds until each other node
    has it. A node still without it after PROBE_LIMIT s counts as
    PROBE_LIMIT s (a lower bound) and in `timeouts`."""
    out = []
    clients = [Client(x.sock) for x in nodes]
    start = time.monotonic()
    for k in range(n):
        if time.monotonic() - start > 6 * PROBE_LIMIT:
            break  # bounded: fewer samples rather than an endless run
        src = k % len(nodes)
        a = f"172.{16 + tag}.{k >> 8 & 255}.{k & 255}"
        t0 = time.monotonic()
        clients[src].call(cmd="ban", elems=[a], timeout=3600)
        pending = [i for i in range(len(nodes)) if i != src]
        while pending:
            for i in list(pending):
                try:
                    hit = clients[i].call(cmd="set.test", set="parapet-ban4", elem=a)["covered"]
                except RuntimeError:
                    hit = False  # the ban set does not exist there yet
                if hit:
                    out.append(time.monotonic() - t0)
                    pending.remove(i)
            if pending and time.monotonic() - t0 > PROBE_LIMIT:
                out.extend([PROBE_LIMIT] * len(pending))
                if timeouts is not None:
                    timeouts.append(len(pending))
                break
        time.sleep(0.05)
    return out


def load(node, base, rate, seconds, batch, done):
    """Offers `rate` bans/s to one node in batches; returns bans acknowledged."""
    c = Client(node.sock)
    t0 = time.monotonic()
    sent = 0
    while time.monotonic() - t0 < seconds:
        due = int((time.monotonic() - t0) * rate)
        if sent >= due:
            time.sleep(0.002)
            continue
        c.call(cmd="ban", elems=[addr(base + sent + j) for j in range(batch)], timeout=3600)
        sent += batch
    done.append((sent, time.monotonic() - t0))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rate", type=int, default=100_000)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--probes", type=int, default=100)
    ap.add_argument("--boot", type=int, default=1_000_000)
    ap.add_argument("--bin", action="append", default=[],
                    help="LABEL=PATH of a parapetd to measure (repeatable)")
    ap.add_argument("--out")
    ap.add_argument("--only", default="main",
                    help="phases: main (latency, bootstrap), outage, snapshot")
    ap.add_argument("--outage", type=float, default=60)
    ap.add_argument("--outage-rate", type=int, default=10_000)
    ap.add_argument("--snapshot-sizes", default="10000,100000,1000000")
    ap.add_argument("--ruleset", action="store_true",
                    help="main, outage: each node enforces its ban set in the kernel")
    ap.add_argument("--ruleset-baseline", action="store_true",
                    help="with --ruleset: each binary's outage also without it, first")
    a = ap.parse_args()
    if a.ruleset:
        outage.private_netns()
    modes = [False, True] if a.ruleset and a.ruleset_baseline else [a.ruleset]
    bins = [b.split("=", 1) for b in a.bin] or [["parapetd", PARAPETD]]
    for _, path in bins:
        if not os.path.exists(path):
            raise SystemExit(f"{path}: build first: cargo build --release -p parapet-daemon")
    out = {}
    for label, path in bins:
        print(f"== {label}: {path}", flush=True)
        phases = a.only.split(",")
        out[label] = {}
        if "main" in phases:
            for mode in modes:
                a.ruleset = mode
                if mode:
                    out[label]["main_ruleset"] = run(a, path)
                else:
                    out[label].update(run(a, path))
        if "outage" in phases:
            for mode in modes:
                a.ruleset = mode
                out[label]["outage_ruleset" if mode else "outage"] = outage.run(a, path)
        if "snapshot" in phases:
            out[label]["snapshot"] = outage.snapshot_sizes(a, path)
    print(json.dumps(out))
    if a.out:
        with open(a.out, "w") as f:
            json.dump(out, f, indent=1)


def run(a, binary):
    tmp = tempfile.mkdtemp(prefix="parapet-fleet-bench-")
    port = free_port()
    nats = subprocess.Popen(["nats-server", "-js", "-a", "127.0.0.1", "-p", str(port),
                             "-sd", os.path.join(tmp, "nats")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"nats://127.0.0.1:{port}"
    nodes = []
    res = {"rate_offered": a.rate, "seconds": a.seconds, "nodes": 3, "ruleset": a.ruleset}
    try:
        wait("nats up", 20, lambda: up(port))
        nodes = [Node(tmp, url, f"n{i}", binary) for i in range(3)]
        if a.ruleset:
            for i, n in enumerate(nodes):
                outage.enforce(n, i)
            wait("the armed ban everywhere", 60,
                 lambda: all(n.stats()["elements"] == 1 for n in nodes), 0.05)
        # Baseline: probes with nothing else going on.
        res["idle"] = summary(probe(nodes, a.probes, 0))
        print("idle:", res["idle"], flush=True)
        # Under load.
        done, ths = [], []
        for i, n in enumerate(nodes):
            t = threading.Thread(target=load, args=(n, 1 + i * 4_000_000, a.rate / 3,
                                                    a.seconds, 1000, done))
            t.start()
            ths.append(t)
        time.sleep(0.5)
        timeouts = []
        lat = probe(nodes, a.probes, 1, timeouts)
        for t in ths:
            t.join()
        acked = sum(s for s, _ in done)
        secs = max(d for _, d in done)
        res["loaded"] = summary(lat)
        res["loaded"]["over_30s"] = sum(timeouts)
        res["rate_acked"] = round(acked / secs)
        t = wait("all nodes equal after the load", 120, lambda: len(
            {x.stats()["elements"] for x in nodes}) == 1, 0.05)
        res["equal_after_load_s"] = round(t, 2)
        print("loaded:", res["loaded"], "acked bans/s:", res["rate_acked"],
              "equal", res["equal_after_load_s"], "s after the load", flush=True)
        # Bootstrap: fill node 0 up to BOOT bans, as fast as it takes them.
        have = nodes[0].stats()["elements"]
        t0 = time.monotonic()
        i = 0
        while have + i < a.boot:
            n = min(10_000, a.boot - have - i)
            nodes[0].c.call(cmd="ban", elems=[addr(13_000_000 + i + j) for j in range(n)],
                            timeout=3600)
            i += n
        res["boot_local_ingest_s"] = round(time.monotonic() - t0, 2)
        target = nodes[0].stats()["elements"]
        wait("backlog published", 600, lambda: nodes[0].stats()["fleet"]["backlog"] == 0, 0.1)
        res["boot_publish_s"] = round(time.monotonic() - t0, 2)
        t0 = time.monotonic()
        fresh = Node(tmp, url, "fresh", binary)
        nodes.append(fresh)
        if a.ruleset:
            # Its ruleset and attachment (as its start-up script would do):
            # part of the time, and reported on their own.
            res["boot_fresh_attach_s"] = round(outage.enforce(fresh, len(nodes) - 1), 2)
            res["boot_fresh_enforce_s"] = round(time.monotonic() - t0, 2)
        res["boot_elements"] = target
        store = {}

        def fresh_holds_all():
            s = fresh.stats()
            if "t" not in store and s["elements"] >= target:
                store["t"] = time.monotonic() - t0
            return s["elements"] >= target and (not a.ruleset or kernel_elements(s) >= target)
        wait("fresh node holds every ban", 600, fresh_holds_all, 0.05)
        res["boot_fresh_store_s"] = round(store["t"], 2)
        # From the start of the fresh process (its start-up included).
        res["boot_fresh_node_s"] = round(time.monotonic() - t0, 2)
        print("bootstrap:", {k: v for k, v in res.items() if k.startswith("boot")}, flush=True)
    finally:
        for n in nodes:
            n.stop()
            if a.ruleset:
                outage.remove_pins(binary, n)
        nats.kill()
        nats.wait()
        if a.ruleset:
            outage.remove_dummies(len(nodes))
        shutil.rmtree(tmp, ignore_errors=True)
    return res


def kernel_elements(s):
    """Elements of the node's kernel ban set (its mirror, written with the
    map in the commit, under the state lock); -1 when it has none."""
    sets = s["dataplane"].get("sets", [])
    return next((x["elements"] for x in sets if x["set"] == "parapet-ban4"), -1)


if __name__ == "__main__":
    sys.exit(main())
