#!/usr/bin/env bash
# The per-packet price of --tcp-option in the kernel dataplane
# (docs/benchmarks.md §65): the same 11-rule chain with its last rule
# testing option kind 30 or, as the baseline, port 30, timed at XDP on
# 64 SYNs with a 20-byte option area (MSS, SACK permitted, timestamps,
# NOP, window scale), baseline and option chain alternating, then once
# each with the stage profile. Needs root; PARAPET=path/to/parapet.
. "$(dirname "$0")/chains_lib.sh"
chain tcp plain "-m tcp --dport 30"
chain tcp opt "-m tcp --tcp-option 30"
pcap syn syn 020405b40402080a000000010000000001030307
for round in 1 2; do
    for k in plain opt; do
        timed "$k" syn "round $round"
    done
done
for k in plain opt; do
    timed "$k" syn stages --stages
done
