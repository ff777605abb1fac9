#!/usr/bin/env python3
"""Reports circles of `crate::…` / `super::…` references between the source
files of each crate (issue 12: no circle of imports between files).

A file's module path comes from its place under src/ (a/b.rs and a/b/mod.rs
are `a::b`); an import of `crate::a::b::Item` is an edge to the longest
module path that exists. Child modules importing their parent's items
(`super::`) count like any other edge. Exit 1 and one line per circle when
any exist. Usage: scripts/import_cycles.py [CRATE_DIR…]
"""
import pathlib
import re
import sys

PATH = re.compile(r"\b(crate|super)((?:::\w+)+)")
USE = re.compile(r"\b(?:use|pub use|pub\(crate\) use)\s+(crate|super)((?:::\w+)*)(?:::\{([^;]*)\})?", re.S)


def modules(src):
    mods = {}
    for f in src.rglob("*.rs"):
        rel = f.relative_to(src).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] in ("mod", "lib", "main"):
            parts = parts[:-1]
        if "bin" in parts[:1]:
            continue
        mods[tuple(parts)] = f
    return mods


def targets(mods, here, kind, path, group):
    base = [] if kind == "crate" else list(here[:-1])
    segs = [s for s in path.split("::") if s]
    heads = [base + segs]
    if group:
        # crate::{a, b::c} names several paths
        for item in re.split(r",(?![^{]*\})", group):
            item = item.strip().split(" as ")[0].split("::{")[0]
            if item and item != "self":
                heads.append(base + segs + item.split("::"))
    out = set()
    for h in heads:
        for n in range(len(h), 0, -1):
            if tuple(h[:n]) in mods:
                if tuple(h[:n]) != here:
                    out.add(tuple(h[:n]))
                break
    return out


def cycles(crate):
    src = crate / "src"
    mods = modules(src)
    edges = {m: set() for m in mods}
    for m, f in mods.items():
        text = re.sub(r"//[^\n]*", "", f.read_text())
        # test modules may use anything of their parent
        text = text.split("#[cfg(test)]")[0]
        for kind, path, group in USE.findall(text):
            edges[m] |= targets(mods, m, kind, path, group)
        # paths written out in code (`crate::kernel::Kernel::new()`) count too
        for kind, path in PATH.findall(text):
            edges[m] |= targets(mods, m, kind, path, "")
    # a parent module declaring `mod child` is not an import: only `use` counts
    found, index, low, stack, on = [], {}, {}, [], set()

    def strong(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted("::".join(c) or "lib" for c in comp))

    sys.setrecursionlimit(10000)
    for v in mods:
        if v not in index:
            strong(v)
    return found


def main():
    roots = [pathlib.Path(a) for a in sys.argv[1:]] or sorted(
        p.parent for p in pathlib.Path(".").glob("*/*/Cargo.toml") if (p.parent / "src").is_dir()
    )
    bad = 0
    for crate in roots:
        for comp in cycles(crate):
            bad += 1
            print(f"{crate}: import circle between {', '.join(comp)}")
    if bad == 0:
        print(f"no import circles in {len(roots)} crates")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
