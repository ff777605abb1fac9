#!/usr/bin/env bash
# `make demo`: parapet on the example data in examples/ — no network, no root,
# nothing outside the repository.
set -euo pipefail
cd "$(dirname "$0")/.."
P=target/release/parapet
step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }

echo "parapet demo — every command below is run for real on examples/"
step $P check examples/host.rules examples/home.nft examples/synthetic_2k.cb
step $P list examples/host.rules --format nft
step $P trace examples/host.rules --packet 'tcp 203.0.113.5:40000 > 10.0.0.2:22 iif eth0 ct new' \
                                  --packet 'tcp 10.0.0.1:51000 > 10.0.0.2:443 iif eth0 ct new'
echo
echo "# classify the trace: one line per packet, the deciding rule id (0 = policy) and verdict"
step $P classify examples/host.rules examples/host.trace --verdict
step $P explain examples/synthetic_2k.cb
echo
echo "# the compiled engine against the linear reference on 20,000 packets: identical answers?"
$P classify examples/synthetic_2k.cb examples/synthetic_2k.trace --engine linear > /tmp/parapet-demo-linear.txt
$P classify examples/synthetic_2k.cb examples/synthetic_2k.trace > /tmp/parapet-demo-auto.txt
if cmp -s /tmp/parapet-demo-linear.txt /tmp/parapet-demo-auto.txt; then
  echo "identical: $(wc -l < /tmp/parapet-demo-auto.txt) packets"
else
  echo "MISMATCH between engines" >&2
  exit 1
fi
rm -f /tmp/parapet-demo-linear.txt /tmp/parapet-demo-auto.txt
step $P bench classify examples/synthetic_2k.cb examples/synthetic_2k.trace --engine linear
step $P bench classify examples/synthetic_2k.cb examples/synthetic_2k.trace

echo
echo "# the side-by-side kernel benchmark (--quick: ~2 minutes), when this machine allows it"
if [ "$(id -u)" = 0 ] && command -v nft >/dev/null && command -v iptables-legacy >/dev/null \
   && ip netns add parapet-demo-probe 2>/dev/null; then
  ip netns del parapet-demo-probe
  mkdir -p target/peers-demo
  PARAPET_BIN=$PWD/$P target/release/parapet-peers --quick --experiments throughput,ipfw \
    --report target/peers-demo --json target/peers-demo/peers.json
  echo "report: target/peers-demo/report.md"
else
  echo "skipped: it needs root, network namespaces, nftables and iptables (then: sudo make bench-quick)"
fi
