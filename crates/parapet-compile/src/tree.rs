//! Compile stage 3, tree building: each partition becomes a binary
//! **range-cut tree** (HyperSplit), with multi-way equal-width cuts (HiCuts)
//! where they pay. At each node, the field and cut point minimizing a cost
//! on the rules' endpoints (balance first, replication second); rules are
//! copied to the side(s) they overlap. Nodes with few rules, or when the
//! memory or work budget is spent, or at the depth cap, become leaves:
//! sorted lists of entry indices that the walker checks in full.
//!
//! Trees here use tree-local node and leaf numbers; `emit` lays them out.

use crate::api::{CompileOptions, PartitionStats};
use crate::lower::{whole_space, EntryBox, Lowered, Region, FIELDS};
use crate::partition::Partition;
use parapet_image::{self as image, Backend};

/// Upper bound on the cut-selection work of one compile, in entry-field
/// visits, whatever the list size.
pub(crate) const MAX_WORK: u64 = 150_000_000;

/// Leaf size of a small catch-all partition (see [`build_trees`]).
const CATCH_ALL_LEAF: usize = 16;

/// One partition's tree, with tree-local refs: a child ref is a node
/// number, or `leaf number | LEAF_BIT`.
#[derive(Default)]
pub(crate) struct Tree {
    /// Child ref of the root.
    pub root: u32,
    /// Nodes in image layout, child refs tree-local.
    pub nodes: Vec<[u32; image::NODE_WORDS]>,
    /// Child refs of multi-way nodes (tree-local refs, fixed at layout).
    pub fanout: Vec<u32>,
    /// Leaves, referenced by `leaf index | LEAF_BIT` until layout.
    pub leaves: Vec<Vec<u32>>,
    /// Longest root-to-leaf path in nodes.
    pub depth: usize,
}

/// The trees of all partitions, in partition order.
pub(crate) struct Forest {
    /// One tree per partition.
    pub trees: Vec<Tree>,
    /// One per partition, for [`crate::CompileStats`].
    pub stats: Vec<PartitionStats>,
    /// Some tree stopped cutting because its memory share ran out.
    pub memory_limited: bool,
    /// Some tree stopped cutting because its work share ran out.
    pub work_limited: bool,
}

/// What the trees of one compile may spend: image words beyond the fixed
/// parts, and cut-selection work.
pub(crate) struct Budget {
    words: usize,
    work: u64,
}

impl Budget {
    /// The budget of a compile of `entries` entries whose image takes
    /// `fixed_words` without its trees.
    pub fn new(opts: &CompileOptions, entries: usize, fixed_words: usize) -> Budget {
        Budget {
            words: (opts.max_memory / 4).saturating_sub(fixed_words),
            // Capped so that even a list whose every cut replicates builds
            // in seconds (one unit is roughly 10–30 ns of cut evaluation).
            work: (opts.work_factor.saturating_mul(entries as u64) + 20_000_000).min(MAX_WORK),
        }
    }
}

