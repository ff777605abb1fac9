#!/usr/bin/env python3
"""Helpers of bench/dataplane/profile.sh (issue 15, "where the time goes").

  profile.py static XLATED.txt          xlated instructions per stage and per function
  profile.py info PROG_ID               bpf_prog_info: verified_insns, run_time_ns, run_cnt
  profile.py perf PERF_SCRIPT.txt NS    sampled share and ns per packet per function
  profile.py report OUT                 OUT/profile.md from the files above

Stages are named by the source file an instruction's BTF line info points
at (`bpftool prog dump xlated id N linum`), so the split follows the code
whatever the walker rewrite renames inside the files.
"""
import collections
import ctypes
import json
import os
import re
import sys

# source file (under bpf/) -> stage
STAGES = {
    "parapet.bpf.c": "entry, key build",
    "lib/parse.h": "parse",
    "lib/sets.h": "set bits",
    "lib/walk.h": "tree walk",
    "lib/walk_state.h": "tree walk",
    "lib/decide.h": "leaf/record checks, verdict",
    "lib/counters.h": "counters, stats",
    "lib/log.h": "log",
    "lib/gcra.h": "log",
    "lib/conntrack.h": "conntrack",
    "lib/ctstate.h": "conntrack",
    "lib/stateful.h": "stateful matches",
    "lib/reject.h": "reject",
    "lib/debug.h": "debug record",
    "lib/lite.h": "interim table",
}


def stage_of(path):
    rel = path.split("/bpf/")[-1] if path else "?"
    return STAGES.get(rel, rel)


def static(path):
    """Instructions per stage and per function of one xlated dump."""
    by_stage, by_file, by_fn = collections.Counter(), collections.Counter(), collections.Counter()
    src, fn = None, None
    for line in open(path):
        m = re.match(r"^[A-Za-z_].*?\b(\w+)\(.*\):$", line)
        if m:
            fn = m.group(1)
            continue
        m = re.search(r"\[file:(\S+) line_num:", line)
        if line.startswith("; ") and m:
            src = m.group(1)
            continue
        if re.match(r"^\s*\d+: ", line):
            by_stage[stage_of(src)] += 1
            by_file[src.split("/bpf/")[-1] if src else "?"] += 1
            by_fn[fn] += 1
    return {"total": sum(by_fn.values()), "by_stage": dict(by_stage.most_common()),
            "by_file": dict(by_file.most_common()), "by_function": dict(by_fn.most_common())}


def info(prog_id):
    """The bpf_prog_info words this profile reads, by raw bpf(2)."""
    libc = ctypes.CDLL(None, use_errno=True)
    sys_bpf = 321  # x86_64
    attr = (ctypes.c_uint8 * 128)()
    ctypes.c_uint32.from_buffer(attr, 0).value = prog_id
    fd = libc.syscall(sys_bpf, 13, attr, 128)  # BPF_PROG_GET_FD_BY_ID
    if fd < 0:
        raise OSError(ctypes.get_errno(), f"prog id {prog_id}")
    buf = (ctypes.c_uint8 * 256)()
    attr = (ctypes.c_uint8 * 128)()
    ctypes.c_uint32.from_buffer(attr, 0).value = fd
    ctypes.c_uint32.from_buffer(attr, 4).value = 256
    ctypes.c_uint64.from_buffer(attr, 8).value = ctypes.addressof(buf)
    if libc.syscall(sys_bpf, 15, attr, 128) < 0:  # BPF_OBJ_GET_INFO_BY_FD
        raise OSError(ctypes.get_errno(), "BPF_OBJ_GET_INFO_BY_FD")
    os.close(fd)
    u32 = lambda at: ctypes.c_uint32.from_buffer(buf, at).value  # noqa: E731
    u64 = lambda at: ctypes.c_uint64.from_buffer(buf, at).value  # noqa: E731
    # struct bpf_prog_info offsets (uapi/linux/bpf.h)
    return {"id": u32(4), "jited_bytes": u32(16), "xlated_bytes": u32(20),
            "xlated_insns": u32(20) // 8, "run_time_ns": u64(192), "run_cnt": u64(200),
            "verified_insns": u32(216)}


