#!/usr/bin/env python3
"""Same-run classifier benchmark (issue 3): parapet vs its linear reference vs
DPDK rte_acl, on the same ClassBench rules and traces, in one invocation.

Writes OUT/results.jsonl (one JSON object per measurement, failures included),
OUT/meta.json (machine, commands, load), OUT/report.md (the tables for
docs/benchmarks.md) and OUT/worst_case.svg. Python 3 standard library only.

    bench/classify/run.py --quick                 # smoke run, a few minutes
    bench/classify/run.py                         # the full matrix
    bench/classify/run.py --report-only OUT       # redo report.md from OUT/results.jsonl

See bench/classify/README.md.
"""

import argparse
import datetime
import json
import math
import os
import platform
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import time

from report import FLATNESS_TARGET, SIZES, set_size, write_report

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DATA = os.environ.get("CLASSBENCH", "/work/shared/data/classbench")
ACL_DIR = os.path.join(REPO, "bench", "rte_acl")

FAMILIES = ["acl1", "fw1", "ipc1"]
ALL_SETS = [f"{f}_{s}" for s in SIZES for f in FAMILIES]
QUICK_SETS = ["acl1_1k", "fw1_1k", "ipc1_1k", "acl1_10k"]
WORST_SIZES = [25 * 2 ** k for k in range(11)]  # 25 .. 25,600
QUICK_WORST_SIZES = [25, 100, 400, 1600, 6400, 25600]
# rte_acl needs ~10 GB peak RSS to build fw1_100k (bench/rte_acl/README.md).
FW1_100K_MIN_MEM_GIB = 12


# --------------------------------------------------------------------------
# small helpers


def utc_now():
    return datetime.datetime.now(datetime.timezone.utc)


def stamp():
    return utc_now().strftime("%Y-%m-%dT%H:%M:%SZ")


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return [float(x) for x in f.read().split()[:3]]
    except OSError:
        return [float("nan")] * 3


def log(msg):
    print(f"[{utc_now().strftime('%H:%M:%S')} load {loadavg()[0]:.1f}] {msg}",
          file=sys.stderr, flush=True)


def rel(path):
    """Path relative to the repository root when inside it (shorter commands)."""
    try:
        r = os.path.relpath(path, REPO)
    except ValueError:
        return path
    return path if r.startswith("..") else r


