"""The report of a bench/classify run: report.md (tables per ClassBench size,
the worst-case series, ratios against rte_acl) and worst_case.svg, written
from a run directory's meta.json and results.jsonl. run.py calls
write_report at the end of a run and for --report-only."""

import json
import math
import os

SIZES = ["1k", "10k", "100k"]
# Flatness target of the worst-case series: the rate at 25,600 rules is at
# least this share of the rate at 25 rules.
FLATNESS_TARGET = 0.8


def set_size(name):
    return name.rsplit("_", 1)[1]



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
