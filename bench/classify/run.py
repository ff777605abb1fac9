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

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DATA = os.environ.get("CLASSBENCH", "/work/shared/data/classbench")
ACL_DIR = os.path.join(REPO, "bench", "rte_acl")

FAMILIES = ["acl1", "fw1", "ipc1"]
SIZES = ["1k", "10k", "100k"]
ALL_SETS = [f"{f}_{s}" for s in SIZES for f in FAMILIES]
QUICK_SETS = ["acl1_1k", "fw1_1k", "ipc1_1k", "acl1_10k"]
WORST_SIZES = [25 * 2 ** k for k in range(11)]  # 25 .. 25,600
QUICK_WORST_SIZES = [25, 100, 400, 1600, 6400, 25600]
FLATNESS_TARGET = 0.8
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


def set_size(name):
    return name.rsplit("_", 1)[1]


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
# report


def fmt_m(v):
    """Lookups/s as millions with 3 significant digits."""
    if v is None:
        return "–"
    m = v / 1e6
    if m >= 100:
        return f"{m:.0f}"
    if m >= 10:
        return f"{m:.1f}"
    if m >= 0.01:
        return f"{m:.2f}"
    return f"{m:.4f}"


def fmt_rate(r):
    return f"{fmt_m(r.get('lookups_per_sec'))} [{fmt_m(r.get('lookups_per_sec_min'))}–" \
           f"{fmt_m(r.get('lookups_per_sec_max'))}]"


def fmt_num(v, digits=1):
    if v is None:
        return "–"
    if isinstance(v, float) and math.isnan(v):
        return "–"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    return f"{v:.{digits}f}"


def fmt_mib(b):
    if b is None:
        return "–"
    m = b / 2 ** 20
    return f"{m:.1f}" if m >= 10 else f"{m:.2f}" if m >= 0.1 else f"{m:.3g}"


def fmt_ratio(a, b):
    if a is None or b is None or not b:
        return "n/a"
    x = a / b
    if x >= 100:
        return f"{x:.0f}×"
    if x >= 10:
        return f"{x:.1f}×"
    return f"{x:.2f}×"


def ok(recs):
    return [r for r in recs if r.get("status") == "ok"]


def best(recs):
    return max(recs, key=lambda r: r.get("lookups_per_sec") or 0) if recs else None


def na_reason(recs):
    for r in recs:
        if r.get("status") != "ok" and r.get("reason"):
            return f"n/a ({r['status']}: {r['reason']})" if r["status"] not in ("n/a",) \
                else f"n/a ({r['reason']})"
    return "n/a (not measured)"


def row(label, rules, r, reason=None):
    if r is None:
        return f"| {label} | {rules} | {reason or 'n/a'} | | | | | |"
    cpu = fmt_m(r.get("cpu_lookups_per_sec")) if r.get("cpu_lookups_per_sec") else "–"
    share = f"{r['cpu_share']:.2f}" if r.get("cpu_share") is not None else "–"
    return (f"| {label} | {r.get('rules', rules)} | {fmt_rate(r)} | {fmt_num(r.get('ns_per_lookup'))} | "
            f"{cpu} | {fmt_num(r.get('build_ms'))} | {fmt_mib(r.get('memory_bytes'))} | {share} |")