class Runner:
    """Runs commands with a timeout (killing the whole process group), measures
    wall and child CPU time, and remembers every command for the report."""

    def __init__(self):
        self.commands = []

    def run(self, cmd, timeout, stdout_path=None, what=None):
        shown = shlex.join(cmd) + (f" > {rel(stdout_path)}" if stdout_path else "")
        self.commands.append(shown)
        if what:
            log(f"{what}: {shown}")
        res = {"cmd": shown, "rc": None, "stdout": "", "stderr": "",
               "timed_out": False, "wall_s": 0.0, "cpu_s": 0.0,
               "load_before": loadavg()[0]}
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.monotonic()
        out_f = open(stdout_path, "wb") if stdout_path else subprocess.PIPE
        try:
            p = subprocess.Popen(cmd, cwd=REPO, stdout=out_f, stderr=subprocess.PIPE,
                                 start_new_session=True)
        except OSError as e:
            if stdout_path:
                out_f.close()
            res["rc"] = 127
            res["stderr"] = str(e)
            return res
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            out, err = p.communicate()
            res["timed_out"] = True
        except BaseException:
            # Ctrl-C: the child is in its own session and did not get it.
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
            raise
        finally:
            if stdout_path:
                out_f.close()
        res["wall_s"] = time.monotonic() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        res["cpu_s"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        res["rc"] = p.returncode
        res["stdout"] = (out or b"").decode("utf-8", "replace")
        res["stderr"] = (err or b"").decode("utf-8", "replace")
        return res


def tail(text, n=3):
    lines = [l for l in text.strip().splitlines() if l.strip()]
    return " | ".join(lines[-n:])[:400]


def failure_reason(res, timeout):
    if res["timed_out"]:
        return f"timeout after {timeout:.0f} s"
    return f"exit {res['rc']}: {tail(res['stderr']) or 'no message'}"


# --------------------------------------------------------------------------
# machine description


def read_first(path, key):
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(key):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def cmd_out(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30,
                              cwd=REPO).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def machine():
    flags = (read_first("/proc/cpuinfo", "flags") or "").split()
    simd = [f for f in ("sse4_2", "avx2", "avx512f", "avx512bw", "avx512vl") if f in flags]
    mem_kb = read_first("/proc/meminfo", "MemTotal")
    os_name = ""
    try:
        with open("/etc/os-release") as f:
            for line in f:
                if line.startswith("PRETTY_NAME="):
                    os_name = line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    virt = cmd_out(["systemd-detect-virt"]) or "none"
    if "hypervisor" in flags:
        virt += " (CPU flag 'hypervisor': a virtual machine)"
    return {
        "cpu_model": read_first("/proc/cpuinfo", "model name") or platform.processor(),
        "cpu_family_model": "family {} model {}".format(
            read_first("/proc/cpuinfo", "cpu family"), read_first("/proc/cpuinfo", "model")),
        "logical_cpus": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)),
        "simd_flags": simd,
        "l3": read_first("/proc/cpuinfo", "cache size"),
        "mem_total": "{:.1f} GiB".format(int(mem_kb.split()[0]) / 2 ** 20) if mem_kb else "?",
        "kernel": platform.release(),
        "os": os_name,
        "virtualization": virt,
        "rustc": cmd_out(["rustc", "--version"]),
        "cc": (cmd_out(["cc", "--version"]).splitlines() or [""])[0],
        "git_commit": cmd_out(["git", "rev-parse", "--short", "HEAD"]),
        "git_dirty": bool(cmd_out(["git", "status", "--porcelain", "--untracked-files=no"])),
    }


def mem_available_gib():
    v = read_first("/proc/meminfo", "MemAvailable")
    try:
        return int(v.split()[0]) / 2 ** 20
    except (AttributeError, ValueError, IndexError):
        return float("nan")


# --------------------------------------------------------------------------
# building the tools


def build_parapet(args, runner, notes):
    binary = args.parapet or os.path.join(REPO, "target", "release", "parapet")
    if not args.parapet and not args.no_build:
        res = runner.run(["cargo", "build", "--release", "-p", "parapet"],
                         args.build_timeout, what="build parapet")
        if res["rc"] != 0:
            reason = failure_reason(res, args.build_timeout)
            if os.path.exists(binary):
                notes.append(f"`cargo build --release -p parapet` failed ({reason}); "
                             f"measured the existing {rel(binary)}, which may be stale.")
                args.warnings.append(f"`cargo build --release -p parapet` failed; the existing "
                                     f"{rel(binary)} was measured and may not match git "
                                     f"HEAD (see the notes at the end).")
            else:
                return None, f"parapet build failed: {reason}"
    if not os.access(binary, os.X_OK):
        return None, f"{rel(binary)} not found or not executable"
    return binary, None


