#!/usr/bin/env python3
"""The stack of every BPF program's deepest call chain, from the object.

Usage: scripts/bpf_stack.py PARAPET_BPF_O [--max BYTES]

The verifier refuses a program whose call chain (entry, subprograms and
bpf_loop callbacks) needs more than 512 bytes of stack, each frame rounded
up to 16 bytes (kernel 6.x with the JIT; "combined stack size of N calls
is M. Too large").  This reads the frames from `llvm-objdump -dr`: a
function's frame is the deepest r10 offset it uses (an access `r10 - N`
or a pointer `rX = r10; rX += -N`), which the verifier's count (the
offsets it sees used on the paths it walks) never exceeds.  Calls are the
relocated `call` instructions (to a named function or into .text) and the
callback addresses loaded for bpf_loop (`rX = N ll` relocated to .text).

Prints, per program section, its deepest chain with each frame; exits 1
when one is above --max (default 512).  docs/dataplane.md ("Stack") keeps
the numbers of the current object.
"""

import re
import subprocess
import sys

FUNC = re.compile(r"^([0-9a-f]+) <([^>]+)>:$")
SECTION = re.compile(r"^Disassembly of section (\S+):$")
INSN = re.compile(r"^\s*(\d+):\t(.*)$")
RELOC = re.compile(r"^\s+[0-9a-f]+:\s+(R_BPF_64_\d+)\s+(\S+)$")


def frame_of(text):
    """The deepest stack offset an instruction uses, or 0."""
    deepest = 0
    for n in re.findall(r"r10 - (\d+)", text) + re.findall(r"r10 \+ -(\d+)", text):
        deepest = max(deepest, int(n))
    return deepest


def parse(obj):
    out = subprocess.run(
        ["llvm-objdump", "-dr", "--no-show-raw-insn", obj],
        capture_output=True, text=True, check=True,
    ).stdout
    frames, calls, section_of = {}, {}, {}
    text_starts = []  # (insn index in .text, function)
    fn = section = None
    prev = None  # (insn text) of the last instruction, for its relocation
    r10_copies = set()
    for line in out.splitlines():
        m = SECTION.match(line)
        if m:
            section = m.group(1)
            continue
        m = FUNC.match(line)
        if m:
            if not m.group(2).startswith("LBB"):
                fn = m.group(2)
                frames[fn], calls[fn], section_of[fn] = 0, [], section
                if section == ".text":
                    text_starts.append((int(m.group(1), 16) // 8, fn))
            continue
        if fn is None:
            continue
        m = INSN.match(line)
        if m:
            insn = m.group(2).strip()
            frames[fn] = max(frames[fn], frame_of(insn))
            copy = re.match(r"(r\d) = r10$", insn)
            add = re.match(r"(r\d) \+= -(\d+)$", insn)
            if add and add.group(1) in r10_copies:
                frames[fn] = max(frames[fn], int(add.group(2)))
            r10_copies = {copy.group(1)} if copy else set()
            prev = insn
            continue
        m = RELOC.match(line)
        if m and prev is not None:
            kind, sym = m.groups()
            call = re.match(r"call (-?\d+)$", prev)
            ld = re.match(r"r\d = (\d+) ll$", prev)
            if call and sym == ".text":
                calls[fn].append(("text", int(call.group(1)) + 1))
            elif call and kind == "R_BPF_64_32":
                calls[fn].append(("name", sym))
            elif ld and sym == ".text":
                calls[fn].append(("text", int(ld.group(1)) // 8))
    text_starts.sort()

    def at(index):
        found = None
        for start, name in text_starts:
            if start <= index:
                found = name
        return found

    graph = {}
    for f, targets in calls.items():
        names = set()
        for kind, t in targets:
            name = at(t) if kind == "text" else t
            if name in frames:
                names.add(name)
        graph[f] = sorted(names)
    return frames, graph, section_of


def rounded(n):
    return (n + 15) // 16 * 16


def deepest(f, frames, graph, seen=()):
    """(bytes, chain) of the deepest chain from f."""
    best = (0, [])
    for g in graph[f]:
        if g in seen:
            continue
        cand = deepest(g, frames, graph, seen + (f,))
        if cand[0] > best[0]:
            best = cand
    return rounded(frames[f]) + best[0], [f] + best[1]


def main():
    args = sys.argv[1:]
    limit = 512
    if "--max" in args:
        i = args.index("--max")
        limit = int(args[i + 1])
        del args[i : i + 2]
    if len(args) != 1:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    frames, graph, section_of = parse(args[0])
    worst = 0
    for f in sorted(frames):
        if section_of[f] == ".text":
            continue
        total, chain = deepest(f, frames, graph)
        worst = max(worst, total)
        steps = " + ".join(f"{g} {rounded(frames[g])}" for g in chain)
        print(f"{total:4d}  {section_of[f]}: {steps}")
    if worst > limit:
        print(f"deepest chain {worst} bytes > {limit}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
