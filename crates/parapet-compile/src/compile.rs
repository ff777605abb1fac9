//! The compiler: decision list → classifier image.
//!
//! 1. Each entry becomes a box: per field, its ranges (and their hull), plus
//!    a set-membership mask.
//! 2. The entries are split into a few **partitions** by which address
//!    fields are specific (EffiCuts / CutSplit): rules that pin the source
//!    but not the destination never share a tree with rules that pin only
//!    the destination, so cutting one address never copies the other
//!    group's wide rules. This is what keeps `cross_product` linear in size.
//! 3. Each partition becomes a binary **range-cut tree** (HyperSplit): at
//!    each node, the field and cut point minimizing a cost on the rules'
//!    endpoints (balance first, replication second); rules are copied to the
//!    side(s) they overlap. Nodes with few rules, or when the memory or work
//!    budget is spent, or at the depth cap, become leaves: sorted lists of
//!    entry indices that the walker checks in full.
//! 4. Everything is laid out as the flat image of `docs/image-format.md`.

use parapet_image::{self as image, hw, kind, Backend, Image, ImageError};
use parapet_model::{DecisionList, EntryKind, Field, Verdict};
use std::collections::HashMap;
use std::fmt;
use std::time::Instant;

/// Upper bound on the cut-selection work of one compile, in entry-field
/// visits, whatever the list size.
pub const MAX_WORK: u64 = 150_000_000;

/// Number of fixed fields a tree can cut (field ids 0..=11).
pub const FIELDS: usize = 12;

/// Knobs of [`compile`].
#[derive(Clone, Debug)]
pub struct CompileOptions {
    /// Which backend to emit.
    pub backend: Backend,
    /// Bytes the image may take. The rule records themselves are a floor
    /// (an image can never be smaller than the linear one); above that, the
    /// trees stop cutting when their share is spent.
    pub max_memory: usize,
    /// A node with at most this many entries becomes a leaf (HyperSplit's
    /// `binth`).
    pub leaf_size: usize,
    /// Split the rules into partitions by address specificity.
    pub partition: bool,
    /// Depth cap of every tree (≤ [`image::MAX_DEPTH`]).
    pub max_depth: usize,
    /// Cap on cut-selection work, in entry-field visits, as a multiple of
    /// the entry count (plus a constant). Bounds build time on adversarial
    /// lists deterministically.
    pub work_factor: u64,
    /// Space factor of multi-way cuts (HiCuts' `spfac`): a node may cut a
    /// field into up to 256 equal parts as long as the children hold at most
    /// `spfac × n` entries in total. 0 disables multi-way cuts (binary range
    /// cuts only).
    pub spfac: f64,
}

impl Default for CompileOptions {
    fn default() -> Self {
        CompileOptions {
            backend: Backend::Tree,
            max_memory: 256 << 20,
            leaf_size: 8,
            partition: true,
            max_depth: 48,
            work_factor: 4_000,
            spfac: 4.0,
        }
    }
}

/// Why a list could not be compiled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CompileError {
    /// More entries than the format allows.
    TooManyEntries(usize),
    /// More set references than one `u64` mask holds.
    TooManySets(usize),
    /// A constraint with more ranges than the format allows.
    TooManyRanges {
        /// The entry's rule id.
        rule_id: u32,
    },
    /// The produced image failed validation (a compiler bug).
    Image(ImageError),
}

impl fmt::Display for CompileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CompileError::TooManyEntries(n) => write!(
                f,
                "{n} entries exceed the image format's {} limit",
                image::MAX_ENTRIES
            ),
            CompileError::TooManySets(n) => write!(
                f,
                "{n} set references exceed the image format's {} limit",
                image::MAX_SET_REFS
            ),
            CompileError::TooManyRanges { rule_id } => write!(
                f,
                "rule {rule_id} has a match of more than {} ranges",
                image::MAX_RANGES
            ),
            CompileError::Image(e) => write!(f, "compiler produced a bad image: {e}"),
        }
    }
}

impl std::error::Error for CompileError {}

/// What the compiler did, for `explain()`.
#[derive(Clone, Debug, Default)]
pub struct CompileStats {
    /// Per partition.
    pub partitions: Vec<PartitionStats>,
    /// Wall time of the compile, in milliseconds.
    pub build_ms: f64,
    /// Image size in bytes.
    pub image_bytes: usize,
    /// Words of the entry records (the floor of any image).
    pub entry_words: usize,
    /// True when a tree stopped cutting because its memory share ran out.
    pub memory_limited: bool,
    /// True when a tree stopped cutting because the work budget ran out.
    pub work_limited: bool,
    /// Longest entry record in words.
    pub max_record_words: usize,
}