def classbench_sections(records, meta):
    cb = [r for r in records if r.get("kind") == "classbench"]
    if not cb:
        return []
    out = []
    sets = []
    for r in cb:
        if r["set"] not in sets:
            sets.append(r["set"])
    ratio_rows = []
    for size in SIZES:
        in_size = [s for s in sets if set_size(s) == size]
        if not in_size:
            continue
        out += [f"### {size} rules", "",
                "| set / engine | rules | Mlookups/s median [min–max] | ns/lookup | Mlookups/cpu-s | "
                "build ms | memory MiB | CPU share |",
                "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for s in in_size:
            rs = [r for r in cb if r["set"] == s]
            whole = [r for r in rs if r.get("tool") == "all"]
            if whole:
                out.append(f"| **{s}** | | {na_reason(whole)} | | | | | |")
                continue
            pa = ok([r for r in rs if r.get("tool") == "parapet" and r.get("engine") == "auto"])
            pl = ok([r for r in rs if r.get("tool") == "parapet" and r.get("engine") == "linear"])
            acl = [r for r in rs if r.get("tool") == "rte_acl"]
            acl_ok = ok(acl)
            sc = next((r for r in acl_ok if r.get("algo") == "scalar"), None)
            simd = best([r for r in acl_ok if r.get("algo") != "scalar"])
            nrules = next((r.get("rules") for r in rs if r.get("rules")), "")
            out.append(f"| **{s}** | | | | | | | |")
            p = pa[0] if pa else None
            out.append(row(f"parapet auto ({p['engine_used']}, batch)" if p else "parapet auto",
                           nrules, p, None if p else na_reason(
                               [r for r in rs if r.get("tool") == "parapet" and r.get("engine") == "auto"])))
            out.append(row("parapet linear (reference)", nrules, pl[0] if pl else None,
                           None if pl else na_reason(
                               [r for r in rs if r.get("tool") == "parapet" and r.get("engine") == "linear"])))
            acl_reason = na_reason(acl) if not acl_ok else "n/a (not measured)"
            out.append(row("rte_acl scalar", nrules, sc, None if sc else acl_reason))
            out.append(row(f"rte_acl best SIMD ({simd['algo']})" if simd else "rte_acl best SIMD",
                           nrules, simd, None if simd else acl_reason))
            ratio_rows.append((s, p, sc, simd, acl_reason if not acl_ok else None))
        out.append("")
    # Ratios.
    out += ["### parapet auto / rte_acl", "",
            "Lookups/s ratio > 1: parapet is faster. Memory and build ratio < 1: parapet is "
            "smaller / builds faster. rte_acl builds one structure for all its algorithms, so "
            "its memory and build time are the same for scalar and SIMD. cpu-s: the same "
            "ratio on lookups per second of thread CPU time (when both tools report it).", "",
            "| set | vs scalar: lookups/s | cpu-s | memory | build | vs best SIMD | lookups/s | cpu-s "
            "| memory | build |",
            "| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |"]
    for s, p, sc, simd, reason in ratio_rows:
        if p is None or (sc is None and simd is None):
            why = reason or ("parapet not measured" if p is None else "rte_acl not measured")
            out.append(f"| {s} | {why} | | | | | | | | |")
            continue
        cells = [s]
        for a in (sc, simd):
            if a is None:
                cells += (["n/a"] * 4) if a is sc else ["n/a"] + ["n/a"] * 4
                continue
            if a is simd:
                cells.append(a["algo"])
            cells += [fmt_ratio(p.get("lookups_per_sec"), a.get("lookups_per_sec")),
                      fmt_ratio(p.get("cpu_lookups_per_sec"), a.get("cpu_lookups_per_sec")),
                      fmt_ratio(p.get("memory_bytes"), a.get("memory_bytes")),
                      fmt_ratio(p.get("build_ms"), a.get("build_ms"))]
        out.append("| " + " | ".join(cells) + " |")
    out.append("")
    # Cross-checks.
    checks = [r for r in records if r.get("kind") == "check"]
    if checks:
        out += ["### Same answers?", "",
                "`parapet classify --engine auto` vs `acl_bench --dump --algo scalar` on the same "
                "files, packet by packet (parapet's rule id = rte_acl's 0-based line + 1; "
                "no match = 0):", ""]
        for c in checks:
            if c["status"] == "ok":
                out.append(f"- {c['set']}: {c['packets']} packets, 0 mismatches")
            elif c["status"] == "mismatch":
                out.append(f"- {c['set']}: **{c['mismatches']} mismatches** of {c['packets']} "
                           f"(rte_acl {c['packets_rte_acl']} lines); first: {c['first_mismatches']}")
            else:
                out.append(f"- {c['set']}: not checked ({c.get('reason')})")
        out.append("")
    # Every rte_acl algorithm, for reference.
    acl_all = ok([r for r in cb if r.get("tool") == "rte_acl"])
    if acl_all:
        out += ["### rte_acl, every algorithm", "",
                "| set | algo | Mlookups/s median [min–max] | Mlookups/cpu-s | tries |",
                "| --- | --- | ---: | ---: | ---: |"]
        for r in acl_all:
            out.append(f"| {r['set']} | {r['algo']} | {fmt_rate(r)} | "
                       f"{fmt_m(r.get('cpu_lookups_per_sec'))} | {r.get('tries', '–')} |")
        out.append("")
    return out


def worst_rows(records):
    wc = [r for r in records if r.get("kind") == "worst_case"]
    sizes = sorted({r["rules_n"] for r in wc})
    table = []
    for n in sizes:
        rs = [r for r in wc if r["rules_n"] == n]
        a = next(iter(ok([r for r in rs if r.get("engine") == "auto"])), None)
        l = next(iter(ok([r for r in rs if r.get("engine") == "linear"])), None)
        table.append((n, a, l, rs))
    return table


def worst_sections(records, out_dir, meta):
    table = worst_rows(records)
    if not table:
        return []
    out = ["## nf-HiPAC worst case", "",
           "`parapet gen worst-case N`: every rule matches the probe packet except on the "
           "destination port, so a linear filter checks every field of every rule; the trace "
           "is that probe, repeated. Same run, same machine, both engines interleaved per size.", "",
           "| rules | auto engine | auto Mlookups/s median [min–max] | auto ns/lookup | "
           "linear Mlookups/s median [min–max] | linear ns/lookup | auto / linear | auto build ms | "
           "auto memory MiB |",
           "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for n, a, l, rs in table:
        fail = [r for r in rs if r.get("status") != "ok"]
        out.append("| {:,} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
            n, a["engine_used"] if a else na_reason([r for r in fail if r.get("engine") in ("auto", "all")]),
            fmt_rate(a) if a else "n/a", fmt_num(a.get("ns_per_lookup")) if a else "–",
            fmt_rate(l) if l else na_reason([r for r in fail if r.get("engine") in ("linear", "all")]),
            fmt_num(l.get("ns_per_lookup")) if l else "–",
            fmt_ratio(a.get("lookups_per_sec"), l.get("lookups_per_sec")) if a and l else "n/a",
            fmt_num(a.get("build_ms")) if a else "–", fmt_mib(a.get("memory_bytes")) if a else "–"))
    out.append("")
    for label, idx in (("auto", 1), ("linear", 2)):
        pts = [(t[0], t[idx]["lookups_per_sec"]) for t in table if t[idx]]
        if len(pts) >= 2:
            (n0, r0), (n1, r1) = pts[0], pts[-1]
            verdict = ""
            if label == "auto":
                verdict = " — target ≥ {:.1f}: **{}**".format(
                    FLATNESS_TARGET, "met" if r1 / r0 >= FLATNESS_TARGET else "NOT met")
            out.append(f"- flatness ratio, {label}: rate at {n1:,} rules / rate at {n0:,} rules "
                       f"= {fmt_m(r1)} / {fmt_m(r0)} M = **{r1 / r0:.3g}**{verdict}")
        else:
            out.append(f"- flatness ratio, {label}: n/a (fewer than two sizes measured)")
    out += ["", "Lookups/s vs rules (log–log; `A` auto, `L` linear; SVG: "
            "[worst_case.svg](worst_case.svg)):", "", "```"]
    out += ascii_plot(table)
    out += ["```", ""]
    sub = "{}{}, {}".format("smoke run (--quick), " if meta.get("quick") else "",
                            meta["start"][:16].replace("T", " "), meta["machine"]["cpu_model"])
    pts = [(t[0], t[1]["lookups_per_sec"]) for t in table if t[1]]
    if len(pts) >= 2:
        sub += f"; auto flatness {pts[-1][1] / pts[0][1]:.2f}"
    svg = svg_plot(table, sub)
    if svg:
        with open(os.path.join(out_dir, "worst_case.svg"), "w") as f:
            f.write(svg)
    return out


def series(table):
    a = [(n, x["lookups_per_sec"], x.get("lookups_per_sec_min"), x.get("lookups_per_sec_max"))
         for n, x, _, _ in table if x]
    l = [(n, x["lookups_per_sec"], x.get("lookups_per_sec_min"), x.get("lookups_per_sec_max"))
         for n, _, x, _ in table if x]
    return a, l


def ascii_plot(table, width=64, height=18):
    a, l = series(table)
    pts = a + l
    if not pts:
        return ["(no data)"]
    xs = [p[0] for p in pts]
    ys = [p[1] for p in pts if p[1] > 0]
    x0, x1 = math.log10(min(xs)), math.log10(max(xs))
    y0, y1 = math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys)))
    if x1 == x0:
        x1 = x0 + 1
    if y1 == y0:
        y1 = y0 + 1
    grid = [[" "] * width for _ in range(height)]

    def put(n, v, ch):
        c = round((math.log10(n) - x0) / (x1 - x0) * (width - 1))
        r = height - 1 - round((math.log10(v) - y0) / (y1 - y0) * (height - 1))
        grid[r][c] = "*" if grid[r][c] not in (" ", ch) else ch

    for n, v, *_ in a:
        put(n, v, "A")
    for n, v, *_ in l:
        put(n, v, "L")
    lines = []
    for i, r in enumerate(grid):
        y = y1 - i * (y1 - y0) / (height - 1)
        label = f"1e{y:.0f}" if abs(y - round(y)) < 1e-9 else ""
        lines.append(f"{label:>6} |" + "".join(r))
    lines.append(" " * 7 + "+" + "-" * width)
    ticks = [" "] * (width + 12)
    for n in sorted(set(xs)):
        c = round((math.log10(n) - x0) / (x1 - x0) * (width - 1))
        s = f"{n}"
        if all(ch == " " for ch in ticks[c + 7: c + 8 + len(s)]):
            ticks[c + 8: c + 8 + len(s)] = list(s)
    lines.append("".join(ticks).rstrip())
    lines.append(" " * 8 + "rules (log scale); y: lookups/s (log scale)")
    return lines


