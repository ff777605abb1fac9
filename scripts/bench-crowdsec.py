#!/usr/bin/env python3
"""CrowdSec decisions to enforcement: parapetd --crowdsec against the real
crowdsec-firewall-bouncer in its nftables mode and in its ipset mode (two
bouncer processes), same run, same Local API.

Everything runs in a network namespace this script creates (removed at the
end): Debian's `crowdsec` as the Local API alone (temporary config, SQLite
in a temporary directory), `parapetd --crowdsec` with its dataplane attached
(XDP) to a veth there, and `crowdsec-firewall-bouncer` twice: in nftables
mode and in ipset mode (the script creates its ipsets, which that mode
fills and never creates). All poll every second; parapetd also in full every RESYNC (env, default
10) seconds. Each side gets CAP (env, default 60) seconds after the import
(and 60 s after the delete): one still short then is recorded as never
complete (null), with the count its set held at the cap (`*_count_at_cap`:
a bound on its speed). Times are from the import's return (`*_s`) and from
its start (`*_from_start_s`: both sides see decisions while it runs).
The namespace is NS (env, default `pcsbench`). For each size N, `cscli decisions import` of N
fresh IPv4 decisions; then the time from the import's end until
  - parapet: its sets hold all N (stats `elements`; committed, journaled
    with fsync, mirrored into the kernel map),
  - bouncer (nftables): nft set crowdsec-blacklists holds all N (the last
    imported address first, then the count),
  - bouncer (ipset): ipset crowdsec-blacklists holds all N (likewise),
then `cscli decisions delete --all` and the time until both are empty.
Prints one JSON line per round and a summary (median, min, max); memory
is each process's RSS when the round's enforcement ended and its peak
RSS (VmHWM) so far.

Usage (root): scripts/bench-crowdsec.py PARAPETD PARAPET [SIZES] [ROUNDS]
"""

import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

NS = os.environ.get("NS", "pcsbench")
CAP_S = float(os.environ.get("CAP", "60"))
LIMIT_S = 600


def sh(*args, check=True, ns=True, **kw):
    argv = (["ip", "netns", "exec", NS] if ns else []) + list(args)
    return subprocess.run(argv, check=check, capture_output=True, text=True, **kw)


def wait(what, f, limit=LIMIT_S, step=0.01):
    t0 = time.monotonic()
    while not f():
        if time.monotonic() - t0 > limit:
            raise SystemExit(f"timed out: {what}")
        time.sleep(step)
    return time.monotonic()


def rss_kib(pid, field="VmRSS"):
    """Resident memory now (VmRSS) or at its peak so far (VmHWM)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def main():
    # SIGTERM runs the clean-up below too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    parapetd, parapet = sys.argv[1], sys.argv[2]
    sizes = [int(x) for x in (sys.argv[3] if len(sys.argv) > 3 else "1,10000,100000").split(",")]
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    d = tempfile.mkdtemp(prefix="pcsbench.")
    procs = []
    subprocess.run(["ip", "netns", "del", NS], capture_output=True)
    subprocess.run(["ip", "netns", "add", NS], check=True)
    try:
        sh("ip", "link", "set", "lo", "up")
        sh("ip", "link", "add", "pcs-a", "type", "veth", "peer", "name", "pcs-b")
        sh("ip", "addr", "add", "10.250.9.1/30", "dev", "pcs-a")
        sh("ip", "link", "set", "pcs-a", "up")
        sh("ip", "link", "set", "pcs-b", "up")
        os.makedirs(f"{d}/data")
        port = 18090
        cfg = f"""common:
  daemonize: false
  log_media: stdout
  log_level: warning
  working_dir: {d}
config_paths:
  config_dir: {d}/
  data_dir: {d}/data/
  hub_dir: {d}/hub/
  index_path: {d}/hub/.index.json
db_config:
  type: sqlite
  db_path: {d}/data/crowdsec.db
  use_wal: true
  flush:
    max_items: 10000000
    max_age: 7d