/// Shape of one partition's tree.
#[derive(Clone, Debug, Default)]
pub struct PartitionStats {
    /// Which rules it holds (e.g. "src+dst specific").
    pub name: String,
    /// Entries assigned to it.
    pub entries: usize,
    /// Tree nodes.
    pub nodes: usize,
    /// Leaves (before sharing identical ones).
    pub leaves: usize,
    /// Longest root-to-leaf path in nodes.
    pub depth: usize,
    /// Longest leaf.
    pub max_leaf: usize,
    /// Entry indices over all leaves, divided by entries: rule replication.
    pub replication: f64,
}

/// One entry as a box, for the compiler.
#[derive(Clone, Debug)]
struct CEntry {
    /// Per fixed field: the ranges, or `None` when unconstrained.
    ranges: [Option<Vec<(u128, u128)>>; FIELDS],
    /// Per fixed field: the hull of the ranges, or the whole field.
    hull: [(u128, u128); FIELDS],
    /// Set membership: bits that must equal `set_want`.
    set_mask: u64,
    set_want: u64,
    /// Some constraint is empty: never matches.
    never: bool,
    /// A Decide entry.
    decide: bool,
}

impl CEntry {
    /// Does the entry overlap `[lo, hi]` on field `f`?
    fn overlaps(&self, f: usize, lo: u128, hi: u128) -> bool {
        match &self.ranges[f] {
            None => true,
            Some(r) => r.iter().any(|&(a, b)| a <= hi && b >= lo),
        }
    }

    /// Does the entry match every packet of the region?
    fn covers(&self, region: &[(u128, u128); FIELDS]) -> bool {
        if self.never || self.set_mask != 0 {
            return false;
        }
        (0..FIELDS).all(|f| match &self.ranges[f] {
            None => true,
            Some(r) => r.iter().any(|&(a, b)| a <= region[f].0 && region[f].1 <= b),
        })
    }
}

fn field_of(id: usize) -> Field {
    Field::FIXED[id]
}

fn field_id(f: Field) -> Option<usize> {
    Field::FIXED.iter().position(|&x| x == f)
}

fn lower(list: &DecisionList) -> Result<Vec<CEntry>, CompileError> {
    list.entries
        .iter()
        .map(|e| -> Result<CEntry, CompileError> {
            let mut c = CEntry {
                ranges: Default::default(),
                hull: std::array::from_fn(|f| (0, field_of(f).max_value())),
                set_mask: 0,
                set_want: 0,
                never: false,
                decide: e.kind.is_terminal(),
            };
            for (field, set) in e.matches.iter() {
                if set.is_empty() {
                    c.never = true;
                }
                match field {
                    Field::Set(n) => {
                        let bit = 1u64
                            .checked_shl(*n as u32)
                            .ok_or(CompileError::TooManySets(*n as usize + 1))?;
                        // Over the one-bit domain the set is {0}, {1} or
                        // empty (full constraints are not stored).
                        c.set_mask |= bit;
                        if set.contains(1) {
                            c.set_want |= bit;
                        }
                    }
                    f => {
                        let id = field_id(*f).expect("fixed field");
                        let r = set.ranges().to_vec();
                        if let (Some(first), Some(last)) = (r.first(), r.last()) {
                            c.hull[id] = (first.0, last.1);
                        }
                        c.ranges[id] = Some(r);
                    }
                }
            }
            Ok(c)
        })
        .collect()
}

/// For each entry, whether a RETURN before it can resume past it: then an
/// earlier entry covering a region does not make the later ones
/// unreachable… unless it is itself not skippable. See `Builder::prune`.
fn skippable(list: &DecisionList) -> Vec<bool> {
    let n = list.entries.len();
    // A RETURN at r with resume s skips (r, s). Mark with a difference array.
    let mut diff = vec![0i64; n + 1];
    for (r, e) in list.entries.iter().enumerate() {
        if let EntryKind::Return { resume, .. } = e.kind {
            let s = (resume as usize).min(n);
            if r + 1 < s {
                diff[r + 1] += 1;
                diff[s] -= 1;
            }
        }
    }
    let mut acc = 0;
    (0..n)
        .map(|i| {
            acc += diff[i];
            acc > 0
        })
        .collect()
}

