//! The user-space fast path: a compact copy of a pure first-match image's
//! trees, built from the image itself when a [`Walker`] is created.
//!
//! The image format is what the BPF walker reads and stays unchanged; this
//! copy only changes how user space lays the same trees out in memory:
//!
//! - **16-byte nodes** (the image's are 32 bytes, with a 128-bit cut): a
//!   cut below 2^32 — every cut of an IPv4 or port list — is one word, so
//!   four nodes share a cache line and a step is one load and one compare.
//!   Cuts that need 128 bits keep them in a side table.
//! - **Leaves hold record offsets** next to entry indices, so a candidate
//!   costs one dependent load (its record) instead of two (entry table,
//!   then record).
//! - **Compact records**: one-range constraints as `(field, lo, span)`
//!   triples checked against the key's fields saturated to 33 bits; any
//!   other constraint (sets, several ranges, 128-bit bounds) marks the
//!   record *complex* and the image's own record is checked instead.
//! - **Rule ids per entry**, so the answer needs no extra record load.
//!
//! The answers are the image walker's by construction (same trees, same
//! leaves, same entry order); the differential tests check both against
//! the decision list.

use crate::image::{self, hw, LEAF_BIT, NODE_BINARY, NODE_MULTI, NODE_WORDS};
use crate::walk::{prefetch, Key, Walker, KEY_OFF, KEY_WIDE};

/// Node kinds of the compact tree (bits 8..16 of node word 0).
const K_NARROW: u32 = 0;
const K_MULTI: u32 = 1;
const K_WIDE: u32 = 2;
/// Record header bit: check the image's record instead.
const COMPLEX: u32 = 1 << 31;
/// A lane with nothing left to walk in this partition.
const DONE: u32 = LEAF_BIT | (u32::MAX >> 1);
/// Lookups walked in lock-step by the batch API.
const LANES: usize = 16;

/// Every fixed field of a key as a `u64`, saturated at 2^32: for a cut or
/// a bound below 2^32, comparing the saturated value is exact, also for
/// the 128-bit fields (addresses, interface names).
type Sat = [u64; 12];

#[inline(always)]
fn saturate(key: &Key) -> Sat {
    let mut s = [0u64; 12];
    for f in 0..12 {
        let at = KEY_OFF[f];
        let lo = key.w[at] as u64;
        s[f] = if KEY_WIDE[f] && (key.w[at + 1] | key.w[at + 2] | key.w[at + 3]) != 0 {
            1 << 32
        } else {
            lo
        };
    }
    s
}

/// The compact trees of one image (see the module doc).
#[derive(Clone, Debug, Default)]
pub(crate) struct Fast {
    /// `[kind << 8 | field (K_MULTI: key word) | shift << 16, cut or lo or
    /// wide index, left or fanout base, right or index mask]`.
    nodes: Vec<[u32; 4]>,
    fanout: Vec<u32>,
    wide_cuts: Vec<u128>,
    roots: Vec<u32>,
    min_entry: Vec<u32>,
    /// `[count, (entry, record offset) × count]` per leaf.
    leaves: Vec<u32>,
    /// `[n | COMPLEX?, then (field, lo, span) × n]`, or for a complex one
    /// `[COMPLEX, image word offset of its record]`.
    recs: Vec<u32>,
    rule_ids: Vec<u32>,
}

/// Builds the compact form of a validated image's leaf at `off` (leaf
/// region offset), reusing an already built copy.
struct Builder<'a> {
    w: &'a [u32],
    leaves_off: usize,
    table_off: usize,
    entries_off: usize,
    nodes_off: usize,
    fanout_off: usize,
    rec_of_entry: Vec<u32>,
    leaf_memo: std::collections::HashMap<u32, u32>,
    out: Fast,
}

