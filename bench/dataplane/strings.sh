#!/usr/bin/env bash
# The per-packet price of -m string in the kernel dataplane
# (docs/benchmarks.md §72): the same 11-rule chain with its last rule
# searching the datagram for "needle" (--algo bm) or, as the baseline,
# matching port 30, timed at XDP on 64 UDP datagrams to port 53 that
# do not hold the pattern (the search runs to the end: the worst case
# for a miss), of 64, 512 and 1,400 bytes; and an adversarial chain
# (pattern "aaaaaaab" over 1,400 bytes of "a": the search backs up at
# every byte). Baseline and string chains alternate; then once each
# with the stage profile. Needs root; PARAPET=path/to/parapet.
. "$(dirname "$0")/chains_lib.sh"
chain udp plain "-m udp --dport 30"
chain udp string "-m string --algo bm --string needle"
chain udp adversarial "-m string --algo kmp --string aaaaaaab"
for size in 64 512 1400; do
    pcap "udp$size" udp "$size" "GET /index.html HTTP/1.1 nee"
done
pcap aaaa1400 udp 1400 a
for round in 1 2; do
    for size in 64 512 1400; do
        for k in plain string; do
            timed "$k" "udp$size" "$size bytes, round $round"
        done
    done
    for k in plain adversarial; do
        timed "$k" aaaa1400 "1400 bytes of a, round $round"
    done
done
for k in plain string; do
    timed "$k" udp1400 "1400 bytes, stages" --stages
done