def svg_plot(table, subtitle=""):
    a, l = series(table)
    pts = a + l
    if not pts:
        return None
    W, H, ml, mr, mt, mb = 760, 450, 80, 150, 50, 60
    pw, ph = W - ml - mr, H - mt - mb
    xs = [p[0] for p in pts]
    ys = [v for p in pts for v in p[1:] if v]
    x0, x1 = math.log10(min(xs)), math.log10(max(xs))
    y0, y1 = math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys)))
    if x1 == x0:
        x1 += 1
    if y1 == y0:
        y1 += 1
    X = lambda n: ml + (math.log10(n) - x0) / (x1 - x0) * pw
    Y = lambda v: mt + ph - (math.log10(v) - y0) / (y1 - y0) * ph
    e = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
         'font-family="sans-serif" font-size="12">' % (W, H),
         '<rect width="100%" height="100%" fill="white"/>',
         f'<text x="{ml + pw / 2}" y="22" text-anchor="middle" font-size="15">'
         'nf-HiPAC worst case: lookups/s vs rules</text>',
         f'<text x="{ml + pw / 2}" y="35" text-anchor="middle" font-size="11" fill="#555">'
         f'{subtitle}</text>',
         f'<rect x="{ml}" y="{mt}" width="{pw}" height="{ph}" fill="none" stroke="#333"/>']
    for d in range(y0, y1 + 1):
        y = Y(10 ** d)
        e.append(f'<line x1="{ml}" y1="{y:.1f}" x2="{ml + pw}" y2="{y:.1f}" stroke="#ddd"/>')
        e.append(f'<text x="{ml - 6}" y="{y + 4:.1f}" text-anchor="end">1e{d}</text>')
    for n in sorted(set(xs)):
        x = X(n)
        e.append(f'<line x1="{x:.1f}" y1="{mt}" x2="{x:.1f}" y2="{mt + ph}" stroke="#eee"/>')
        e.append(f'<text x="{x:.1f}" y="{mt + ph + 16}" text-anchor="middle">{n:,}</text>')
    e.append(f'<text x="{ml + pw / 2}" y="{H - 16}" text-anchor="middle">rules (log scale)</text>')
    e.append(f'<text transform="translate(18,{mt + ph / 2}) rotate(-90)" text-anchor="middle">'
             'lookups/s, median (bars: min–max; log scale)</text>')
    for name, s, color in (("parapet auto", a, "#1f77b4"), ("parapet linear", l, "#d62728")):
        if not s:
            continue
        path = " ".join(f"{X(n):.1f},{Y(v):.1f}" for n, v, *_ in s)
        e.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"/>')
        for n, v, lo, hi in s:
            if lo and hi:
                e.append(f'<line x1="{X(n):.1f}" y1="{Y(lo):.1f}" x2="{X(n):.1f}" y2="{Y(hi):.1f}" '
                         f'stroke="{color}"/>')
            e.append(f'<circle cx="{X(n):.1f}" cy="{Y(v):.1f}" r="3.5" fill="{color}"/>')
        ly = mt + 20 + (0 if s is a else 22)
        e.append(f'<line x1="{ml + pw + 15}" y1="{ly}" x2="{ml + pw + 40}" y2="{ly}" '
                 f'stroke="{color}" stroke-width="2"/>')
        e.append(f'<text x="{ml + pw + 46}" y="{ly + 4}">{name}</text>')
    e.append("</svg>")
    return "\n".join(e) + "\n"