/// Builds one tree per partition of the `lowered` entries. Memory and work
/// budgets are shared by entry count, so one partition cannot starve the
/// others (an early partition must not spend what the later ones need).
pub(crate) fn build_trees(
    lowered: &Lowered,
    partitions: &[Partition],
    opts: &CompileOptions,
    budget: &Budget,
) -> Forest {
    let n = lowered.boxes.len();
    let parts = partitions.len() as u128;
    // 80% by entry count, 20% evenly: a small partition of wide rules
    // (firewall "any address" rules) replicates most and needs more than
    // its headcount; the shares still sum to the budget.
    let share = |total: u128, len: usize| {
        if n == 0 {
            total
        } else {
            total * 4 * len as u128 / (5 * n as u128) + total / (5 * parts)
        }
    };
    let mut forest = Forest {
        trees: Vec::with_capacity(partitions.len()),
        stats: Vec::with_capacity(partitions.len()),
        memory_limited: false,
        work_limited: false,
    };
    for part in partitions {
        let list = &part.entries;
        let mut tree = Tree::default();
        let root = if opts.backend == Backend::Linear {
            tree.leaves.push(list.clone());
            image::LEAF_BIT
        } else {
            let mut b = Builder {
                entries: &lowered.boxes,
                skippable: &lowered.skippable,
                opts,
                used: list.len() + 1,
                budget: share(budget.words as u128, list.len()) as usize,
                work_left: share(budget.work as u128, list.len()) as u64,
                memory_limited: false,
                work_limited: false,
                // A small catch-all partition of wide rules replicates
                // 50-250x and ran 14-16 deep with leaves of 2. Leaves of
                // 16 cut that to 9-12 (ipc1_10k: 10.6 -> 9.8 fast-path
                // steps per lookup, 1.8 -> 1.9 entry checks; fw1_10k image
                // 1.40 -> 0.99 MB): the scan stops at the first match or at
                // an entry past the best so far, so longer leaves cost few
                // checks. Only for a minority partition: a list that is
                // mostly wide rules keeps its leaf size.
                leaf_size: if part.catch_all && 8 * list.len() <= n {
                    opts.leaf_size.max(CATCH_ALL_LEAF)
                } else {
                    opts.leaf_size
                },
            };
            let root = b.build(&mut tree, list.clone(), whole_space(), 0);
            forest.memory_limited |= b.memory_limited;
            forest.work_limited |= b.work_limited;
            root
        };
        tree.root = root;
        let total: usize = tree.leaves.iter().map(|l| l.len()).sum();
        forest.stats.push(PartitionStats {
            name: part.name.clone(),
            entries: list.len(),
            nodes: tree.nodes.len(),
            leaves: tree.leaves.len(),
            depth: tree.depth,
            max_leaf: tree.leaves.iter().map(|l| l.len()).max().unwrap_or(0),
            replication: if list.is_empty() {
                0.0
            } else {
                total as f64 / list.len() as f64
            },
        });
        forest.trees.push(tree);
    }
    forest
}

struct Builder<'a> {
    entries: &'a [EntryBox],
    skippable: &'a [bool],
    opts: &'a CompileOptions,
    /// Words the tree being built would take if every pending list became a
    /// leaf now; cuts that would push it past `budget` are refused.
    used: usize,
    budget: usize,
    /// Cut-selection work left (entry-field visits).
    work_left: u64,
    memory_limited: bool,
    work_limited: bool,
    leaf_size: usize,
}

