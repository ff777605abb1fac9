#!/usr/bin/env bash
# issue 15, session 15 (k15attach), docs/benchmarks.md §60: the generated
# program as parapetd attaches it (`--engine generated-attached`: counting
# in the main program's counters, statistics and hook rows) against the
# walker (`auto`) and the stand-alone generated program with counters
# (`generated`, §57's), at 1 rule and 25 worst-case rules, both forms,
# floor interleaved: session 14's kit (../session14-k15gen/run.sh) with
# these sets and engines. Run from this directory as root with
# PARAPET=path/to/parapet; ROUNDS (3).
set -u
cd "$(dirname "$0")/../session14-k15gen" || exit 1
SETS=${SETS:-one_rule wc25} ENGINES=${ENGINES:-auto generated generated-attached} ./run.sh