def write_report(out_dir):
    with open(os.path.join(out_dir, "meta.json")) as f:
        meta = json.load(f)
    records = []
    with open(os.path.join(out_dir, "results.jsonl")) as f:
        for line in f:
            if line.strip():
                records.append(json.loads(line))
    m = meta["machine"]
    la0, la1 = meta.get("load_start"), meta.get("load_end")
    loads = [r["load_before"] for r in records if isinstance(r.get("load_before"), (int, float))]
    ncpu = m.get("cpus_usable") or m.get("logical_cpus") or 1
    peak = max([la0[0]] + ([la1[0]] if la1 else []) + loads) if la0 else None
    high = peak is not None and peak > 0.5 * ncpu
    shares = [r["cpu_share"] for r in records
              if r.get("status") == "ok" and r.get("tool") in ("parapet", "rte_acl")
              and isinstance(r.get("cpu_share"), (int, float))]
    out = ["# Classifier benchmark: parapet vs linear vs rte_acl (same run)", ""]
    if meta.get("quick"):
        out += ["> **Smoke run (`--quick`)**: few runs, few sets; for checking the driver, "
                "not for quoting.", ""]
    if high:
        out += [f"> **Warning: the machine was loaded** (1-minute load average up to {peak:.1f} "
                f"on {ncpu} CPUs; threshold 0.5 per CPU). Wall-clock rates measure the CPU share "
                f"the benchmark got as much as the classifier; the CPU share column (child CPU "
                f"time / wall time, ~1.0 when undisturbed) shows by how much. "
                f"Median CPU share here: "
                f"{sorted(shares)[len(shares) // 2]:.2f}." if shares else "", ""]
    for w in meta.get("warnings", []):
        out += [f"> **Warning**: {w}", ""]
    out += [f"Started {meta['start']}, finished {meta.get('end', '?')}; "
            f"`{meta['argv']}` (from the repository root).", "",
            "## Machine", "",
            f"- CPU: {m['cpu_model']} ({m['cpu_family_model']}), {m['logical_cpus']} logical CPUs "
            f"({m['cpus_usable']} usable), cpuinfo cache size {m.get('l3') or '?'}, SIMD: "
            f"{', '.join(m['simd_flags']) or 'none'}",
            f"- memory: {m['mem_total']}; virtualization: {m['virtualization']}",
            f"- kernel {m['kernel']}, {m['os']}; {m['rustc']}; {m['cc']}"
            + (f"; {meta['dpdk']}" if meta.get("dpdk") else ""),
            f"- parapet at git {m['git_commit']}{' (working tree modified)' if m['git_dirty'] else ''}",
            "- load average (1/5/15 min): start {}, end {}; highest 1-min value sampled before "
            "a measurement: {}".format(
                " / ".join(f"{x:.2f}" for x in la0) if la0 else "?",
                " / ".join(f"{x:.2f}" for x in la1) if la1 else "?",
                f"{max(loads):.2f}" if loads else "?"),
            ""]
    out += ["## What the columns mean", "",
            "- **Mlookups/s median [min–max]**: millions of lookups per wall-clock second over "
            f"the timed runs ({meta['runs']} per measurement; each run lasts ≥ 100 ms for parapet's "
            f"batch path, ≥ {meta['min_run_ms']} ms for rte_acl, ~0.2 s for linear). "
            "parapet `auto` uses the batch API; linear is one packet at a time; rte_acl classifies "
            "in batches of 64 (`rte_acl_classify_alg`). **ns/lookup** = 1e9 / median.",
            "- **Mlookups/cpu-s**: the same, per second of the measuring thread's CPU time "
            "(rte_acl reports it; parapet's CLI does when it prints `cpu_lookups_per_sec`). "
            "On a loaded machine this is the fairer comparison.",
            "- **build ms**: parapet: building the classifier from the parsed ruleset (flatten + "
            "compile). rte_acl: `rte_acl_build` only (its rule insertion is not included).",
            "- **memory MiB**: parapet: the classifier image plus its user-space fast path (`memory_bytes`). rte_acl: growth of "
            "the DPDK heap across `rte_acl_build`, i.e. its run-time lookup structure (the "
            "transient build memory, ~10× larger, is not included; see bench/rte_acl/README.md).",
            "- **CPU share**: CPU time of the measuring process / its wall time (includes parsing "
            "and building). Near 1.0: the benchmark had a core to itself; well below: it was "
            "descheduled and its wall-clock rates are low by about that factor.",
            "- Traces: 10k/100k use the published ClassBench traces; 1k sets use "
            "`bench/rte_acl/traces/NAME_1k_trace.gz` (generated by `bench/rte_acl/traces.sh`). "
            "Both tools read the same files.", ""]
    out += ["## ClassBench sets", ""]
    out += classbench_sections(records, meta)
    out += worst_sections(records, out_dir, meta)
    notes = list(meta.get("notes", []))
    for r in records:
        if r.get("status") in ("skipped", "n/a", "error", "timeout", "mismatch"):
            what = r.get("set") or f"worst-case {r.get('rules_n')}"
            eng = r.get("engine") or r.get("algo") or ("answers" if r.get("kind") == "check" else "")
            s = f"{what} {r.get('tool', '')} {eng}: {r['status']}"
            if r.get("reason"):
                s += f" — {r['reason']}"
            if s not in notes:
                notes.append(s)
        if r.get("partial"):
            notes.append(f"{r.get('set')} rte_acl: partial output ({r['partial']})")
    if notes:
        out += ["## Skipped, failed, notes", ""] + [f"- {n}" for n in dict.fromkeys(notes)] + [""]
    out += ["## Commands", "", "Run from the repository root, in this order:", "", "```sh"]
    out += meta.get("commands", [])
    out += ["```", "", "Raw results: `results.jsonl` (one object per measurement; `raw` holds "
            "each tool's own JSON).", ""]
    with open(os.path.join(out_dir, "report.md"), "w") as f:
        f.write("\n".join(out))
    return os.path.join(out_dir, "report.md")


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