def build_acl(args, runner, notes):
    """Returns (path, None) or (None, reason) -> rte_acl columns say n/a."""
    if args.no_rte_acl:
        return None, "rte_acl not requested (--no-rte-acl)"
    if args.acl_bench:
        if os.access(args.acl_bench, os.X_OK):
            return args.acl_bench, None
        return None, f"{args.acl_bench} not found or not executable"
    binary = os.path.join(ACL_DIR, "acl_bench")
    have_pc = shutil.which("pkg-config") is not None
    have_dpdk = have_pc and subprocess.run(["pkg-config", "--exists", "libdpdk"]).returncode == 0
    if not have_dpdk and args.install_dpdk:
        res = runner.run(["apt-get", "install", "-y", "--no-install-recommends", "libdpdk-dev",
                          "pkg-config", "zlib1g-dev", "gcc", "make"],
                         args.build_timeout, what="install DPDK")
        if res["rc"] != 0:
            notes.append(f"apt-get install libdpdk-dev failed: {failure_reason(res, args.build_timeout)}")
        have_dpdk = shutil.which("pkg-config") is not None and \
            subprocess.run(["pkg-config", "--exists", "libdpdk"]).returncode == 0
    if not have_dpdk:
        notes.append("DPDK is not installed: `apt-get install -y libdpdk-dev pkg-config zlib1g-dev` "
                     "(or run.py --install-dpdk) to get the rte_acl columns")
        return None, "DPDK not installed (no pkg-config libdpdk)"
    if not args.no_build:
        res = runner.run(["make", "-s", "-C", rel(ACL_DIR)], args.build_timeout,
                         what="build rte_acl harness")
        if res["rc"] != 0:
            return None, f"building bench/rte_acl failed: {failure_reason(res, args.build_timeout)}"
    if not os.access(binary, os.X_OK):
        return None, f"{rel(binary)} not built"
    return binary, None


def set_files(name, args, runner):
    """(rules, trace) for a ClassBench set, making the 1k trace if missing."""
    fam, size = name.rsplit("_", 1)
    if size == "1k":
        rules = os.path.join(DATA, name)
        trace = os.path.join(ACL_DIR, "traces", f"{name}_trace.gz")
        if not os.path.exists(trace):
            res = runner.run([os.path.join(rel(ACL_DIR), "traces.sh"), fam], args.timeout,
                             what=f"make trace {name}")
            if res["rc"] != 0:
                return rules, None, f"no trace: traces.sh failed ({failure_reason(res, args.timeout)})"
    else:
        rules = os.path.join(DATA, f"{name}.gz")
        trace = os.path.join(DATA, f"{name}_trace.gz")
    for p in (rules, trace):
        if not os.path.exists(p):
            return rules, trace, f"{p} does not exist"
    return rules, trace, None


# --------------------------------------------------------------------------
# measurements


class Results:
    def __init__(self, path):
        self.path = path
        self.records = []
        self.f = open(path, "a")

    def add(self, rec):
        rec.setdefault("time", stamp())
        self.records.append(rec)
        self.f.write(json.dumps(rec, sort_keys=True) + "\n")
        self.f.flush()


def norm_parapet(obj):
    """The CLI's JSON and the library's to_json name min/max differently."""
    g = lambda *ks: next((obj[k] for k in ks if k in obj), None)
    return {
        "engine_used": obj.get("engine"),
        "rules": obj.get("rules"),
        "build_ms": obj.get("build_ms"),
        "memory_bytes": obj.get("memory_bytes"),
        "lookups_per_sec": g("lookups_per_sec"),
        "lookups_per_sec_min": g("lookups_per_sec_min", "min_lookups_per_sec"),
        "lookups_per_sec_max": g("lookups_per_sec_max", "max_lookups_per_sec"),
        "cpu_lookups_per_sec": g("cpu_lookups_per_sec", "cpu_lookups_per_sec_median"),
        "ns_per_lookup": g("ns_per_lookup"),
        "runs": obj.get("runs"),
        "lookups_per_run": obj.get("lookups_per_run"),
    }


def norm_acl(obj):
    return {
        "algo": obj.get("algo"),
        "rules": obj.get("rules"),
        "build_ms": obj.get("build_ms"),
        "memory_bytes": obj.get("memory_bytes"),
        "lookups_per_sec": obj.get("lookups_per_sec_median"),
        "lookups_per_sec_min": obj.get("min"),
        "lookups_per_sec_max": obj.get("max"),
        "cpu_lookups_per_sec": obj.get("cpu_lookups_per_sec_median"),
        "ns_per_lookup": 1e9 / obj["lookups_per_sec_median"] if obj.get("lookups_per_sec_median") else None,
        "runs": obj.get("runs"),
        "tries": obj.get("tries"),
        "dpdk": obj.get("dpdk"),
        "mismatches_vs_scalar": obj.get("mismatches_vs_scalar"),
    }