def perf(path, ns_per_packet):
    """Samples under parapet's program (any frame named *_parapet_xdp or
    *_parapet_tc), by the function they were taken in."""
    leaf, total, in_prog = collections.Counter(), 0, 0
    stack = []

    def flush():
        nonlocal total, in_prog
        if not stack:
            return
        total += 1
        if any(re.search(r"_parapet_(xdp|tc)\b", s) for s in stack):
            in_prog += 1
            name = stack[0]
            m = re.match(r"bpf_prog_[0-9a-f]+_(\w+)", name)
            if m:
                name = m.group(1) + " (BPF)"
            elif name.startswith("[unknown]") or re.match(r"^0x|^[0-9a-f]+$", name):
                name = "unresolved (JIT code)"
            leaf[name] += 1

    for line in open(path, errors="replace"):
        if not line.strip():
            flush()
            stack = []
            continue
        if line.startswith((" ", "\t")):
            parts = line.split()
            if len(parts) >= 2:
                stack.append(re.sub(r"\+0x[0-9a-f]+$", "", parts[1]))
    flush()
    rows = [{"function": k, "share": v / in_prog, "ns": v / in_prog * ns_per_packet}
            for k, v in leaf.most_common()] if in_prog else []
    return {"samples": total, "in_program": in_prog, "ns_per_packet": ns_per_packet, "functions": rows}


def report(out):
    lines = ["# parapet dataplane profile", ""]
    lines.append(open(f"{out}/machine.txt").read().strip())
    lines += ["", "## Cost against the floor (BPF_PROG_TEST_RUN, kernel-timed)", "",
              "| ruleset | hook | mode | rules | ns/packet [min–max] | floor | above floor [min–max] |",
              "| --- | --- | --- | ---: | ---: | ---: | ---: |"]
    for l in open(f"{out}/bench.jsonl"):
        r = json.loads(l)
        lines.append(f"| {r['set']} | {r['hook']} | {r['mode']} | {r['rules']} | {r['ns_per_packet']:.0f} "
                     f"[{r['ns_per_packet_min']:.0f}–{r['ns_per_packet_max']:.0f}] | {r['floor_ns_per_packet']:.0f} | "
                     f"{r['above_floor_ns']:.0f} [{r['above_floor_ns_min']:.0f}–{r['above_floor_ns_max']:.0f}] |")
    shown = None
    for name in sorted(os.listdir(out)):
        if not name.endswith(".static.json"):
            continue
        s = json.load(open(f"{out}/{name}"))
        i = json.load(open(f"{out}/{name.replace('.static.json', '.info.json')}"))
        head = (f"xlated {i['xlated_insns']} insns ({i['xlated_bytes']} B), jited {i['jited_bytes']} B, "
                f"verifier processed {i['verified_insns']} insns")
        if s == shown:
            # the same program (only the image differs): say so, once
            lines += ["", f"## Instructions: {name.replace('.static.json', '')}", "", head + "; per stage as above"]
            continue
        shown = s
        lines += ["", f"## Instructions: {name.replace('.static.json', '')}", "", head, "",
                  "| stage | xlated insns | share |", "| --- | ---: | ---: |"]
        for k, v in s["by_stage"].items():
            lines.append(f"| {k} | {v} | {100 * v / s['total']:.0f} % |")
        lines += ["", "| function (BPF subprogram or bpf_loop callback) | xlated insns |", "| --- | ---: |"]
        for k, v in s["by_function"].items():
            lines.append(f"| {k} | {v} |")
    for name in sorted(os.listdir(out)):
        if name.endswith(".traffic.json"):
            t = json.load(open(f"{out}/{name}"))
            lines += ["", f"## Real traffic: {name.replace('.traffic.json', '')}", "",
                      f"kernel.bpf_stats_enabled: {t['run_cnt']} runs, {t['run_time_ns']} ns, "
                      f"**{t['run_time_ns'] / max(t['run_cnt'], 1):.0f} ns per run** "
                      f"(includes the two clock reads bpf_stats adds around each run)"]
        if name.endswith(".perf.json"):
            p = json.load(open(f"{out}/{name}"))
            lines += ["", f"## Sampled time per function: {name.replace('.perf.json', '')}", "",
                      f"{p['in_program']} of {p['samples']} machine-wide samples under parapet's program, real traffic; "
                      f"ns = share × {p['ns_per_packet']:.0f} ns per run (bpf_stats)", "",
                      "| function | share | ns/packet |", "| --- | ---: | ---: |"]
            for r in p["functions"][:25]:
                lines.append(f"| {r['function']} | {100 * r['share']:.1f} % | {r['ns']:.1f} |")
    open(f"{out}/profile.md", "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "static":
        print(json.dumps(static(sys.argv[2])))
    elif cmd == "info":
        print(json.dumps(info(int(sys.argv[2]))))
    elif cmd == "perf":
        print(json.dumps(perf(sys.argv[2], float(sys.argv[3]))))
    elif cmd == "report":
        report(sys.argv[2])
    else:
        sys.exit(f"unknown command {cmd}")
