#!/usr/bin/env python3
"""N bans through the real fail2ban, one action after the other, same run.

For each action and each run: a fresh network namespace (so the host
firewall is never touched), a fresh fail2ban config and, for the parapet
actions, a fresh parapetd on a temporary socket and state directory. A jail
watches a temporary log file (`failregex = ^FAIL from <HOST>$`,
`maxretry = 1`); the bench appends N offending lines in one write and
polls the firewall until every address is in it:

    parapet.py      contrib/fail2ban/action.d/parapet.py (one connection)
    parapet.conf    contrib/fail2ban/action.d/parapet.conf (`parapet` CLI,
                    one process per ban)
    floor           a Python action that only notes each address: what
                    fail2ban costs by itself
    parapet.py-nofsync  (only when asked for) parapet.py against a parapetd
                    started with --no-fsync: what its journal syncs cost
    iptables-ipset  fail2ban's own: `ipset -exist add f2b-test IP ...`
    nftables        fail2ban's own nftables-multiport:
                    `nft add element inet f2b-table addr-set-test { IP }`

Measured: seconds from the first log line written to the last address
found in the firewall (`ipset list`, `nft list set`, parapetd's
`set.list`), bans/s, and the CPU seconds fail2ban-server (with the action
processes it reaped) and parapetd used meanwhile. `--feed banip` feeds
`fail2ban-client set test banip ADDR...` instead of the log file.

Needs root, iproute2 and fail2ban (installed with apt-get when missing, as
is python3-pyinotify for the default log backend, as Debian recommends).
Without them it prints `skipped: REASON` and exits 0. Every action run is
bounded by --cap seconds; all namespaces, processes and files it creates
are removed when it ends (also on Ctrl-C).
"""

import argparse
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CONTRIB = os.path.join(ROOT, "contrib", "fail2ban", "action.d")
JAIL = "test"
ALL_ACTIONS = ["floor", "parapet.py", "parapet.conf", "iptables-ipset", "nftables"]
# Not run by default: parapet.py against a parapetd started with --no-fsync,
# to tell the journal's disk syncs from the rest in the same run.
KNOWN_ACTIONS = ALL_ACTIONS + ["parapet.py-nofsync"]
# fail2ban alone: a Python action that only notes each address in a file
# (line-buffered), so that its own cost (log reading, tickets, database)
# can be told apart from the firewall's.
FLOOR_ACTION = """from fail2ban.server.action import ActionBase


class FloorAction(ActionBase):
    def __init__(self, jail, name, path=None, **kwargs):
        super(FloorAction, self).__init__(jail, name)
        self.path = path
        self.f = None

    def start(self):
        self.f = open(self.path, "a", buffering=1)

    def stop(self):
        self.f.close()

    def ban(self, aInfo):
        self.f.write(str(aInfo["ip"]) + "\\n")

    def unban(self, aInfo):
        pass


Action = FloorAction
"""
POLL = 0.1


def skip(reason):
    print("skipped: " + reason)
    sys.exit(0)


def ban_addr(i):
    """10.0.0.1, 10.0.0.3, ...: the peers bench's ban addresses (odd, so
    that no two are adjacent)."""
    v = 0x0A000000 + 2 * i + 1
    return "%d.%d.%d.%d" % (v >> 24, (v >> 16) & 255, (v >> 8) & 255, v & 255)


def run(cmd, ns=None, check=True, **kw):
    if ns:
        cmd = ["ip", "netns", "exec", ns] + cmd
    return subprocess.run(cmd, check=check, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def have(prog):
    return shutil.which(prog) is not None


def ensure_fail2ban():
    if have("fail2ban-server") and have("fail2ban-client"):
        return True
    print("fail2ban not found; trying `apt-get install -y fail2ban`", file=sys.stderr)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "install", "-y", "-qq", "fail2ban"], env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return have("fail2ban-server") and have("fail2ban-client")