def pin(args):
    return ["taskset", "-c", str(args.cpu)] if args.cpu is not None else []


def measure_parapet(ctx, base, rules, trace, engine):
    args, runner = ctx["args"], ctx["runner"]
    rec = dict(base, tool="parapet", engine=engine)
    cmd = pin(args) + [rel(ctx["parapet"]), "bench", "classify", rules, trace, "--engine", engine,
                       "--json", "--runs", str(args.runs)]
    res = runner.run(cmd, args.timeout, what=f"{base.get('set') or base.get('rules_n')} parapet {engine}")
    rec.update(cmd=res["cmd"], wall_s=round(res["wall_s"], 3), load_before=res["load_before"],
               cpu_share=round(res["cpu_s"] / res["wall_s"], 3) if res["wall_s"] > 0 else None)
    obj = None
    if res["rc"] == 0 and not res["timed_out"]:
        for line in res["stdout"].splitlines():
            line = line.strip()
            if line.startswith("{"):
                try:
                    obj = json.loads(line)
                except ValueError:
                    pass
    if obj is None:
        rec.update(status="timeout" if res["timed_out"] else "error",
                   reason=failure_reason(res, args.timeout) if res["rc"] != 0 or res["timed_out"]
                   else "no JSON on stdout")
    else:
        rec.update(status="ok", raw=obj, **norm_parapet(obj))
    ctx["results"].add(rec)
    return rec


def measure_acl(ctx, base, rules, trace):
    args, runner = ctx["args"], ctx["runner"]
    cmd = pin(args) + [rel(ctx["acl"]), "--algo", args.acl_algos, "--runs", str(args.runs),
           "--min-run-ms", str(args.min_run_ms), "--mem", str(args.acl_mem), rules, trace]
    res = runner.run(cmd, args.timeout, what=f"{base['set']} rte_acl")
    common = dict(base, tool="rte_acl", cmd=res["cmd"], wall_s=round(res["wall_s"], 3),
                  load_before=res["load_before"],
                  cpu_share=round(res["cpu_s"] / res["wall_s"], 3) if res["wall_s"] > 0 else None)
    recs = []
    for line in res["stdout"].splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        rec = dict(common, status="ok", raw=obj, **norm_acl(obj))
        recs.append(rec)
    skipped = [l for l in res["stderr"].splitlines() if "skip" in l.lower()]
    if recs:
        for r in recs:
            if skipped:
                r["notes"] = " | ".join(skipped)[:400]
            if res["timed_out"] or res["rc"] != 0:
                r["partial"] = failure_reason(res, args.timeout)
            ctx["results"].add(r)
    else:
        rec = dict(common, algo="all", status="timeout" if res["timed_out"] else "error",
                   reason=failure_reason(res, args.timeout))
        ctx["results"].add(rec)
        recs.append(rec)
    return recs


