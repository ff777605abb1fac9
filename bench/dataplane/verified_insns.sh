#!/usr/bin/env bash
# The verifier's instruction count (bpf_prog_info.verified_insns) of every
# program parapet loads, with and without the conntrack lookup: XDP, tc, the
# netfilter program, the tc placement's ingress and egress programs (and the
# helper programs of the load, named as the kernel lists them). Needs root.
# The tc placement's ingress program must stay under the verifier's
# 1,000,000 (docs/dataplane.md, "Verified instructions").
#   bench/dataplane/verified_insns.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
echo "kernel $(uname -r), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
cargo run -q -p parapet-dataplane --example verified_insns