impl Builder<'_> {
    fn record(&mut self, i: usize) -> u32 {
        let w = self.w;
        let rec = self.entries_off + w[self.table_off + i] as usize;
        let nc = (w[rec + 1] >> 16) & 0xff;
        let mut triples = Vec::new();
        let mut p = rec + image::RECORD_HEADER_WORDS;
        let mut complex = false;
        for _ in 0..nc {
            let c = w[p];
            let field = c & 0xff;
            let r = c >> 16;
            if field >= image::SET_FIELD || c & image::WIDE_BIT != 0 || r != 1 {
                complex = true;
                break;
            }
            let (lo, hi) = (w[p + 1], w[p + 2]);
            triples.extend([field, lo, hi.wrapping_sub(lo)]);
            p += 3;
        }
        let at = self.out.recs.len() as u32;
        if complex {
            self.out.recs.extend([COMPLEX, rec as u32]);
        } else {
            self.out.recs.push(nc);
            self.out.recs.extend(triples);
        }
        at
    }

    fn leaf(&mut self, r: u32) -> u32 {
        let off = r & !LEAF_BIT;
        if let Some(&at) = self.leaf_memo.get(&off) {
            return LEAF_BIT | at;
        }
        let start = self.leaves_off + off as usize;
        let count = self.w[start] as usize;
        let at = self.out.leaves.len() as u32;
        self.out.leaves.push(count as u32);
        for k in 0..count {
            let i = self.w[start + 1 + k];
            let rec = self.rec_of_entry[i as usize];
            self.out.leaves.extend([i, rec]);
        }
        self.leaf_memo.insert(off, at);
        LEAF_BIT | at
    }

    /// Copies the subtree at image ref `r` breadth-first, so a node's
    /// children sit near it (and near each other).
    fn tree(&mut self, root: u32) -> u32 {
        if root & LEAF_BIT != 0 {
            return self.leaf(root);
        }
        let w = self.w;
        // (image node, fast slot) pairs to fill; slots are reserved when the
        // parent is copied.
        let mut queue = std::collections::VecDeque::new();
        let first = self.out.nodes.len() as u32;
        self.out.nodes.push([0; 4]);
        queue.push_back((root, first));
        while let Some((r, slot)) = queue.pop_front() {
            let n = &w[self.nodes_off + r as usize * NODE_WORDS..][..NODE_WORDS];
            let field = n[0] & 0xff;
            let child = |c: u32, b: &mut Self, q: &mut std::collections::VecDeque<_>| {
                if c & LEAF_BIT != 0 {
                    b.leaf(c)
                } else {
                    let s = b.out.nodes.len() as u32;
                    b.out.nodes.push([0; 4]);
                    q.push_back((c, s));
                    s
                }
            };
            let node = if (n[0] >> 8) & 0xff == NODE_BINARY {
                let cut = (n[4] as u128)
                    | (n[5] as u128) << 32
                    | (n[6] as u128) << 64
                    | (n[7] as u128) << 96;
                let (l, rr) = (n[1], n[2]);
                let left = child(l, self, &mut queue);
                let right = child(rr, self, &mut queue);
                if cut < u32::MAX as u128 + 1 {
                    [K_NARROW << 8 | field, cut as u32, left, right]
                } else {
                    self.out.wide_cuts.push(cut);
                    [
                        K_WIDE << 8 | field,
                        self.out.wide_cuts.len() as u32 - 1,
                        left,
                        right,
                    ]
                }
            } else {
                debug_assert_eq!((n[0] >> 8) & 0xff, NODE_MULTI);
                let bits = n[2] & 0xff;
                let shift = (n[2] >> 8) & 0xff;
                let (base, lo) = (n[1] as usize, n[3]);
                let at = self.out.fanout.len();
                self.out.fanout.resize(at + (1 << bits), 0);
                for k in 0..1usize << bits {
                    let c = w[self.fanout_off + base + k];
                    self.out.fanout[at + k] = child(c, self, &mut queue);
                }
                [
                    K_MULTI << 8 | KEY_OFF[field as usize] as u32 | shift << 16,
                    lo,
                    at as u32,
                    (1 << bits) - 1,
                ]
            };
            self.out.nodes[slot as usize] = node;
        }
        first
    }
}

impl Fast {
    /// The compact form of `walker`'s image, for pure first-match images
    /// (the only ones the fast path serves).
    pub(crate) fn build(walker: &Walker) -> Option<Fast> {
        if !walker.is_pure() {
            return None;
        }
        let img = walker.image();
        let w = img.words();
        let h = |i: usize| w[i] as usize;
        let n_entries = h(hw::N_ENTRIES);
        let mut b = Builder {
            w,
            leaves_off: h(hw::LEAVES_OFF),
            table_off: h(hw::ENTRY_TABLE_OFF),
            entries_off: h(hw::ENTRIES_OFF),
            nodes_off: h(hw::NODES_OFF),
            fanout_off: h(hw::FANOUT_OFF),
            rec_of_entry: Vec::with_capacity(n_entries),
            leaf_memo: Default::default(),
            out: Fast::default(),
        };
        for i in 0..n_entries {
            let r = b.record(i);
            b.rec_of_entry.push(r);
        }
        b.out.rule_ids = (0..n_entries)
            .map(|i| w[b.entries_off + w[b.table_off + i] as usize])
            .collect();
        for p in 0..h(hw::N_PARTITIONS) {
            let part = h(hw::PARTITIONS_OFF) + p * image::PARTITION_WORDS;
            let root = b.tree(w[part]);
            b.out.roots.push(root);
            b.out.min_entry.push(w[part + 3]);
        }
        Some(b.out)
    }