def cross_check(ctx, base, rules, trace):
    """parapet auto's rule ids vs rte_acl's matches, packet by packet."""
    args, runner, out = ctx["args"], ctx["runner"], ctx["out"]
    name = base["set"]
    p_out = os.path.join(out, "check", f"{name}.parapet")
    a_out = os.path.join(out, "check", f"{name}.rte_acl")
    os.makedirs(os.path.dirname(p_out), exist_ok=True)
    rec = dict(base, kind="check", tool="check")
    r1 = runner.run([rel(ctx["parapet"]), "classify", rules, trace, "--engine", "auto"],
                    args.timeout, stdout_path=p_out, what=f"{name} check parapet")
    if r1["rc"] != 0 or r1["timed_out"]:
        rec.update(status="error", reason="parapet classify: " + failure_reason(r1, args.timeout))
        ctx["results"].add(rec)
        return rec
    r2 = runner.run([rel(ctx["acl"]), "--dump", "--algo", "scalar", "--mem", str(args.acl_mem),
                     rules, trace], args.timeout, stdout_path=a_out, what=f"{name} check rte_acl")
    if r2["rc"] != 0 or r2["timed_out"]:
        rec.update(status="error", reason="acl_bench --dump: " + failure_reason(r2, args.timeout))
        ctx["results"].add(rec)
        return rec
    with open(p_out) as f:
        pa = [int(l.split()[0]) for l in f if l.strip()]
    with open(a_out) as f:
        ac = [int(l.split()[0]) + 1 for l in f if l.strip()]  # 0-based, -1 = none -> 0
    mism = [i for i, (x, y) in enumerate(zip(pa, ac)) if x != y]
    rec.update(status="ok" if not mism and len(pa) == len(ac) else "mismatch",
               packets=len(pa), packets_rte_acl=len(ac), mismatches=len(mism),
               first_mismatches=[{"line": i + 1, "parapet": pa[i], "rte_acl": ac[i]}
                                 for i in mism[:5]])
    ctx["results"].add(rec)
    # The per-packet files are large and reproducible; keep them only when they disagree.
    if rec["status"] == "ok":
        for p in (p_out, a_out):
            os.remove(p)
    return rec


def run_classbench(ctx):
    args = ctx["args"]
    for name in ctx["sets"]:
        if ctx["over_budget"]():
            ctx["results"].add({"kind": "classbench", "set": name, "size": set_size(name),
                                "tool": "all", "status": "skipped",
                                "reason": "total time budget (--budget) used up"})
            continue
        size = set_size(name)
        rules, trace, err = set_files(name, args, ctx["runner"])
        base = {"kind": "classbench", "set": name, "size": size,
                "rules_file": rules, "trace_file": trace}
        if err:
            ctx["results"].add(dict(base, tool="all", status="error", reason=err))
            continue
        rules_r, trace_r = rel(rules), rel(trace)
        # Interleaved: all tools on this set back to back, under the same load.
        auto = acl_recs = None
        if ctx["parapet"]:
            auto = measure_parapet(ctx, base, rules_r, trace_r, "auto")
        else:
            ctx["results"].add(dict(base, tool="parapet", engine="auto", status="n/a",
                                    reason=ctx["parapet_err"]))
        acl_reason = ctx["acl_err"]
        if not acl_reason and name == "fw1_100k":
            if not args.with_fw1_100k:
                acl_reason = ("skipped by default: building fw1_100k needs ~10 GB; "
                              "--with-fw1-100k includes it")
            elif mem_available_gib() < FW1_100K_MIN_MEM_GIB:
                acl_reason = (f"skipped: MemAvailable {mem_available_gib():.1f} GiB < "
                              f"{FW1_100K_MIN_MEM_GIB} GiB needed to build fw1_100k")
        if acl_reason:
            ctx["results"].add(dict(base, tool="rte_acl", algo="all", status="n/a",
                                    reason=acl_reason))
        else:
            acl_recs = measure_acl(ctx, base, rules_r, trace_r)
        if not ctx["parapet"]:
            ctx["results"].add(dict(base, tool="parapet", engine="linear", status="n/a",
                                    reason=ctx["parapet_err"]))
        elif size == "100k" and not args.linear_100k:
            ctx["results"].add(dict(base, tool="parapet", engine="linear", status="skipped",
                                    reason="not run at 100k by default; --linear-100k includes it"))
        else:
            measure_parapet(ctx, base, rules_r, trace_r, "linear")
        if size in ctx["check_sizes"] and auto and auto["status"] == "ok" \
                and acl_recs and ok(acl_recs):
            cross_check(ctx, base, rules_r, trace_r)


