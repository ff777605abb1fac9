#!/usr/bin/env python3
"""Refreshes the outputs of the `$ $P …` examples in docs/cli.md.

The test crates/parapet-cli/tests/docs.rs checks that every example prints
what the doc shows; after an intended change of output, run

    cargo build -p parapet && scripts/bless-docs.py

and review the diff.
"""
import os
import re
import subprocess
import sys
import tempfile

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
binary = os.environ.get("P", os.path.join(root, "target", "debug", "parapet"))
path = os.path.join(root, "docs", "cli.md")
lines = open(path).read().split("\n")
out, in_block, skipping = [], False, False
tmp = tempfile.mkdtemp(prefix="bless-docs-")
for line in lines:
    if line.startswith("```"):
        in_block = not in_block
        skipping = False
        out.append(line)
        continue
    if in_block and line.startswith("$ ") and "$P" in line:
        out.append(line)
        # Files an example writes (`> NAME`) go to a scratch directory, as
        # in tests/docs.rs, never into the repository.
        cmd = line[2:]
        scratch = set(re.findall(r">\s*([\w.-]+)", cmd)) | {"bad.rules"}
        for name in scratch:
            cmd = cmd.replace(name, os.path.join(tmp, name))
        res = subprocess.run(["bash", "-c", f"cd {root} && {cmd} 2>&1"], env={**os.environ, "P": binary},
                             capture_output=True, text=True)
        text = res.stdout
        for name in scratch:
            text = text.replace(os.path.join(tmp, name), name)
        text = text.rstrip("\n")
        if text:
            out.extend(text.split("\n"))
        skipping = True
        continue
    if in_block and skipping and not (line.startswith("# parapet") or line.startswith("# ip ")):
        continue
    skipping = False
    out.append(line)
open(path, "w").write("\n".join(out))
print(f"refreshed {path}", file=sys.stderr)