api:
  client:
    credentials_path: {d}/local_api_credentials.yaml
  server:
    log_level: warning
    listen_uri: 127.0.0.1:{port}
    profiles_path: /etc/crowdsec/profiles.yaml
    trusted_ips:
      - 127.0.0.1
prometheus:
  enabled: false
"""
        open(f"{d}/config.yaml", "w").write(cfg)
        open(f"{d}/local_api_credentials.yaml", "w").write("")
        url = f"http://127.0.0.1:{port}"

        def cscli(*a):
            r = sh("cscli", "-c", f"{d}/config.yaml", *a, check=False)
            if r.returncode != 0:
                raise SystemExit(f"cscli {' '.join(a)}: {r.stderr.strip()[-500:]}")
            return r.stdout

        cscli("machines", "add", "bench", "--password", "bench-password-0123456789",
              "-f", f"{d}/local_api_credentials.yaml", "--url", url)
        log = open(f"{d}/crowdsec.log", "w")
        procs.append(subprocess.Popen(["ip", "netns", "exec", NS, "crowdsec", "-c", f"{d}/config.yaml",
                                       "-no-cs", "-no-capi"], stdout=log, stderr=log))

        def lapi_up():
            r = sh("bash", "-c", f"exec 3<>/dev/tcp/127.0.0.1/{port}", check=False)
            return r.returncode == 0
        wait("LAPI up", lapi_up, 30, 0.1)
        pkey = cscli("-oraw", "bouncers", "add", "parapet").strip()
        bkey = cscli("-oraw", "bouncers", "add", "nftbouncer").strip()
        ikey = cscli("-oraw", "bouncers", "add", "ipsetbouncer").strip()
        open(f"{d}/parapet.key", "w").write(pkey)
        # ipset mode only adds to sets that exist (timeouts per element).
        sh("ipset", "create", "crowdsec-blacklists", "hash:ip", "timeout", "0", "maxelem", "1000000")
        sh("ipset", "create", "crowdsec6-blacklists", "hash:ip", "family", "inet6", "timeout", "0",
           "maxelem", "1000000")
        os.makedirs(f"{d}/ipset")

        def bouncer_yaml(path, mode, rundir, key, backend):
            """The bouncer's configuration: what both modes share, then the
            mode's own section."""
            open(path, "w").write(f"""mode: {mode}
pid_dir: {rundir}/
update_frequency: 1s
daemonize: false
log_mode: file
log_dir: {rundir}/
log_level: warning
api_url: {url}/
api_key: {key}
disable_ipv6: false
deny_action: DROP
deny_log: false
supported_decisions_types:
  - ban
blacklists_ipv4: crowdsec-blacklists
blacklists_ipv6: crowdsec6-blacklists
{backend}prometheus:
  enabled: false
""")
        bouncer_yaml(f"{d}/ipset-bouncer.yaml", "ipset", f"{d}/ipset", ikey, "ipset_type: nethash\n")
        nft = "".join(f"""  ipv{v}:
    enabled: true
    set-only: false
    table: crowdsec{t}
    chain: crowdsec{t}-chain
""" for v, t in ((4, ""), (6, "6")))
        bouncer_yaml(f"{d}/bouncer.yaml", "nftables", d, bkey, "nftables:\n" + nft)
        sock = f"{d}/parapet.sock"
        plog = open(f"{d}/parapetd.log", "w")
        pd = subprocess.Popen(["ip", "netns", "exec", NS, parapetd, "--socket", sock, "--state-dir", f"{d}/state",
                               "--crowdsec", url, "--crowdsec-key-file", f"{d}/parapet.key",
                               "--crowdsec-interval", "1", "--crowdsec-resync", os.environ.get("RESYNC", "10")], stdout=plog, stderr=plog)
        procs.append(pd)
        blog = open(f"{d}/bouncer.out", "w")
        bo = subprocess.Popen(["ip", "netns", "exec", NS, "crowdsec-firewall-bouncer", "-c", f"{d}/bouncer.yaml"],
                              stdout=blog, stderr=blog)
        procs.append(bo)
        ilog = open(f"{d}/ipset-bouncer.out", "w")
        bi = subprocess.Popen(["ip", "netns", "exec", NS, "crowdsec-firewall-bouncer", "-c", f"{d}/ipset-bouncer.yaml"],
                              stdout=ilog, stderr=ilog)
        procs.append(bi)

        def pcall(*a):
            return subprocess.run([parapet, "--socket", sock, *a], capture_output=True, text=True)
        wait("parapetd up", lambda: pcall("stats", "--json").returncode == 0, 30, 0.05)
        rules = f"{d}/rules"
        open(rules, "w").write("*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -m set --match-set parapet-ban4 src -j DROP\nCOMMIT\n")
        subprocess.run([parapet, "--socket", sock, "ban", "10.99.99.99", "--timeout", "3600"], check=True, capture_output=True)
        subprocess.run([parapet, "--socket", sock, "apply", rules], check=True, capture_output=True)
        subprocess.run([parapet, "--socket", sock, "attach", "pcs-a", "--hook", "xdp"], check=True, capture_output=True)
        base = 1  # the set-creating ban above

        def p_elements():
            r = pcall("stats", "--json")
            return json.loads(r.stdout)["elements"] if r.returncode == 0 else -1

        def nft_has(ip):
            r = sh("nft", "get", "element", "ip", "crowdsec", "crowdsec-blacklists", "{ " + ip + " }", check=False)
            return r.returncode == 0

        def nft_count():
            r = sh("nft", "-j", "list", "set", "ip", "crowdsec", "crowdsec-blacklists", check=False)
            if r.returncode != 0:
                return -1
            for o in json.loads(r.stdout)["nftables"]:
                if "set" in o:
                    return len(o["set"].get("elem", []))
            return 0

        def ipset_has(ip):
            return sh("ipset", "test", "crowdsec-blacklists", ip, check=False).returncode == 0

        def ipset_count():
            r = sh("ipset", "list", "-t", "crowdsec-blacklists", check=False)
            for line in r.stdout.splitlines():
                if line.startswith("Number of entries:"):
                    return int(line.split(":")[1])
            return -1

        wait("bouncer's nft set", lambda: nft_count() == 0, 60, 0.2)
        results = {}
        off = 0
        for n in sizes:
            for r in range(rounds):
                ips = [f"{11 + (off + i) // 65536 % 200}.{(off + i) // 256 % 256}.{(off + i) % 256}.1" for i in range(n)]
                off += n
                csv = f"{d}/import.csv"
                with open(csv, "w") as f:
                    f.write("duration,scope,type,value\n")
                    for ip in ips:
                        f.write(f"1h,ip,ban,{ip}\n")
                t0 = time.monotonic()
                # Under load the LAPI's SQLite can refuse a big import
                # ("database is locked"; nothing imported): try again, at
                # most 6 times, 2 s apart; the import time includes the tries.
                for attempt in range(6):
                    try:
                        cscli("decisions", "import", "-i", csv)
                        break
                    except SystemExit as e:
                        if "database is locked" not in str(e) or attempt == 5:
                            raise
                        print(f"import refused (database is locked), try {attempt + 2}", flush=True)
                        time.sleep(2)
                t1 = time.monotonic()
                done = {}
                seen = {"bouncer_count": 0, "ipset_count": 0, "parapet_count": 0}

                def check():
                    now = time.monotonic()
                    if "parapet" not in done:
                        seen["parapet_count"] = p_elements() - base
                        if seen["parapet_count"] == n:
                            done["parapet"] = now
                    # The bouncer inserts in batches: the last address
                    # can be in before all are; count once it is.
                    if "bouncer" not in done and nft_has(ips[-1]):
                        c = nft_count()
                        seen["bouncer_count"] = c
                        if c == n:
                            done["bouncer"] = now
                    if "ipset" not in done and ipset_has(ips[-1]):
                        c = ipset_count()
                        seen["ipset_count"] = c
                        if c == n:
                            done["ipset"] = now
                    # A bouncer that stays short (missed deltas) is
                    # recorded as such after CAP seconds.
                    return len(done) == 3 or now - t1 > CAP_S
                wait(f"{n} decisions enforced", check, LIMIT_S + CAP_S, 0.02)
                at_cap = {"parapet_count_at_cap": seen["parapet_count"] if "parapet" not in done else n,
                          "bouncer_count_at_cap": nft_count() if "bouncer" not in done else n,
                          "ipset_count_at_cap": ipset_count() if "ipset" not in done else n}
                mem = {"parapetd_rss_kib": rss_kib(pd.pid), "bouncer_rss_kib": rss_kib(bo.pid),
                       "parapetd_peak_kib": rss_kib(pd.pid, "VmHWM"),
                       "bouncer_peak_kib": rss_kib(bo.pid, "VmHWM"),
                       "ipset_rss_kib": rss_kib(bi.pid), "ipset_peak_kib": rss_kib(bi.pid, "VmHWM")}
                t2 = time.monotonic()
                cscli("decisions", "delete", "--all")
                t3 = time.monotonic()
                gone = {}

                def check_gone():
                    now = time.monotonic()
                    if "parapet" not in gone and p_elements() == base:
                        gone["parapet"] = now
                    if "bouncer" not in gone and not nft_has(ips[-1]) and nft_count() == 0:
                        gone["bouncer"] = now
                    if "ipset" not in gone and not ipset_has(ips[-1]) and ipset_count() == 0:
                        gone["ipset"] = now
                    return len(gone) == 3 or now - t3 > 60
                wait(f"{n} decisions removed", check_gone, LIMIT_S, 0.02)
                row = {
                    "n": n, "round": r, "import_s": round(t1 - t0, 3),
                    "parapet_s": round(done["parapet"] - t1, 3) if "parapet" in done else None, "bouncer_s": round(done["bouncer"] - t1, 3) if "bouncer" in done else None,
                    "parapet_count": seen["parapet_count"],
                    "cap_s": CAP_S, **at_cap,
                    **{f"{k}_from_start_s": round(v - t0, 3) for k, v in done.items()},
                    "bouncer_count": seen["bouncer_count"],
                    "ipset_s": round(done["ipset"] - t1, 3) if "ipset" in done else None,
                    "ipset_count": seen["ipset_count"],
                    "ipset_unban_s": round(gone["ipset"] - t3, 3) if "ipset" in gone else None,
                    "delete_all_s": round(t3 - t2, 3),
                    "parapet_unban_s": round(gone["parapet"] - t3, 3) if "parapet" in gone else None,
                    "bouncer_unban_s": round(gone["bouncer"] - t3, 3) if "bouncer" in gone else None,
                    **mem,
                }
                print(json.dumps(row), flush=True)
                results.setdefault(n, []).append(row)
        print("summary (seconds after the import returned; median [min–max]):")
        for n, rows in results.items():
            def s(k):
                v = [x[k] for x in rows if x[k] is not None]
                if len(v) < len(rows):
                    return f"{len(rows) - len(v)} of {len(rows)} never complete" + (f", others {statistics.median(v):.3f}" if v else "")
                return f"{statistics.median(v):.3f} [{min(v):.3f}–{max(v):.3f}]"
            print(f"N={n}: parapet {s('parapet_s')}  bouncer {s('bouncer_s')}  ipset bouncer {s('ipset_s')}"
                  f"  | unban parapet {s('parapet_unban_s')}"
                  f"  bouncer {s('bouncer_unban_s')}  ipset bouncer {s('ipset_unban_s')}  | import {s('import_s')}"
                  f"  | RSS KiB parapetd {max(x['parapetd_rss_kib'] for x in rows)} bouncer {max(x['bouncer_rss_kib'] for x in rows)}"
                  f"  | peak KiB parapetd {max(x['parapetd_peak_kib'] for x in rows)} bouncer {max(x['bouncer_peak_kib'] for x in rows)}"
                  f"  | ipset bouncer RSS {max(x['ipset_rss_kib'] for x in rows)} peak {max(x['ipset_peak_kib'] for x in rows)}")
    finally:
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        subprocess.run(["ip", "netns", "del", NS], capture_output=True)
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