    /// Bytes this copy takes (reported with the image's size).
    pub(crate) fn bytes(&self) -> usize {
        16 * self.nodes.len()
            + 4 * (self.fanout.len()
                + self.leaves.len()
                + self.recs.len()
                + self.rule_ids.len()
                + 2 * self.roots.len())
            + 16 * self.wide_cuts.len()
    }

    #[inline(always)]
    fn step(&self, r: u32, s: &Sat, key: &Key) -> u32 {
        let n = &self.nodes[r as usize];
        let f = (n[0] & 0xff) as usize;
        match (n[0] >> 8) & 0xff {
            // Index, not branch: random traffic costs no mispredictions.
            K_NARROW => n[2 + (s[f] > n[1] as u64) as usize],
            K_MULTI => {
                // As the image walker: the region spans ≤ 2^32 values, so
                // wrapping arithmetic on the field's low word is exact.
                let idx = (key.w[f].wrapping_sub(n[1]) >> (n[0] >> 16)).min(n[3]);
                self.fanout[(n[2] + idx) as usize]
            }
            _ => n[2 + (key.value(f) > self.wide_cuts[n[1] as usize]) as usize],
        }
    }

    #[inline(always)]
    fn matches(&self, walker: &Walker, rec: u32, s: &Sat, key: &Key) -> bool {
        let r = &self.recs[rec as usize..];
        let head = r[0];
        if head & COMPLEX != 0 {
            return walker.matches_at(r[1] as usize, key);
        }
        let nc = head as usize;
        // Most selective constraint first (the compiler's order): most
        // candidates fail on the first triple.
        for c in r[1..1 + 3 * nc].chunks_exact(3) {
            if s[c[0] as usize].wrapping_sub(c[1] as u64) > c[2] as u64 {
                return false;
            }
        }
        true
    }

    #[inline(always)]
    fn scan(&self, walker: &Walker, leaf: u32, best: u32, s: &Sat, key: &Key) -> u32 {
        let at = (leaf & !LEAF_BIT) as usize;
        let count = self.leaves[at] as usize;
        for c in self.leaves[at + 1..at + 1 + 2 * count].chunks_exact(2) {
            // Leaves are sorted: nothing further can beat `best`.
            if c[0] >= best {
                break;
            }
            if self.matches(walker, c[1], s, key) {
                return c[0];
            }
        }
        best
    }

    /// The first matching entry (`u32::MAX`: none).
    #[inline]
    pub(crate) fn first_match(&self, walker: &Walker, key: &Key) -> u32 {
        let s = saturate(key);
        let mut best = u32::MAX;
        for p in 0..self.roots.len() {
            if self.min_entry[p] >= best {
                continue;
            }
            let mut r = self.roots[p];
            while r & LEAF_BIT == 0 {
                r = self.step(r, &s, key);
            }
            best = self.scan(walker, r, best, &s, key);
        }
        best
    }

    /// Rule id of entry `i`; 0 (the policy) for `u32::MAX`.
    #[inline(always)]
    pub(crate) fn rule_id(&self, i: u32) -> u32 {
        self.rule_ids.get(i as usize).copied().unwrap_or(0)
    }

    /// Deciding rule ids of many keys, [`LANES`] walks in lock-step per tree
    /// so their independent loads overlap.
    #[allow(clippy::needless_range_loop)]
    pub(crate) fn first_match_ids(&self, walker: &Walker, keys: &[Key], out: &mut [u32]) {
        let mut sat = [[0u64; 12]; LANES];
        for (keys, out) in keys.chunks(LANES).zip(out.chunks_mut(LANES)) {
            let n = keys.len();
            for l in 0..n {
                sat[l] = saturate(&keys[l]);
            }
            let mut best = [u32::MAX; LANES];
            for p in 0..self.roots.len() {
                let root = self.roots[p];
                let mut refs = [DONE; LANES];
                for l in 0..n {
                    if self.min_entry[p] < best[l] {
                        refs[l] = root;
                    }
                }
                loop {
                    let mut active = false;
                    for l in 0..n {
                        let r = refs[l];
                        if r & LEAF_BIT == 0 {
                            refs[l] = self.step(r, &sat[l], &keys[l]);
                            active = true;
                        }
                    }
                    if !active {
                        break;
                    }
                }
                // Request every lane's first candidate record before
                // checking any, so those misses overlap too.
                for l in 0..n {
                    if refs[l] != DONE {
                        let at = (refs[l] & !LEAF_BIT) as usize;
                        if self.leaves[at] != 0 {
                            prefetch(&self.recs[self.leaves[at + 2] as usize..]);
                        }
                    }
                }
                for l in 0..n {
                    if refs[l] != DONE {
                        best[l] = self.scan(walker, refs[l], best[l], &sat[l], &keys[l]);
                    }
                }
            }
            for l in 0..n {
                out[l] = self.rule_id(best[l]);
            }
        }
    }
}