def run_worst_case(ctx):
    args, runner = ctx["args"], ctx["runner"]
    wdir = os.path.join(ctx["out"], "worst_case")
    os.makedirs(wdir, exist_ok=True)
    for n in ctx["worst_sizes"]:
        base = {"kind": "worst_case", "rules_n": n}
        if ctx["over_budget"]():
            ctx["results"].add(dict(base, tool="parapet", engine="all", status="skipped",
                                    reason="total time budget (--budget) used up"))
            continue
        if not ctx["parapet"]:
            ctx["results"].add(dict(base, tool="parapet", engine="all", status="n/a",
                                    reason=ctx["parapet_err"]))
            continue
        rules = os.path.join(wdir, f"worst_{n}.rules")
        trace = os.path.join(wdir, f"worst_{n}.trace")
        res = runner.run([rel(ctx["parapet"]), "gen", "worst-case", str(n), "--trace", rel(trace),
                          "--packets", str(args.worst_packets)], args.timeout,
                         stdout_path=rules, what=f"gen worst-case {n}")
        base.update(rules_file=rules, trace_file=trace)
        if res["rc"] != 0 or res["timed_out"]:
            ctx["results"].add(dict(base, tool="parapet", engine="all", status="error",
                                    reason="gen: " + failure_reason(res, args.timeout)))
            continue
        measure_parapet(ctx, base, rel(rules), rel(trace), "auto")
        measure_parapet(ctx, base, rel(rules), rel(trace), "linear")


# --------------------------------------------------------------------------


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="Same-run benchmark of parapet's classifier vs linear vs DPDK rte_acl.")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: sets " + ",".join(QUICK_SETS) + ", 5 runs, worst case at "
                   + ",".join(map(str, QUICK_WORST_SIZES)) + " rules")
    p.add_argument("--sets", help="comma list of ClassBench sets (default: acl1/fw1/ipc1 x 1k/10k/100k)")
    p.add_argument("--out", help="output directory (default bench/results/classify-<UTC time>)")
    p.add_argument("--runs", type=int, help="timed runs per measurement (default 11, --quick 5; ≥ 5)")
    p.add_argument("--min-run-ms", type=int, default=100,
                   help="rte_acl's minimum run length (default 100, parapet's fixed value)")
    p.add_argument("--timeout", type=float, default=300, help="seconds per measurement (default 300)")
    p.add_argument("--build-timeout", type=float, default=1800, help="seconds per build (default 1800)")
    p.add_argument("--budget", type=float, default=0,
                   help="total seconds; measurements after that are skipped (default 0: no limit)")
    p.add_argument("--with-fw1-100k", action="store_true",
                   help="also build fw1_100k with rte_acl (~10 GB peak RSS)")
    p.add_argument("--linear-100k", action="store_true", help="also run the linear engine at 100k")
    p.add_argument("--worst-sizes", help="comma list of worst-case rule counts "
                   "(default 25,50,...,25600; 'none' to skip)")
    p.add_argument("--worst-packets", type=int, default=10000, help="worst-case trace length")
    p.add_argument("--no-classbench", action="store_true", help="only the worst-case series")
    p.add_argument("--check", choices=["none", "small", "all"], default="small",
                   help="compare parapet's and rte_acl's answers packet by packet "
                   "(small = 1k and 10k sets; default)")
    p.add_argument("--acl-algos", default="all", help="acl_bench --algo (default all; the best "
                   "non-scalar one is reported as 'best SIMD')")
    p.add_argument("--acl-mem", type=int, default=4096, help="acl_bench --mem MB (default 4096)")
    p.add_argument("--no-rte-acl", action="store_true", help="leave rte_acl out (columns say n/a)")
    p.add_argument("--acl-bench", help="use this acl_bench binary (no make)")
    p.add_argument("--install-dpdk", action="store_true",
                   help="apt-get install libdpdk-dev etc. if DPDK is missing")
    p.add_argument("--cpu", type=int, help="run every measurement under `taskset -c CPU` "
                   "(both tools on the same core; for a quiet machine)")
    p.add_argument("--parapet", help="use this parapet binary (no cargo build)")
    p.add_argument("--no-build", action="store_true", help="build nothing; use what is there")
    p.add_argument("--report-only", metavar="OUT", help="rewrite OUT/report.md from OUT/results.jsonl")
    a = p.parse_args(argv)
    if a.runs is None:
        a.runs = 5 if a.quick else 11
    a.runs = max(a.runs, 5)
    a.warnings = []
    return a