/// A tree under construction.
#[derive(Default)]
struct Tree {
    nodes: Vec<[u32; image::NODE_WORDS]>,
    /// Child refs of multi-way nodes (tree-local refs, fixed at layout).
    fanout: Vec<u32>,
    /// Leaves, referenced by `leaf index | LEAF_BIT` until layout.
    leaves: Vec<Vec<u32>>,
    depth: usize,
}

struct Builder<'a> {
    entries: &'a [CEntry],
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
    fn prune(&self, list: &mut Vec<u32>, region: &[(u128, u128); FIELDS]) {
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
    fn choose_cut(
        &mut self,
        list: &[u32],
        region: &[(u128, u128); FIELDS],
    ) -> Option<(usize, u128, usize, usize)> {
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
    fn choose_multi(
        &mut self,
        list: &[u32],
        region: &[(u128, u128); FIELDS],
    ) -> Option<(usize, u32, u32, usize)> {
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
        region: &[(u128, u128); FIELDS],
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
    fn build(
        &mut self,
        tree: &mut Tree,
        mut list: Vec<u32>,
        region: [(u128, u128); FIELDS],
        depth: usize,
    ) -> u32 {
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

/// Leaf size of a small catch-all partition (see `compile`).
const CATCH_ALL_LEAF: usize = 16;

/// Partition names, in the order partitions are laid out.
const GROUP_NAMES: [&str; 4] = [
    "src+dst specific",
    "src specific",
    "dst specific",
    "neither address specific",
];

/// Which partition an entry goes to: by whether each address is "small"
/// (at most 1/65536 of its family's address space, i.e. a /16 or longer for
/// IPv4, a /16 or longer for IPv6).
fn group_of(e: &CEntry) -> usize {
    let v4_only = e.hull[0].1 <= 4;
    let small = |f: usize| {
        let Some(_) = &e.ranges[f] else { return false };
        let (lo, hi) = e.hull[f];
        let span = hi - lo;
        let space_bits = if v4_only || hi <= u32::MAX as u128 {
            32
        } else {
            128
        };
        span < (1u128 << (space_bits - 16))
    };
    match (small(1), small(2)) {
        (true, true) => 0,
        (true, false) => 1,
        (false, true) => 2,
        (false, false) => 3,
    }
}

/// Compiles a decision list into a classifier image.
pub fn compile(
    list: &DecisionList,
    opts: &CompileOptions,
) -> Result<(Image, CompileStats), CompileError> {
    let started = Instant::now();
    let (image, stats) = compile_with(list, opts, true)?;
    // Rules pinning both addresses join a single-address tree (see
    // `compile_with`), which pays on prefix lists like ClassBench. Where a
    // budget stopped the cuts (lists whose rules replicate on other
    // fields, e.g. `random_ruleset`'s), the bigger merged tree stops
    // earlier and its leaves grow (random:10000: 462 → 864 entry checks
    // per lookup): then the unmerged partitions are built instead, at
    // most doubling the build time of such lists.
    let merged = stats.partitions.iter().any(|p| p.name.ends_with(MERGED));
    if merged && (stats.work_limited || stats.memory_limited) {
        let (image, mut stats) = compile_with(list, opts, false)?;
        stats.build_ms = started.elapsed().as_secs_f64() * 1e3;
        return Ok((image, stats));
    }
    Ok((image, stats))
}

/// Suffix of the name of a single-address partition that also holds the
/// rules pinning both addresses.
const MERGED: &str = " (with src+dst)";

/// [`compile`]; `merge`: rules pinning both addresses join the larger
/// single-address partition instead of having their own.
fn compile_with(
    list: &DecisionList,
    opts: &CompileOptions,
    merge: bool,
) -> Result<(Image, CompileStats), CompileError> {
    let started = Instant::now();
    let n = list.entries.len();
    if n > image::MAX_ENTRIES {
        return Err(CompileError::TooManyEntries(n));
    }
    if list.set_ref_count > image::MAX_SET_REFS {
        return Err(CompileError::TooManySets(list.set_ref_count));
    }
    let entries = lower(list)?;
    let skip = skippable(list);
    let mut stats = CompileStats::default();

    // Verdict table: the policy first, then each distinct verdict.
    let mut verdicts: Vec<Verdict> = vec![list.policy.clone()];
    let mut verdict_index = |v: &Verdict| -> u32 {
        match verdicts.iter().position(|x| x == v) {
            Some(i) => i as u32,
            None => {
                verdicts.push(v.clone());
                (verdicts.len() - 1) as u32
            }
        }
    };
    // Entry records.
    let mut records: Vec<u32> = Vec::new();
    let mut entry_table: Vec<u32> = Vec::with_capacity(n);
    let mut max_ranges = 0usize;
    for (i, e) in list.entries.iter().enumerate() {
        entry_table.push(records.len() as u32);
        let start = records.len();
        let (k, verdict, resume) = match &e.kind {
            EntryKind::Decide(v) => (kind::DECIDE, verdict_index(v), 0),
            EntryKind::Log => (kind::LOG, 0, 0),
            EntryKind::Count => (kind::COUNT, 0, 0),
            EntryKind::Jump => (kind::JUMP, 0, 0),
            EntryKind::Return { resume, counted } => (
                kind::RETURN | if *counted { kind::COUNTED_BIT } else { 0 },
                0,
                *resume,
            ),
        };
        records.extend([e.rule_id, 0, resume, 0]);
        let c = &entries[i];
        // Constraints most likely to fail first: the smallest fraction of
        // the field's values; the walker stops at the first failing one.
        let mut order: Vec<usize> = (0..FIELDS).filter(|&f| c.ranges[f].is_some()).collect();
        let fraction = |f: usize| {
            let card: u128 = c.ranges[f]
                .as_ref()
                .map(|r| {
                    r.iter().fold(0u128, |s, &(a, b)| {
                        s.saturating_add(b - a).saturating_add(1)
                    })
                })
                .unwrap_or(u128::MAX);
            // Compare as a fraction of the field's span (log scale is
            // enough).
            128 - card.leading_zeros() as i64 - field_of(f).width() as i64
        };
        order.sort_by_key(|&f| (fraction(f), f));
        let mut nc = 0u32;
        for f in order {
            let r = c.ranges[f].as_ref().expect("constrained");
            if r.len() > image::MAX_RANGES {
                return Err(CompileError::TooManyRanges { rule_id: e.rule_id });
            }
            max_ranges = max_ranges.max(r.len());
            let wide = r.iter().any(|&(_, b)| b > u32::MAX as u128);
            records
                .push(f as u32 | if wide { image::WIDE_BIT } else { 0 } | ((r.len() as u32) << 16));
            for &(a, b) in r {
                if wide {
                    for v in [a, b] {
                        records.extend((0..4).map(|k| (v >> (32 * k)) as u32));
                    }
                } else {
                    records.extend([a as u32, b as u32]);
                }
            }
            nc += 1;
        }
        if c.set_mask != 0 {
            records.extend([
                image::SET_FIELD | (1 << 16),
                c.set_mask as u32,
                (c.set_mask >> 32) as u32,
                c.set_want as u32,
                (c.set_want >> 32) as u32,
            ]);
            nc += 1;
        }
        records[start + 1] = k | (verdict << 8) | (nc << 16);
        records[start + 3] = (records.len() - start) as u32;
        stats.max_record_words = stats.max_record_words.max(records.len() - start);
    }
    stats.entry_words = records.len();

    // Partitions.
    let all: Vec<u32> = (0..n as u32).collect();
    // (name, entries, group of `group_of`; 4 when not partitioned).
    let mut groups: Vec<(String, Vec<u32>, usize)> = Vec::new();
    if opts.backend == Backend::Linear {
        groups.push(("all entries (linear)".into(), all, 4));
    } else if !opts.partition || n <= 4 * opts.leaf_size {
        groups.push(("all entries".into(), all, 4));
    } else {
        let mut g: [Vec<u32>; 4] = Default::default();
        for &i in &all {
            g[group_of(&entries[i as usize])].push(i);
        }
        // Rules pinning both addresses join the larger single-address
        // group: cutting that address copies none of them, and a lookup
        // walks one tree fewer. Measured (`explain`, the sets' traces):
        // fw1_10k 10.9 → 7.6 fast-path steps per lookup, ipc1_10k 12.7 →
        // 10.6, fw1_100k 12.0 → 8.0, ipc1_100k 6.4 → 5.0, memory within
        // ±4%. Rules pinning only the other address still get their own
        // tree, so `cross_product` stays unreplicated.
        let host = if g[2].len() > g[1].len() { 2 } else { 1 };
        let with_both = merge && !g[0].is_empty();
        if with_both {
            let both = std::mem::take(&mut g[0]);
            let mut merged: Vec<u32> = both.into_iter().chain(g[host].drain(..)).collect();
            merged.sort_unstable();
            g[host] = merged;
        }
        // A tiny partition costs a tree walk per lookup for little gain:
        // fold it into the catch-all one (whose tree may cut any field).
        let tiny = (n / 50).max(32);
        for k in 0..3 {
            if !g[k].is_empty() && g[k].len() < tiny {
                let moved = std::mem::take(&mut g[k]);
                g[3].extend(moved);
            }
        }
        g[3].sort_unstable();
        for (k, list) in g.into_iter().enumerate() {
            if !list.is_empty() {
                let name = if k == host && with_both {
                    format!("{}{MERGED}", GROUP_NAMES[k])
                } else {
                    GROUP_NAMES[k].into()
                };
                groups.push((name, list, k));
            }
        }
        // Walk the partition holding the earliest rules first: its match
        // lets the walker skip partitions whose rules all come later.
        groups.sort_by_key(|(_, l, _)| l.first().copied());
        if groups.is_empty() {
            groups.push(("all entries".into(), Vec::new(), 4));
        }
    }

    // Trees. The budget in words, less the fixed parts, shared by entry
    // count so one partition cannot starve the others.
    let fixed_words = image::HEADER_WORDS
        + groups.len() * image::PARTITION_WORDS
        + n
        + records.len()
        + verdicts.len() * image::VERDICT_WORDS
        + 64;
    let budget_words = (opts.max_memory / 4).saturating_sub(fixed_words);
    let region: [(u128, u128); FIELDS] = std::array::from_fn(|f| (0, field_of(f).max_value()));
    let mut trees = Vec::new();
    // Work budget, like memory, shared by entry count: an early partition
    // must not spend what the later ones need.
    // Capped so that even a list whose every cut replicates builds in
    // seconds (one unit is roughly 10–30 ns of cut evaluation).
    let work_total = (opts.work_factor.saturating_mul(n as u64) + 20_000_000).min(MAX_WORK);
    for (name, list, catch_all) in &groups {
        // 80% by entry count, 20% evenly: a small partition of wide rules
        // (firewall "any address" rules) replicates most and needs more than
        // its headcount; the shares still sum to the budget.
        let parts = groups.len() as u128;
        let share = if n == 0 {
            budget_words
        } else {
            (budget_words as u128 * 4 * list.len() as u128 / (5 * n as u128)
                + budget_words as u128 / (5 * parts)) as usize
        };
        let mut tree = Tree::default();
        let root = if opts.backend == Backend::Linear {
            tree.leaves.push(list.clone());
            image::LEAF_BIT
        } else {
            let mut b = Builder {
                entries: &entries,
                skippable: &skip,
                opts,
                used: list.len() + 1,
                budget: share,
                // Shared like the memory: 80% by entries, 20% evenly.
                work_left: if n == 0 {
                    work_total
                } else {
                    (work_total as u128 * 4 * list.len() as u128 / (5 * n as u128)
                        + work_total as u128 / (5 * parts)) as u64
                },
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
                leaf_size: if *catch_all == 3 && 8 * list.len() <= n {
                    opts.leaf_size.max(CATCH_ALL_LEAF)
                } else {
                    opts.leaf_size
                },
            };
            let root = b.build(&mut tree, list.clone(), region, 0);
            stats.memory_limited |= b.memory_limited;
            stats.work_limited |= b.work_limited;
            root
        };
        let total: usize = tree.leaves.iter().map(|l| l.len()).sum();
        stats.partitions.push(PartitionStats {
            name: name.clone(),
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
        trees.push((root, tree));
    }

    // Layout: nodes of all trees renumbered into one array; leaves shared
    // when identical (HyperSplit trees repeat the same short lists often).
    let mut nodes: Vec<u32> = Vec::new();
    let mut pool: Vec<u32> = Vec::new();
    let mut fanout: Vec<u32> = Vec::new();
    let mut pool_index: HashMap<Vec<u32>, u32> = HashMap::new();
    let mut part_words: Vec<u32> = Vec::new();
    let mut max_depth = 0usize;
    let mut max_leaf = 0usize;
    for ((root, tree), ps) in trees.iter().zip(&stats.partitions) {
        let base = (nodes.len() / image::NODE_WORDS) as u32;
        let leaf_refs: Vec<u32> = tree
            .leaves
            .iter()
            .map(|l| {
                max_leaf = max_leaf.max(l.len());
                let off = *pool_index.entry(l.clone()).or_insert_with(|| {
                    let off = pool.len() as u32;
                    pool.push(l.len() as u32);
                    pool.extend_from_slice(l);
                    off
                });
                image::LEAF_BIT | off
            })
            .collect();
        let fix = |r: u32| {
            if r & image::LEAF_BIT != 0 {
                leaf_refs[(r & !image::LEAF_BIT) as usize]
            } else {
                r + base
            }
        };
        let fanout_base = fanout.len() as u32;
        fanout.extend(tree.fanout.iter().map(|&r| fix(r)));
        for node in &tree.nodes {
            if (node[0] >> 8) == image::NODE_MULTI {
                nodes.extend([node[0], node[1] + fanout_base]);
                nodes.extend_from_slice(&node[2..8]);
            } else {
                nodes.extend([node[0], fix(node[1]), fix(node[2]), 0]);
                nodes.extend_from_slice(&node[4..8]);
            }
        }
        max_depth = max_depth.max(tree.depth);
        // Word 3: the partition's smallest entry index, so the fast path can
        // skip a partition that cannot beat the match it already has.
        let min_entry = tree.leaves.iter().filter_map(|l| l.first()).min().copied();
        part_words.extend([
            fix(*root),
            tree.depth as u32,
            ps.nodes as u32,
            min_entry.unwrap_or(u32::MAX),
        ]);
    }

    // Verdict strings.
    let mut strings: Vec<u8> = Vec::new();
    let mut verdict_words: Vec<u32> = Vec::new();
    for v in &verdicts {
        match v {
            Verdict::Accept => verdict_words.extend([0, 0, 0, 0]),
            Verdict::Drop => verdict_words.extend([1, 0, 0, 0]),
            Verdict::Reject { with: None } => verdict_words.extend([2, 0, 0, 0]),
            Verdict::Reject { with: Some(s) } => {
                let code = image::reject::reject_code(Some(s));
                verdict_words.extend([3, strings.len() as u32, s.len() as u32, code]);
                strings.extend_from_slice(s.as_bytes());
            }
        }
    }
    let strings_bytes = strings.len();
    while !strings.len().is_multiple_of(4) {
        strings.push(0);
    }

    let mut w = vec![0u32; image::HEADER_WORDS];
    let put = |w: &mut Vec<u32>, at: usize, data: &[u32]| {
        w[at] = w.len() as u32;
        w.extend_from_slice(data);
    };
    put(&mut w, hw::PARTITIONS_OFF, &part_words);
    put(&mut w, hw::NODES_OFF, &nodes);
    put(&mut w, hw::FANOUT_OFF, &fanout);
    w[hw::FANOUT_WORDS] = fanout.len() as u32;
    put(&mut w, hw::LEAVES_OFF, &pool);
    put(&mut w, hw::ENTRY_TABLE_OFF, &entry_table);
    put(&mut w, hw::ENTRIES_OFF, &records);
    put(&mut w, hw::VERDICTS_OFF, &verdict_words);
    let string_words: Vec<u32> = strings
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    put(&mut w, hw::STRINGS_OFF, &string_words);
    w[hw::MAGIC] = image::MAGIC;
    w[hw::VERSION] = image::VERSION;
    w[hw::BACKEND] = opts.backend as u32;
    w[hw::FLAGS] = if list.is_pure_first_match() {
        image::FLAG_PURE_FIRST_MATCH
    } else {
        0
    };
    w[hw::TOTAL_WORDS] = w.len() as u32;
    w[hw::N_ENTRIES] = n as u32;
    w[hw::N_PARTITIONS] = trees.len() as u32;
    w[hw::POLICY] = 0;
    w[hw::MAX_DEPTH] = max_depth as u32;
    w[hw::MAX_LEAF] = max_leaf as u32;
    w[hw::MAX_RANGES] = max_ranges as u32;
    w[hw::SET_REF_COUNT] = list.set_ref_count as u32;
    w[hw::N_NODES] = (nodes.len() / image::NODE_WORDS) as u32;
    w[hw::LEAVES_WORDS] = pool.len() as u32;
    w[hw::ENTRIES_WORDS] = records.len() as u32;
    w[hw::N_VERDICTS] = verdicts.len() as u32;
    w[hw::STRINGS_BYTES] = strings_bytes as u32;
    w[hw::CHECKSUM] = image::checksum(&w);
    let img = Image::from_words(w).map_err(CompileError::Image)?;
    stats.image_bytes = img.len_bytes();
    stats.build_ms = started.elapsed().as_secs_f64() * 1e3;
    Ok((img, stats))
}
