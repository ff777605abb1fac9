#!/bin/bash
# same-run before/after, 1 rule, XDP and tc; before = main 089f510's BPF, after = h/k15
set -e
echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in 1 2; do for which in before after; do for hook in xdp tc; do
  ./parapet-$which bench dataplane one.rules wc25.trace --hook $hook --sample 64 --repeat 100 --runs 7 --stats-off-too --json | sed "s/^{/{\"which\":\"$which\",\"round\":$r,/"
done; done; done
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