def main(argv):
    args = parse_args(argv)
    if args.report_only:
        print(write_report(args.report_only))
        return 0
    t_start = time.monotonic()
    tag = utc_now().strftime("%Y%m%dT%H%M%SZ") + ("-quick" if args.quick else "")
    out = os.path.abspath(args.out or os.path.join(HERE, "..", "results", "classify-" + tag))
    os.makedirs(out, exist_ok=True)
    if os.path.exists(os.path.join(out, "results.jsonl")):
        os.rename(os.path.join(out, "results.jsonl"), os.path.join(out, "results.jsonl.old"))
    if args.sets:
        sets = [s.strip() for s in args.sets.split(",") if s.strip()]
    else:
        sets = list(QUICK_SETS if args.quick else ALL_SETS)
    if args.no_classbench:
        sets = []
    for s in sets:
        if "_" not in s or set_size(s) not in SIZES:
            print(f"run.py: unknown set {s!r} (NAME_1k, NAME_10k or NAME_100k)", file=sys.stderr)
            return 2
    if args.worst_sizes == "none":
        worst = []
    elif args.worst_sizes:
        worst = [int(x) for x in args.worst_sizes.split(",")]
    else:
        worst = QUICK_WORST_SIZES if args.quick else WORST_SIZES
    runner = Runner()
    notes = []
    meta = {"start": stamp(), "argv": shlex.join(["bench/classify/run.py"] + argv),
            "quick": args.quick, "runs": args.runs, "min_run_ms": args.min_run_ms,
            "timeout_s": args.timeout, "load_start": loadavg(), "machine": machine(),
            "sets": sets, "worst_sizes": worst, "notes": notes, "warnings": args.warnings}
    log(f"output: {out}")
    parapet, parapet_err = build_parapet(args, runner, notes)
    acl, acl_err = (None, "no ClassBench sets requested") if not sets else build_acl(args, runner, notes)
    if acl_err and sets:
        notes.append(f"rte_acl: n/a — {acl_err}")
        log(f"rte_acl: n/a — {acl_err}")
    if parapet_err:
        notes.append(f"parapet: n/a — {parapet_err}")
        log(f"parapet: n/a — {parapet_err}")
    check_sizes = {"none": set(), "small": {"1k", "10k"}, "all": set(SIZES)}[args.check]
    ctx = {"args": args, "runner": runner, "out": out, "sets": sets, "worst_sizes": worst,
           "parapet": parapet, "parapet_err": parapet_err, "acl": acl, "acl_err": acl_err,
           "check_sizes": check_sizes,
           "results": Results(os.path.join(out, "results.jsonl")),
           "over_budget": lambda: args.budget > 0 and time.monotonic() - t_start > args.budget}

    def save_meta():
        meta["commands"] = runner.commands
        dpdk = next((r.get("dpdk") for r in ctx["results"].records if r.get("dpdk")), None)
        if dpdk:
            meta["dpdk"] = dpdk
        with open(os.path.join(out, "meta.json"), "w") as f:
            json.dump(meta, f, indent=1)

    save_meta()
    try:
        run_classbench(ctx)
        run_worst_case(ctx)
    except KeyboardInterrupt:
        notes.append("interrupted (Ctrl-C); the tables hold what was measured before")
        log("interrupted; writing the report")
    meta["end"] = stamp()
    meta["load_end"] = loadavg()
    meta["elapsed_s"] = round(time.monotonic() - t_start, 1)
    save_meta()
    report = write_report(out)
    log(f"done in {meta['elapsed_s']} s: {report}")
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