impl Builder<'_> {
    /// Drops entries after the first Decide entry that covers the whole
    /// region and that no RETURN can skip: nothing after it can be reached
    /// for a packet of this region.
    fn prune(&self, list: &mut Vec<u32>, region: &Region) {
        if self.opts.keep_shadowed {
            return;
        }
        if let Some(p) = list.iter().position(|&i| {
            let e = &self.entries[i as usize];
            e.decide && !self.skippable[i as usize] && e.covers(region)
        }) {
            list.truncate(p + 1);
        }
    }

    /// Best (field, cut, left count, right count) for `list` in `region`.
    // Fields index several per-field arrays at once.
    #[allow(clippy::needless_range_loop)]
    fn choose_cut(&mut self, list: &[u32], region: &Region) -> Option<(usize, u128, usize, usize)> {
        let n = list.len();
        // Sample big nodes: the endpoints of a few thousand rules place the
        // cut nearly as well, and the work stays near-linear per level.
        let step = (n / 4096).max(1);
        let sample: Vec<u32> = list.iter().step_by(step).copied().collect();
        let m = sample.len();
        let mut best: Option<(u64, usize, u128, usize, usize)> = None;
        let mut a = Vec::with_capacity(m);
        let mut b = Vec::with_capacity(m);
        for f in 0..FIELDS {
            let (rlo, rhi) = region[f];
            if rlo == rhi {
                continue;
            }
            a.clear();
            b.clear();
            let mut useful = false;
            for &i in &sample {
                let (lo, hi) = self.entries[i as usize].hull[f];
                let (lo, hi) = (lo.max(rlo), hi.min(rhi));
                useful |= lo != rlo || hi != rhi;
                a.push(lo);
                b.push(hi);
            }
            self.work_left = self.work_left.saturating_sub(m as u64);
            if !useful {
                continue;
            }
            a.sort_unstable();
            b.sort_unstable();
            // Candidate cuts: each right end (cut just after a rule) and
            // each left end less one (cut just before a rule).
            let candidates = b
                .iter()
                .copied()
                .filter(|&c| c < rhi)
                .chain(a.iter().filter(|&&x| x > rlo).map(|&x| x - 1));
            let mut last = None;
            for c in candidates {
                if last == Some(c) {
                    continue;
                }
                last = Some(c);
                let l = a.partition_point(|&x| x <= c);
                let r = m - b.partition_point(|&x| x <= c);
                if l.max(r) >= m {
                    continue;
                }
                // Balance first (it sets the depth), replication second (it
                // sets the memory).
                let cost = 2 * l.max(r) as u64 + (l + r - m) as u64;
                if best.is_none_or(|bb| cost < bb.0) {
                    best = Some((cost, f, c, l, r));
                }
            }
        }
        best.map(|(_, f, c, l, r)| (f, c, l * step, r * step))
    }

    /// Best equal-width multi-way cut: (field, fanout bits, shift, largest
    /// child) over fields whose region spans at most 2^32 values, so the
    /// walker's index is a 32-bit subtract and shift.
    // Fields index several per-field arrays at once.
    #[allow(clippy::needless_range_loop)]
    fn choose_multi(&mut self, list: &[u32], region: &Region) -> Option<(usize, u32, u32, usize)> {
        if self.opts.spfac <= 0.0 {
            return None;
        }
        let n = list.len();
        let step = (n / 4096).max(1);
        let sample: Vec<u32> = list.iter().step_by(step).copied().collect();
        let m = sample.len();
        let mut best: Option<(usize, usize, usize, u32, u32)> = None;
        let mut diff = vec![0i64; (1 << image::MAX_FANOUT_BITS) + 1];
        for f in 0..FIELDS {
            let (rlo, rhi) = region[f];
            let span = rhi - rlo;
            if span == 0 || span > u32::MAX as u128 {
                continue;
            }
            if sample.iter().all(|&i| {
                let (lo, hi) = self.entries[i as usize].hull[f];
                lo <= rlo && hi >= rhi
            }) {
                continue;
            }
            let width = 128 - span.leading_zeros();
            // More children than ~4 per rule is mostly empty slots.
            let max_bits = (usize::BITS - (4 * m).leading_zeros()).max(1);
            for bits in 1..=image::MAX_FANOUT_BITS.min(width).min(max_bits) {
                let shift = width - bits;
                let c = 1usize << bits;
                diff[..=c].iter_mut().for_each(|d| *d = 0);
                for &i in &sample {
                    let (lo, hi) = self.entries[i as usize].hull[f];
                    let (lo, hi) = (lo.max(rlo), hi.min(rhi));
                    if lo > hi {
                        continue;
                    }
                    diff[((lo - rlo) >> shift) as usize] += 1;
                    diff[((hi - rlo) >> shift) as usize + 1] -= 1;
                }
                self.work_left = self.work_left.saturating_sub(m as u64);
                let (mut acc, mut total, mut maxc) = (0i64, 0usize, 0usize);
                for d in &diff[..c] {
                    acc += d;
                    total += acc as usize;
                    maxc = maxc.max(acc as usize);
                }
                // HiCuts' space rule; more bits only copy more.
                if total as f64 > self.opts.spfac * m as f64 + c as f64 {
                    break;
                }
                if best.is_none_or(|b| (maxc, total) < (b.1, b.2)) {
                    best = Some((f, maxc, total, bits, shift));
                }
            }
        }
        best.map(|(f, maxc, _, bits, shift)| (f, bits, shift, maxc * step))
    }

    /// Emits a multi-way node cutting field `f` of `region` into `1 <<
    /// bits` parts of `1 << shift` values each; `None` when the cut makes no
    /// progress or would exceed the budget.
    #[allow(clippy::too_many_arguments)]
    fn build_multi(
        &mut self,
        tree: &mut Tree,
        list: &[u32],
        region: &Region,
        depth: usize,
        f: usize,
        bits: u32,
        shift: u32,
    ) -> Option<u32> {
        let (rlo, rhi) = region[f];
        let c = 1usize << bits;
        let mut children: Vec<Vec<u32>> = vec![Vec::new(); c];
        let whole = [(rlo, rhi)];
        for &i in list {
            let e = &self.entries[i as usize];
            let ranges: &[(u128, u128)] = e.ranges[f].as_deref().unwrap_or(&whole);
            for &(a, b) in ranges {
                let (a, b) = (a.max(rlo), b.min(rhi));
                if a > b {
                    continue;
                }
                for child in
                    &mut children[((a - rlo) >> shift) as usize..=((b - rlo) >> shift) as usize]
                {
                    if child.last() != Some(&i) {
                        child.push(i);
                    }
                }
            }
        }
        let n = list.len();
        let total: usize = children.iter().map(Vec::len).sum();
        if children.iter().all(|ch| ch.len() >= n) {
            return None;
        }
        let grow = image::NODE_WORDS + 2 * c + total.saturating_sub(n);
        if self.used + grow > self.budget {
            self.memory_limited = true;
            return None;
        }
        self.used += grow;
        let id = tree.nodes.len();
        tree.nodes.push([0; image::NODE_WORDS]);
        let mut refs = Vec::with_capacity(c);
        for (j, child) in children.into_iter().enumerate() {
            let lo = rlo + ((j as u128) << shift);
            let hi = (lo + ((1u128 << shift) - 1)).min(rhi);
            if lo > rhi {
                // Past the region: no packet gets here.
                tree.leaves.push(Vec::new());
                refs.push(image::LEAF_BIT | (tree.leaves.len() - 1) as u32);
                continue;
            }
            let mut sub = *region;
            sub[f] = (lo, hi);
            refs.push(self.build(tree, child, sub, depth + 1));
        }
        let off = tree.fanout.len() as u32;
        tree.fanout.extend(refs);
        tree.nodes[id] = [
            f as u32 | (image::NODE_MULTI << 8),
            off,
            bits | (shift << 8),
            rlo as u32,
            0,
            0,
            0,
            0,
        ];
        Some(id as u32)
    }

    /// Builds the subtree for `list` in `region`; returns its child ref
    /// (leaves as `LEAF_BIT | leaf number`).
    fn build(&mut self, tree: &mut Tree, mut list: Vec<u32>, region: Region, depth: usize) -> u32 {
        self.prune(&mut list, &region);
        tree.depth = tree.depth.max(depth);
        let leaf = |tree: &mut Tree, list: Vec<u32>| {
            tree.leaves.push(list);
            image::LEAF_BIT | (tree.leaves.len() - 1) as u32
        };
        if list.len() <= self.leaf_size || depth >= self.opts.max_depth {
            return leaf(tree, list);
        }
        if self.work_left == 0 {
            self.work_limited = true;
            return leaf(tree, list);
        }
        let binary = self.choose_cut(&list, &region);
        if let Some((f, bits, shift, maxc)) = self.choose_multi(&list, &region) {
            // One multi-way node costs about two dependent loads (node and
            // fanout word), a binary node one: take the multi-way cut when
            // it shrinks the largest child well beyond what a binary cut
            // does in that many loads.
            let n = list.len() as f64;
            let bin_max = binary.map_or(n, |(_, _, l, r)| l.max(r) as f64);
            let gain_multi = (n / maxc.max(1) as f64).ln();
            let gain_bin = (n / bin_max.max(1.0)).ln();
            if gain_multi > 1.6 * gain_bin {
                if let Some(r) = self.build_multi(tree, &list, &region, depth, f, bits, shift) {
                    return r;
                }
            }
        }
        let Some((f, cut, _, _)) = binary else {
            return leaf(tree, list);
        };
        let (rlo, rhi) = region[f];
        let left: Vec<u32> = list
            .iter()
            .copied()
            .filter(|&i| self.entries[i as usize].overlaps(f, rlo, cut))
            .collect();
        let right: Vec<u32> = list
            .iter()
            .copied()
            .filter(|&i| self.entries[i as usize].overlaps(f, cut + 1, rhi))
            .collect();
        // Exact sizes now known: refuse the cut if it makes no progress or
        // would spend more than the budget (a node, one more leaf header,
        // and the copied entries).
        let n = list.len();
        if left.len().max(right.len()) >= n {
            return leaf(tree, list);
        }
        let grow = image::NODE_WORDS + 1 + (left.len() + right.len()).saturating_sub(n);
        if self.used + grow > self.budget {
            self.memory_limited = true;
            return leaf(tree, list);
        }
        self.used += grow;
        drop(list);
        let id = tree.nodes.len();
        tree.nodes.push([0; image::NODE_WORDS]);
        let mut lregion = region;
        lregion[f].1 = cut;
        let mut rregion = region;
        rregion[f].0 = cut + 1;
        let l = self.build(tree, left, lregion, depth + 1);
        let r = self.build(tree, right, rregion, depth + 1);
        let node = &mut tree.nodes[id];
        node[0] = f as u32;
        node[1] = l;
        node[2] = r;
        for (k, w) in node[4..8].iter_mut().enumerate() {
            *w = (cut >> (32 * k)) as u32;
        }
        id as u32
    }
}