def ensure_pyinotify():
    # What Debian's fail2ban recommends, and so what `auto` picks on a
    # default install; fail2ban-server runs under /usr/bin/python3.
    check = ["/usr/bin/python3", "-c", "import pyinotify"]
    if subprocess.run(check, stderr=subprocess.DEVNULL).returncode == 0:
        return
    print("pyinotify not found; trying `apt-get install -y python3-pyinotify`", file=sys.stderr)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "install", "-y", "-qq", "python3-pyinotify"], env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def cpu_seconds(pid, children=True):
    """utime + stime (+ reaped children's) of `pid`, in seconds."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # fields[0] is field 3 (state): utime is field 14.
    ticks = int(fields[11]) + int(fields[12])
    if children:
        ticks += int(fields[13]) + int(fields[14])
    return ticks / os.sysconf("SC_CLK_TCK")


class Parapetd:
    """parapetd on a temporary socket and state directory."""

    def __init__(self, binary, workdir, fsync=True):
        self.dir = os.path.join(workdir, "parapetd")
        os.makedirs(self.dir)
        self.sock = os.path.join(self.dir, "sock")
        self.proc = subprocess.Popen(
            [binary, "--socket", self.sock, "--state-dir", os.path.join(self.dir, "state")]
            + ([] if fsync else ["--no-fsync"]),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=open(os.path.join(self.dir, "err"), "w"))
        t0 = time.monotonic()
        while True:
            try:
                self.conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                self.conn.connect(self.sock)
                break
            except OSError:
                self.conn.close()
                if self.proc.poll() is not None or time.monotonic() - t0 > 20:
                    raise RuntimeError("parapetd did not open %s" % self.sock)
                time.sleep(0.02)
        self.rfile = self.conn.makefile("rb")
        self.next_id = 1

    def call(self, req):
        rid = self.next_id
        self.next_id += 1
        self.conn.sendall((json.dumps(dict(req, v=1, id=rid)) + "\n").encode())
        reply = json.loads(self.rfile.readline())
        if not reply.get("ok"):
            raise RuntimeError("parapetd: %s" % reply.get("error"))
        return reply

    def close(self):
        try:
            self.conn.close()
        except OSError:
            pass
        self.proc.kill()
        self.proc.wait()


# -- the firewall's view, per action ----------------------------------------

def ipset_count(ns):
    r = run(["ipset", "list", "f2b-" + JAIL, "-t"], ns=ns, check=False)
    for line in r.stdout.splitlines():
        if line.startswith("Number of entries:"):
            return int(line.split(":")[1])
    return 0


def ipset_members(ns):
    r = run(["ipset", "save", "f2b-" + JAIL], ns=ns, check=False)
    return {w[2] for w in (l.split() for l in r.stdout.splitlines()) if len(w) >= 3 and w[0] == "add"}


def nft_members(ns):
    r = run(["nft", "-j", "list", "set", "inet", "f2b-table", "addr-set-" + JAIL], ns=ns, check=False)
    if r.returncode != 0:
        return set()
    out = set()
    for obj in json.loads(r.stdout).get("nftables", []):
        for e in obj.get("set", {}).get("elem", []):
            out.add(e if isinstance(e, str) else json.dumps(e))
    return out


def parapet_count(d):
    for s in d.call({"cmd": "set.list"}).get("sets", []):
        if s.get("set") == "f2b-" + JAIL:
            return int(s.get("elements", 0))
    return 0


def parapet_members(d):
    try:
        r = d.call({"cmd": "set.list", "set": "f2b-" + JAIL})
    except RuntimeError:
        return set()
    return {e["elem"] for e in r.get("elems", [])}


# -- one measurement ---------------------------------------------------------

def write_config(conf, work, action_spec, backend):
    os.makedirs(os.path.join(conf, "action.d"))
    os.makedirs(os.path.join(conf, "filter.d"))
    # fail2ban's own actions (and what they include) from the installed
    # package, parapet's from the repository.
    for f in os.listdir("/etc/fail2ban/action.d"):
        src = os.path.join("/etc/fail2ban/action.d", f)
        if os.path.isfile(src):
            shutil.copy(src, os.path.join(conf, "action.d", f))
    for f in ("parapet.py", "parapet.conf"):
        shutil.copy(os.path.join(CONTRIB, f), os.path.join(conf, "action.d", f))
    with open(os.path.join(conf, "action.d", "bench-floor.py"), "w") as f:
        f.write(FLOOR_ACTION)
    p = lambda n: os.path.join(work, n)
    with open(os.path.join(conf, "fail2ban.conf"), "w") as f:
        f.write("[Definition]\nloglevel = INFO\nlogtarget = %s\nsocket = %s\npidfile = %s\n"
                "dbfile = %s\n" % (p("f2b.log"), p("f2b.sock"), p("f2b.pid"), p("f2b.sqlite3")))
    with open(os.path.join(conf, "filter.d", "bench.conf"), "w") as f:
        f.write("[Definition]\nfailregex = ^FAIL from <HOST>$\ndatepattern = {NONE}\n")
    with open(os.path.join(conf, "jail.conf"), "w") as f:
        f.write("[DEFAULT]\nbackend = %s\n\n[%s]\nenabled = true\nfilter = bench\nlogpath = %s\n"
                "maxretry = 1\nfindtime = 3600\nbantime = 3600\naction = %s\n"
                % (backend, JAIL, p("auth.log"), action_spec))


class Bed:
    """Namespace + fail2ban-server (+ parapetd) for one action run."""

    def __init__(self, action, args, tag):
        self.action = action
        # Named as crates/parapet-testbed names its namespaces,
        # pp-<tag>-<pid>-<seq>, so leftovers are recognised the same way.
        self.ns = "pp-f2b-%d-%s" % (os.getpid(), tag)
        self.work = tempfile.mkdtemp(prefix="parapet-f2b-")
        self.server = None
        self.parapetd = None
        self.server_pid = None
        try:
            self._start(args)
        except BaseException:
            self.close()
            raise

    def _start(self, args):
        action = self.action
        run(["ip", "netns", "add", self.ns])
        run(["ip", "link", "set", "lo", "up"], ns=self.ns)
        if action.startswith("parapet"):
            fsync = action != "parapet.py-nofsync"
            self.parapetd = Parapetd(args.parapetd, self.work, fsync=fsync)
        sock = self.parapetd.sock if self.parapetd else ""
        spec = {
            "floor": 'bench-floor.py[path="%s"]' % self.path("floor.txt"),
            "parapet.py": 'parapet.py[socket="%s"]' % sock,
            "parapet.py-nofsync": 'parapet.py[socket="%s"]' % sock,
            "parapet.conf": 'parapet[name=%s, socket="%s", parapet_bin="%s"]' % (JAIL, sock, args.parapet),
            "iptables-ipset": "iptables-ipset[name=%s]" % JAIL,
            "nftables": "nftables-multiport[name=%s]" % JAIL,
        }[action]
        conf = os.path.join(self.work, "conf")
        write_config(conf, self.work, spec, args.backend)
        open(os.path.join(self.work, "auth.log"), "w").close()
        self.server = subprocess.Popen(
            ["ip", "netns", "exec", self.ns, "fail2ban-server", "-f", "-x", "-c", conf,
             "-s", self.path("f2b.sock"), "-p", self.path("f2b.pid")],
            stdin=subprocess.DEVNULL, stdout=open(self.path("f2b.out"), "w"),
            stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 60
        while "Jail '%s' started" % JAIL not in self.log():
            if self.server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("fail2ban did not start the jail:\n" + self.log()[-3000:])
            time.sleep(0.05)
        with open(self.path("f2b.pid")) as f:
            self.server_pid = int(f.read().split()[0])
        if action.startswith("parapet.py"):
            # The Python action creates its sets when the jail starts; wait
            # for that so that polling never races it.
            while not any(s.get("set") == "f2b-" + JAIL
                          for s in self.parapetd.call({"cmd": "set.list"}).get("sets", [])):
                if time.monotonic() > deadline:
                    raise RuntimeError("parapet.py did not create its set:\n" + self.log()[-3000:])
                time.sleep(0.05)

    def path(self, n):
        return os.path.join(self.work, n)

    def log(self):
        out = ""
        for n in ("f2b.log", "f2b.out"):
            try:
                with open(self.path(n)) as f:
                    out += f.read()
            except OSError:
                pass
        return out

    def floor_lines(self):
        try:
            with open(self.path("floor.txt")) as f:
                return f.read().split()
        except OSError:
            return []

    def backend(self):
        m = re.search(r"Jail '%s' uses (\w+)" % JAIL, self.log())
        return m.group(1) if m else None

    def count(self):
        if self.action == "floor":
            return len(self.floor_lines())
        if self.parapetd:
            return parapet_count(self.parapetd)
        if self.action == "iptables-ipset":
            return ipset_count(self.ns)
        return len(nft_members(self.ns))

    def members(self):
        if self.action == "floor":
            return set(self.floor_lines())
        if self.parapetd:
            return parapet_members(self.parapetd)
        if self.action == "iptables-ipset":
            return ipset_members(self.ns)
        return nft_members(self.ns)

    def cpu(self):
        f2b = cpu_seconds(self.server_pid) or 0.0
        d = cpu_seconds(self.parapetd.proc.pid) if self.parapetd else 0.0
        return f2b, d or 0.0

    def close(self):
        if self.server and self.server.poll() is None:
            try:
                os.killpg(self.server.pid, signal.SIGKILL)
            except OSError:
                pass
            self.server.wait()
        if self.parapetd:
            self.parapetd.close()
        run(["ip", "netns", "del", self.ns], check=False)
        shutil.rmtree(self.work, ignore_errors=True)


def measure(action, addrs, args, tag):
    bed = Bed(action, args, tag)
    try:
        cpu0 = bed.cpu()
        t0 = time.monotonic()
        if args.feed == "log":
            with open(bed.path("auth.log"), "a") as f:
                f.write("".join("FAIL from %s\n" % a for a in addrs))
        else:
            r = run(["fail2ban-client", "-s", bed.path("f2b.sock"), "set", JAIL, "banip"] + addrs,
                    check=False)
            if r.returncode != 0:
                raise RuntimeError("banip failed: " + r.stderr[-2000:])
        deadline = t0 + args.cap
        n = 0
        while True:
            n = bed.count()
            now = time.monotonic()
            if n >= len(addrs) or now > deadline:
                break
            time.sleep(POLL)
        secs = now - t0
        cpu1 = bed.cpu()
        members = bed.members()
        missing = [a for a in addrs if a not in members]
        log = bed.log()
        errors = [l for l in log.splitlines() if " ERROR " in l or " -- returned " in l]
        rec = {
            "action": action, "feed": args.feed, "backend": bed.backend(), "bans": len(addrs), "done": len(addrs) - len(missing),
            "complete": not missing, "seconds": round(secs, 3),
            "bans_per_s": round((len(addrs) - len(missing)) / secs, 1) if secs > 0 else None,
            "cpu_fail2ban_s": round(cpu1[0] - cpu0[0], 2),
            "cpu_parapetd_s": round(cpu1[1] - cpu0[1], 2),
            "errors": len(errors),
            # The machine may be shared: say how busy it was.
            "loadavg_1m": round(os.getloadavg()[0], 2),
        }
        if missing:
            rec["missing_sample"] = missing[:5]
        if errors:
            rec["error_sample"] = errors[:3]
        return rec
    finally:
        bed.close()


def median_spread(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return None, None, None
    return statistics.median(xs), min(xs), max(xs)


def table(records, actions):
    rows = ["| action | runs | complete | time to last ban, s (median, min–max) | bans/s (median) "
            "| CPU fail2ban-server + actions, s | CPU parapetd, s |",
            "|---|---|---|---|---|---|---|"]
    for a in actions:
        rs = [r for r in records if r["action"] == a]
        if not rs:
            continue
        m, lo, hi = median_spread([r["seconds"] for r in rs])
        b, _, _ = median_spread([r["bans_per_s"] for r in rs])
        c, _, _ = median_spread([r["cpu_fail2ban_s"] for r in rs])
        d, _, _ = median_spread([r["cpu_parapetd_s"] for r in rs])
        ok = sum(r["complete"] for r in rs)
        rows.append("| %s | %d | %d/%d | %.2f (%.2f–%.2f) | %s | %.2f | %s |" % (
            a, len(rs), ok, len(rs), m, lo, hi, "{:,.0f}".format(b) if b is not None else "–", c,
            "%.2f" % d if a.startswith("parapet") else "–"))
    return "\n".join(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bans", type=int, default=7990)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--cap", type=float, default=600, help="seconds per action run (default 600)")
    ap.add_argument("--actions", default=",".join(ALL_ACTIONS))
    ap.add_argument("--feed", choices=["log", "banip"], default="log")
    ap.add_argument("--backend", default="auto",
                    help="fail2ban log backend (default auto: pyinotify, installed when missing, "
                         "else polling; each record says which ran)")
    ap.add_argument("--parapetd", default=os.path.join(ROOT, "target", "release", "parapetd"))
    ap.add_argument("--parapet", default=os.path.join(ROOT, "target", "release", "parapet"))
    ap.add_argument("--json", help="write every record to this file")
    ap.add_argument("--strict", action="store_true",
                    help="exit 1 unless every run banned every address without an action error")
    args = ap.parse_args()
    actions = [a for a in args.actions.split(",") if a]
    for a in actions:
        if a not in KNOWN_ACTIONS:
            ap.error("unknown action %r (known: %s)" % (a, ", ".join(KNOWN_ACTIONS)))
    if args.bans < 1 or args.runs < 1 or args.cap <= 0:
        ap.error("--bans, --runs and --cap must be positive")

    if os.geteuid() != 0:
        skip("needs root (network namespaces, ipset, nft)")
    if not have("ip"):
        skip("iproute2 (`ip`) not found")
    if not ensure_fail2ban():
        skip("fail2ban is not installed and could not be installed")
    if args.feed == "log" and args.backend in ("auto", "pyinotify"):
        ensure_pyinotify()
    for a in list(actions):
        missing = {"floor": [], "parapet.py": [args.parapetd], "parapet.py-nofsync": [args.parapetd], "parapet.conf": [args.parapetd, args.parapet],
                   "iptables-ipset": ["ipset", "iptables"], "nftables": ["nft"]}[a]
        gone = [m for m in missing if not (os.path.isfile(m) if os.sep in m else have(m))]
        if gone:
            print("%s: skipped: %s not found" % (a, ", ".join(gone)))
            actions.remove(a)
    if not actions:
        skip("no action can run here")

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    addrs = [ban_addr(i) for i in range(args.bans)]
    version = run(["fail2ban-server", "-V"], check=False).stdout.split("\n")[0].strip()
    print("fail2ban %s, %d bans, feed %s, backend %s, %d run(s), cap %.0f s per action run"
          % (version, args.bans, args.feed, args.backend, args.runs, args.cap), file=sys.stderr)
    records = []
    failed = False
    for r in range(args.runs):
        # Rotate the order so that no action always runs first (cold caches)
        # or last.
        order = actions[r % len(actions):] + actions[:r % len(actions)]
        for a in order:
            rec = measure(a, addrs, args, "%d-%d" % (r, actions.index(a)))
            rec["run"] = r + 1
            records.append(rec)
            print(json.dumps(rec), file=sys.stderr, flush=True)
            failed |= not rec["complete"] or rec["errors"] > 0
    print(table(records, actions))
    print("\nfail2ban %s, %d bans per run, feed %s, log backend %s" % (
        version, args.bans, args.feed,
        ", ".join(sorted({str(r.get("backend")) for r in records}))))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"fail2ban": version, "bans": args.bans, "feed": args.feed, "backend": args.backend,
                       "cap_s": args.cap, "records": records}, f, indent=1)
    if args.strict and failed:
        sys.exit(1)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)
