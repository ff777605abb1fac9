"""Phases 3 and 4 of bench/fleet/run.py: a broker outage under load, and
bootstrap time against the number of bans (snapshot path against log
replay). Helpers come from run.py (imported lazily: run.py imports this)."""

import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time


class Broker:
    """nats-server with JetStream on a fixed port and store, restartable."""

    def __init__(self, tmp):
        import run
        self.port = run.free_port()
        self.store = os.path.join(tmp, "nats")
        self.url = f"nats://127.0.0.1:{self.port}"
        self.p = None
        self.start()

    def start(self):
        import run
        self.p = subprocess.Popen(["nats-server", "-js", "-a", "127.0.0.1", "-p", str(self.port),
                                   "-sd", self.store],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        run.wait("nats up", 20, lambda: run.up(self.port))

    def stop(self):
        if self.p:
            self.p.terminate()
            self.p.wait(20)
            self.p = None


class Timeline(threading.Thread):
    """Polls every node's `stats` (its own connections) every 50 ms from
    the broker's return: per node, when the fleet link is up again, when
    its outbox is empty for good, and when it holds every ban; the phases
    of the catch-up (where the time goes)."""

    def __init__(self, nodes, t_up):
        import run
        super().__init__(daemon=True)
        self.clients = [run.Client(n.sock) for n in nodes]
        self.t_up = t_up
        self.rows = [[] for _ in nodes]
        self.halt = threading.Event()

    def run(self):
        deadline = time.monotonic() + 900
        while not self.halt.is_set() and time.monotonic() < deadline:
            for c, rows in zip(self.clients, self.rows):
                s = c.call(cmd="stats")
                f = s["fleet"]
                rows.append((time.monotonic() - self.t_up, f["connected"], f["backlog"],
                             s["elements"], f["stream_seq"]))
            time.sleep(0.05)

    def phases(self, acked):
        """Seconds from the broker's return, per node."""
        out = []
        for rows in self.rows:
            up = next((t for t, c, *_ in rows if c), None)
            # The outbox empty from then on (not a momentary zero while
            # the load still runs).
            busy = [t for t, _, b, *_ in rows if b > 0]
            drained = next((t for t, _, b, *_ in rows if b == 0 and t > busy[-1]),
                           None) if busy else (rows[0][0] if rows else None)
            full = next((t for t, _, _, e, *_ in rows if e >= acked), None)
            # The consumer's first delivery after the return.
            seq0 = rows[0][4] if rows else 0
            consuming = next((t for t, *_, q in rows if q > seq0), None)
            out.append({"connected_s": r2(up), "consuming_s": r2(consuming),
                        "outbox_drained_s": r2(drained), "holds_all_s": r2(full)})
        return out


def r2(x):
    return None if x is None else round(x, 2)


CLONE_NEWNET = 0x40000000

# What a node enforces with --ruleset: drop the ban set's members.
BAN4_RULES = ("*filter\n:INPUT ACCEPT [0:0]\n"
              "-A INPUT -m set --match-set parapet-ban4 src -j DROP\nCOMMIT\n")
# Banned on every node before the load, to create the ban set the ruleset
# names (one element more on every node, outside the load's addresses).
ARM_ADDR = "192.0.2.1"


def private_netns():
    """Moves this process (and so the broker and nodes it starts) into a
    new network namespace with `lo` up: the veth interfaces and the
    dataplanes attached to them stay in it."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNET) != 0:
        raise SystemExit(f"--ruleset: unshare(CLONE_NEWNET): errno {ctypes.get_errno()} (root?)")
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)


def enforce(node, i):
    """The node's ban set into its kernel: the set (by a ban), the ruleset
    that drops its members, the dataplane attached to a veth of its own.
    Returns the seconds the attach took."""
    dev = f"fleet{i}"
    # (a veth pair: the kernel here has no dummy interfaces)
    subprocess.run(["ip", "link", "add", dev, "type", "veth", "peer", "name", dev + "p"],
                   check=True)
    for d in (dev, dev + "p"):
        subprocess.run(["ip", "link", "set", d, "up"], check=True)
    node.c.call(cmd="ban", elems=[ARM_ADDR], timeout=3600)
    node.c.call(cmd="apply", rules=BAN4_RULES, name="fleet.rules")
    t0 = time.monotonic()
    node.c.call(cmd="attach", iface=dev, hook="xdp", mode="skb")
    # The first attach loads the programs (the verifier's time, mostly).
    return time.monotonic() - t0


def remove_pins(binary, node):
    """A killed node's pins outlive it (they keep enforcing): removed."""
    subprocess.run([binary, "--state-dir", os.path.join(node.dir, "st"), "--remove-pinned"],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def remove_dummies(n):
    for i in range(n):
        subprocess.run(["ip", "link", "del", f"fleet{i}"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def cpu_s(pid):
    """CPU seconds (user + system) of `pid` so far, exited threads
    included (/proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def profile_catch_up(node):
    """With PARAPET_FLEET_PERF=FILE: `perf record -g` of one node from the
    broker's return until every node is equal (its catch-up), into FILE."""
    spec = os.environ.get("PARAPET_FLEET_PERF")
    if not spec:
        return None
    return subprocess.Popen(
        ["perf", "record", "-g", "-F", "499", "-o", spec, "-p", str(node.p.pid)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def run(a, binary):
    """Broker stopped for a.outage s while a.outage_rate bans/s are offered
    across three nodes; seconds from its return until all are equal."""
    import run as r
    tmp = tempfile.mkdtemp(prefix="parapet-fleet-outage-")
    broker = Broker(tmp)
    nodes = []
    res = {"outage_s": a.outage, "rate_offered": a.outage_rate, "ruleset": a.ruleset}
    extra = 0
    try:
        nodes = [r.Node(tmp, broker.url, f"n{i}", binary) for i in range(3)]
        if a.ruleset:
            for i, n in enumerate(nodes):
                enforce(n, i)
            extra = 1
            r.wait("the armed ban everywhere", 60,
                   lambda: all(n.stats()["elements"] == extra for n in nodes), 0.05)
        done, ths = [], []
        for i, n in enumerate(nodes):
            t = threading.Thread(target=r.load, args=(n, 1 + i * 4_000_000, a.outage_rate / 3,
                                                    a.outage + 2, 100, done))
            t.start()
            ths.append(t)
        time.sleep(1)
        broker.stop()
        t_down = time.monotonic()
        time.sleep(a.outage)
        res["backlog_at_return"] = sum(n.stats()["fleet"]["backlog"] for n in nodes)
        broker.start()
        t_up = time.monotonic()
        perf = profile_catch_up(nodes[1])
        pids = {f"n{i}": n.p.pid for i, n in enumerate(nodes)}
        pids["nats"] = broker.p.pid
        cpu0 = {k: cpu_s(v) for k, v in pids.items()}
        timeline = Timeline(nodes, t_up)
        timeline.start()
        res["down_s"] = round(t_up - t_down, 2)
        for t in ths:
            t.join()
        res["load_end_s"] = round(time.monotonic() - t_up, 2)
        acked = sum(s for s, _ in done) + extra
        res["bans_acked"] = acked - extra

        def in_kernel(s):
            """Elements of the kernel's ban set (its mirror, written with
            the map under the state lock); without --ruleset, the store's."""
            if not a.ruleset:
                return s["elements"]
            sets = s["dataplane"].get("sets", [])
            return next((x["elements"] for x in sets if x["set"] == "parapet-ban4"), -1)

        def equal():
            st = [n.stats() for n in nodes]
            return all(s["elements"] == acked and in_kernel(s) == acked
                       and s["fleet"]["backlog"] == 0 for s in st)
        r.wait("all nodes equal after the outage", 600, equal, 0.05)
        # From the broker's return (its port open), as the target says.
        res["equal_after_return_s"] = round(time.monotonic() - t_up, 2)
        # CPU seconds of each process from the broker's return to equal
        res["catch_up_cpu_s"] = {k: round(cpu_s(v) - cpu0[k], 2) for k, v in pids.items()}
        if perf:
            perf.send_signal(signal.SIGINT)
            perf.wait()
        time.sleep(0.1)
        timeline.halt.set()
        timeline.join()
        res["phases"] = timeline.phases(acked)
        print("outage:", res, flush=True)
    finally:
        for n in nodes:
            n.stop()
            if a.ruleset:
                remove_pins(binary, n)
        broker.stop()
        if a.ruleset:
            remove_dummies(len(nodes))
        shutil.rmtree(tmp, ignore_errors=True)
    return res


def fill(node, n, base):
    i = 0
    while i < n:
        k = min(10_000, n - i)
        node.c.call(cmd="ban", elems=[addr(base + i + j) for j in range(k)], timeout=3600)
        i += k


def addr(i):
    return f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}"


def snapshot_sizes(a, binary):
    """Per size N: a fresh node's bootstrap through the newest snapshot and,
    in the same run, through replaying the log (no snapshot written)."""
    import run as r
    out = []
    for n in [int(x) for x in a.snapshot_sizes.split(",")]:
        row = {"bans": n}
        for path, extra in (("snapshot", ["--fleet-snapshot-s", "1"]),
                            ("log_replay", ["--fleet-snapshot-s", "0"])):
            tmp = tempfile.mkdtemp(prefix="parapet-fleet-snap-")
            broker = Broker(tmp)
            nodes = []
            try:
                src = r.Node(tmp, broker.url, "src", binary, extra)
                nodes.append(src)
                fill(src, n, 1)
                # Published and back from the log: a snapshot written
                # after that is at the log's end (before it, at 0).
                r.wait("published", 600, lambda: src.stats()["fleet"]["backlog"] == 0
                       and src.stats()["fleet"]["in_flight"] == 0, 0.05)
                if path == "snapshot":
                    s0 = src.stats()["fleet"]["snapshots"]
                    r.wait("snapshot written", 600,
                           lambda: src.stats()["fleet"]["snapshots"] > s0, 0.05)
                t0 = time.monotonic()
                fresh = r.Node(tmp, broker.url, "fresh", binary, ["--fleet-snapshot-s", "0"])
                nodes.append(fresh)
                r.wait("fresh node holds every ban", 600,
                       lambda: fresh.stats()["elements"] >= n, 0.02)
                row[f"{path}_s"] = round(time.monotonic() - t0, 3)
                if path == "snapshot":
                    row["boot_snapshot_at"] = fresh.stats()["fleet"]["boot_snapshot_at"]
            finally:
                for x in nodes:
                    x.stop()
                broker.stop()
                shutil.rmtree(tmp, ignore_errors=True)
        print("bootstrap:", row, flush=True)
        out.append(row)
    return out
