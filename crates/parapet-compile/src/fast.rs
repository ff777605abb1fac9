//! The user-space fast path: a compact copy of a pure first-match image's
//! trees, built from the image itself. A sibling engine of the tree
//! [`crate::Walker`]: [`crate::Classifier`] builds both and picks this one
//! for first-match lookups when the image allows it.
//!
//! The image format is what the BPF walker reads and stays unchanged; this
//! copy only changes how user space lays the same trees out in memory and
//! how it steps through them:
//!
//! - **Two binary levels per step.** A cut below 2^32 — every cut of an
//!   IPv4 or port list — is one word, so a binary node and its two binary
//!   children fit one 32-byte *quad* node (three cuts, four children; the
//!   image spends 32 bytes on each binary node). The three comparisons are
//!   independent, so a quad costs about one binary step and halves the
//!   dependent loads down binary stretches. Cuts that need 128 bits keep
//!   them in a side table and take a branch.
//! - **Branch-free steps.** Nodes, multi-way fanouts and leaves live in one
//!   word array; a quad's children are its own words 4..8, so both node
//!   kinds end in one indexed load whose base and index are selected, not
//!   branched on.
//! - **Compacted lock-step batches.** A batch steps only the walks still at
//!   a node, kept in a list compacted without branches, so no step is
//!   wasted on a lane that reached its leaf and no per-lane "at a leaf?"
//!   branch mispredicts.
//! - **Leaves hold record offsets** next to entry indices: a candidate
//!   costs one dependent load (its record) instead of two.
//! - **Fixed-size records**: every one-range constraint as a
//!   `(field, lo, span)` triple, padded to the image's longest record with
//!   always-true triples, checked without branches against the key's fields
//!   saturated to 33 bits. Any other constraint (sets, several ranges,
//!   128-bit bounds) makes the record *complex*: the image's own record is
//!   checked instead.
//! - **Rule ids per entry**, so the answer needs no extra record load.
//!
//! The answers are the image walker's by construction (same trees, same
//! leaves, same entry order); `tests/fast_path.rs` checks the fast path
//! against both the image walk and the decision list.

use crate::read::{prefetch, record_matches};
use parapet_image::{
    self as image, hw, u128_at, Image, KeyWords, KEY_OFF, KEY_WIDE, LEAF_BIT, NODE_BINARY,
    NODE_WORDS,
};
use std::collections::HashMap;
use std::hint::select_unpredictable;

/// Node kinds (bits 24..32 of a node's word 0).
const K_QUAD: u32 = 0;
const K_MULTI: u32 = 1;
const K_WIDE: u32 = 2;
const K_LEAF: u32 = 3;
/// Words of a quad node (the largest); `t` ends with this many zeros so a
/// step may read them past any node.
const QUAD_WORDS: usize = 8;
/// Record header bit: check the image's record (offset in the low bits).
const COMPLEX: u32 = 1 << 31;
/// Longest record kept in fixed form; longer ones are complex.
const MAX_TRIPLES: usize = 8;
/// Lookups walked in lock-step by the batch API.
const LANES: usize = 16;
/// Value slots: 0..12 the first twelve fixed fields saturated at 2^32,
/// 12..16 the low words of the 128-bit fields (what multi-way cuts on them
/// read), 16..27 the fields added later (ttl, dscp, length, ct status,
/// mark, ct mark, ct original destination port, ct protocol, address and
/// packet types: ids 12..=22), 27 the source MAC (id 23) saturated, 28 its
/// low word, 29..32 the fields after it (id 24, the routing header; 25 and 26, the socket owner's uid and gid);
/// 32 so a 5-bit slot id indexes it without a bounds check.
const SLOTS: usize = 32;
/// Bits of a slot id in a node word.
const SLOT_MASK: u32 = 0x1f;
/// Fields with a value slot (ids 0..=26): the TCP option bitmaps after
/// them (ids 27, 28) are only ever tested by masked constraints, which
/// make a record complex, and no tree cuts them (a fast path is not built
/// for an image whose tree does); the reverse-path outcome (id 29) makes
/// a record complex too, and an image whose tree cuts it gets no fast
/// path either.
const SLOTTED_FIELDS: u32 = 27;
/// Slot of one-word fixed field `f`.
const fn slot_of(f: u32) -> u32 {
    if f < 12 {
        f
    } else if f < 24 {
        f + 4
    } else {
        // past the source MAC's low word (slot 28)
        f + 5
    }
}
/// Slot of the low word of multi-word field `f` (1, 2, 8, 9; the source
/// MAC, 23).
const fn low_slot(f: usize) -> usize {
    match f {
        1 => 12,
        2 => 13,
        8 => 14,
        9 => 15,
        _ => 28,
    }
}

type Vals = [u64; SLOTS];

/// Slots [`fill_values`] writes; the rest of a [`Vals`] stay zero.
const FILLED: usize = 32;
/// The first slot [`fill_values`] writes only for images that read it.
const EXT_SLOT: u32 = 16;

/// Writes the values a lookup compares into the first [`FILLED`] slots of
/// `v`, in place. For a cut or bound below 2^32, comparing the saturated
/// value is exact, also for the 128-bit fields.
///
/// Written out field by field (constant offsets, no loop, no branch): as a
/// loop over the fields it cost ~140 instructions and a misprediction per
/// lookup. In place, and only the filled slots: returning a whole `Vals`
/// (built in a temporary, zero-padded to 32 slots, then copied into the
/// batch's lane) stored 256 bytes per lookup where 160 are needed.
///
/// `ext`: also the slots from [`EXT_SLOT`] on (the fields added since
/// session 8: TTL, DSCP, length, marks, address types, MAC, …). An image
/// whose trees and fixed records read none of them leaves them zero and
/// unread: half the stores per lookup (§76 measured the fill of all 32
/// slots at 7–11 % of a walk).
#[inline(always)]
fn fill_values(key: &KeyWords, v: &mut Vals, ext: bool) {
    let w = &key.w;
    let low = |f: usize| w[KEY_OFF[f]] as u64;
    let sat = |f: usize| {
        let at = KEY_OFF[f];
        debug_assert!(KEY_WIDE[f]);
        let high = w[at + 1] | w[at + 2] | w[at + 3];
        select_unpredictable(high != 0, 1 << 32, w[at] as u64)
    };

    const _: () = assert!(low_slot(1) == 12 && low_slot(2) == 13);
    const _: () = assert!(low_slot(8) == 14 && low_slot(9) == 15);
    const _: () = assert!(slot_of(12) == 16 && slot_of(19) == 23);
    const _: () = assert!(slot_of(23) == 27 && low_slot(23) == 28);
    const _: () = assert!(slot_of(24) == 29 && slot_of(26) == 31);
    const _: () = assert!(SLOTTED_FIELDS == 27 && slot_of(26) as usize + 1 == FILLED);
    const _: () = assert!(image::FIXED_FIELDS == SLOTTED_FIELDS + 3);
    let v: &mut [u64; FILLED] = (&mut v[..FILLED]).try_into().expect("FILLED <= SLOTS");
    v[0] = low(0);
    v[1] = sat(1);
    v[2] = sat(2);
    v[3] = low(3);
    v[4] = low(4);
    v[5] = low(5);
    v[6] = low(6);
    v[7] = low(7);
    v[8] = sat(8);
    v[9] = sat(9);
    v[10] = low(10);
    v[11] = low(11);
    v[12] = low(1);
    v[13] = low(2);
    v[14] = low(8);
    v[15] = low(9);
    if !ext {
        return;
    }
    v[16] = low(12);
    v[17] = low(13);
    v[18] = low(14);
    v[19] = low(15);
    v[20] = low(16);
    v[21] = low(17);
    v[22] = low(18);
    v[23] = low(19);
    v[24] = low(20);
    v[25] = low(21);
    v[26] = low(22);
    v[27] = sat(23);
    v[28] = low(23);
    v[29] = low(24);
    v[30] = low(25);
    v[31] = low(26);
}

/// The compact trees of one image (see the module doc). Lookups take the
/// image's words too: complex records are checked in the image itself.
#[derive(Clone, Debug, Default)]
pub struct FastPath {
    /// Quad nodes `[K_QUAD << 24 | slot2 << 10 | slot1 << 5 | slot0, cut0,
    /// cut1, cut2, 4 children]`, multi-way nodes `[K_MULTI << 24 | shift <<
    /// 16 | slot, lo, fanout base, index mask]`, 128-bit-cut nodes
    /// `[K_WIDE << 24 | field, wide index, left, right]`, fanouts, and
    /// leaves `[K_LEAF << 24, 0, 0, 0, count, (entry, record) × count]`. A ref to a
    /// leaf carries `LEAF_BIT`. Word 0 starts an empty leaf, where lanes
    /// that skip a tree wait. Every leaf has at least one pair (empty ones
    /// a dummy), so its first record can be prefetched unconditionally.
    t: Vec<u32>,
    wide_cuts: Vec<u128>,
    roots: Vec<u32>,
    min_entry: Vec<u32>,
    /// Records of `1 + 3 * triples` words: `[0 or COMPLEX | image record
    /// offset, (slot, lo, span) × triples]`.
    recs: Vec<u32>,
    triples: usize,
    rule_ids: Vec<u32>,
    /// Whether a node or fixed record reads a slot from [`EXT_SLOT`] on
    /// (then lookups fill them).
    ext: bool,
}

struct Builder<'a> {
    w: &'a [u32],
    leaves_off: usize,
    nodes_off: usize,
    fanout_off: usize,
    rec_of_entry: Vec<u32>,
    leaf_memo: HashMap<u32, u32>,
    out: FastPath,
}

/// A record's constraints as triples, or `None` when one of them is not a
/// single range with 32-bit bounds (or there are too many).
fn triples(w: &[u32], rec: usize) -> Option<Vec<[u32; 3]>> {
    let nc = (w[rec + 1] >> 16) & 0xff;
    let mut out = Vec::new();
    let mut p = rec + image::RECORD_HEADER_WORDS;
    for _ in 0..nc {
        let c = w[p];
        let field = c & 0xff;
        if field >= SLOTTED_FIELDS || c & image::WIDE_BIT != 0 || c >> 16 != 1 {
            return None;
        }
        let (lo, hi) = (w[p + 1], w[p + 2]);
        out.push([slot_of(field), lo, hi.wrapping_sub(lo)]);
        p += 3;
    }
    (out.len() <= MAX_TRIPLES).then_some(out)
}

/// The 128-bit cut of image binary node `n`.
fn cut_of(n: &[u32]) -> u128 {
    u128_at(&n[4..8])
}

impl Builder<'_> {
    fn leaf(&mut self, r: u32) -> u32 {
        let off = r & !LEAF_BIT;
        if let Some(&at) = self.leaf_memo.get(&off) {
            return LEAF_BIT | at;
        }
        let start = self.leaves_off + off as usize;
        let count = self.w[start] as usize;
        let at = self.out.t.len() as u32;
        self.out.t.extend([K_LEAF << 24, 0, 0, 0, count as u32]);
        for k in 0..count {
            let i = self.w[start + 1 + k];
            let rec = self.rec_of_entry[i as usize];
            self.out.t.extend([i, rec]);
        }
        if count == 0 {
            self.out.t.extend([0, 0]);
        }
        self.leaf_memo.insert(off, at);
        LEAF_BIT | at
    }

    /// Copies the tree at image ref `root` breadth-first, so a node's
    /// children sit near it and near each other.
    fn tree(&mut self, root: u32) -> u32 {
        if root & LEAF_BIT != 0 {
            return self.leaf(root);
        }
        let w = self.w;
        // (image node, its reserved place in `t`).
        let mut queue = std::collections::VecDeque::new();
        let nodes_off = self.nodes_off;
        let words = move |c: u32| {
            let n = &w[nodes_off + c as usize * NODE_WORDS..][..NODE_WORDS];
            if (n[0] >> 8) & 0xff == NODE_BINARY && cut_of(n) <= u32::MAX as u128 {
                QUAD_WORDS
            } else {
                4
            }
        };
        let first = self.out.t.len() as u32;
        self.out.t.resize(first as usize + words(root), 0);
        queue.push_back((root, first));
        let child = |c: u32, b: &mut Self, q: &mut std::collections::VecDeque<_>| {
            if c & LEAF_BIT != 0 {
                b.leaf(c)
            } else {
                let s = b.out.t.len() as u32;
                b.out.t.resize(s as usize + words(c), 0);
                q.push_back((c, s));
                s
            }
        };
        while let Some((r, at)) = queue.pop_front() {
            let n = &w[self.nodes_off + r as usize * NODE_WORDS..][..NODE_WORDS];
            let field = n[0] & 0xff;
            let node = if (n[0] >> 8) & 0xff == NODE_BINARY {
                let cut = cut_of(n);
                if cut <= u32::MAX as u128 {
                    // Two levels in one step: each child that is a narrow
                    // binary node is absorbed (its cut and children move
                    // up); any other child fills both of its slots, so its
                    // cut does not matter.
                    let mut q = [K_QUAD << 24 | slot_of(field), cut as u32, 0, 0, 0, 0, 0, 0];
                    for (side, &c) in [n[1], n[2]].iter().enumerate() {
                        let cn = (c & LEAF_BIT == 0)
                            .then(|| &w[self.nodes_off + c as usize * NODE_WORDS..][..NODE_WORDS]);
                        match cn {
                            Some(cn)
                                if (cn[0] >> 8) & 0xff == NODE_BINARY
                                    && cut_of(cn) <= u32::MAX as u128 =>
                            {
                                q[0] |= slot_of(cn[0] & 0xff) << (5 + 5 * side);
                                q[2 + side] = cut_of(cn) as u32;
                                q[4 + 2 * side] = child(cn[1], self, &mut queue);
                                q[5 + 2 * side] = child(cn[2], self, &mut queue);
                            }
                            _ => {
                                let r = child(c, self, &mut queue);
                                q[4 + 2 * side] = r;
                                q[5 + 2 * side] = r;
                            }
                        }
                    }
                    q.to_vec()
                } else {
                    let left = child(n[1], self, &mut queue);
                    let right = child(n[2], self, &mut queue);
                    self.out.wide_cuts.push(cut);
                    let i = self.out.wide_cuts.len() as u32 - 1;
                    vec![K_WIDE << 24 | field, i, left, right]
                }
            } else {
                let bits = n[2] & 0xff;
                let shift = (n[2] >> 8) & 0xff;
                let (base, lo) = (n[1] as usize, n[3]);
                let slot = if KEY_WIDE[field as usize] {
                    low_slot(field as usize) as u32
                } else {
                    slot_of(field)
                };
                let fan = self.out.t.len();
                self.out.t.resize(fan + (1 << bits), 0);
                for k in 0..1usize << bits {
                    let c = w[self.fanout_off + base + k];
                    self.out.t[fan + k] = child(c, self, &mut queue);
                }
                vec![
                    K_MULTI << 24 | slot | shift << 16,
                    lo,
                    fan as u32,
                    (1 << bits) - 1,
                ]
            };
            self.out.t[at as usize..at as usize + node.len()].copy_from_slice(&node);
        }
        first
    }
}

impl FastPath {
    /// The compact form of `image`, for pure first-match images (the only
    /// ones the fast path serves).
    pub fn build(image: &Image) -> Option<FastPath> {
        let w = image.words();
        if w[hw::FLAGS] & image::FLAG_PURE_FIRST_MATCH == 0 {
            return None;
        }
        let h = |i: usize| w[i] as usize;
        let n_entries = h(hw::N_ENTRIES);
        let (table_off, entries_off) = (h(hw::ENTRY_TABLE_OFF), h(hw::ENTRIES_OFF));
        let rec_at = |i: usize| entries_off + w[table_off + i] as usize;
        let parsed: Vec<Option<Vec<[u32; 3]>>> =
            (0..n_entries).map(|i| triples(w, rec_at(i))).collect();
        let k = parsed
            .iter()
            .flatten()
            .map(Vec::len)
            .max()
            .unwrap_or(0)
            .max(1);
        let mut out = FastPath {
            triples: k,
            rule_ids: (0..n_entries).map(|i| w[rec_at(i)]).collect(),
            ..FastPath::default()
        };
        let mut rec_of_entry = Vec::with_capacity(n_entries);
        for (i, p) in parsed.iter().enumerate() {
            rec_of_entry.push(out.recs.len() as u32);
            match p {
                Some(tr) => {
                    out.recs.push(0);
                    for t in tr {
                        out.recs.extend(t);
                    }
                    // Always true: the family is below 2^32.
                    for _ in tr.len()..k {
                        out.recs.extend([0, 0, u32::MAX]);
                    }
                }
                None => {
                    // The image's offsets fit 31 bits (its length is a
                    // u32 count of words, far below 2^31 in practice; a
                    // larger one gets no fast path, see `check`).
                    out.recs.push(COMPLEX | rec_at(i) as u32);
                    out.recs.extend(std::iter::repeat_n(0, 3 * k));
                }
            }
        }
        if w.len() >= COMPLEX as usize {
            return None;
        }
        let (nodes_off, n_nodes) = (h(hw::NODES_OFF), h(hw::N_NODES));
        let node_fields = || (0..n_nodes).map(|i| w[nodes_off + i * NODE_WORDS] & 0xff);
        if node_fields().any(|f| f >= SLOTTED_FIELDS) {
            return None;
        }
        // a node on a field from 12 on reads a slot from EXT_SLOT on (the
        // 128-bit fields' low words, 12..16, are below it), as does a
        // record's triple there
        out.ext = node_fields().any(|f| slot_of(f) >= EXT_SLOT)
            || parsed.iter().flatten().flatten().any(|t| t[0] >= EXT_SLOT);
        out.t.extend([K_LEAF << 24, 0, 0, 0, 0, 0, 0]);
        let mut b = Builder {
            w,
            leaves_off: h(hw::LEAVES_OFF),
            nodes_off: h(hw::NODES_OFF),
            fanout_off: h(hw::FANOUT_OFF),
            rec_of_entry,
            leaf_memo: HashMap::new(),
            out,
        };
        for p in 0..h(hw::N_PARTITIONS) {
            let part = h(hw::PARTITIONS_OFF) + p * image::PARTITION_WORDS;
            let root = b.tree(w[part]);
            b.out.roots.push(root);
            b.out.min_entry.push(w[part + 3]);
        }
        b.out.t.extend([0; QUAD_WORDS]);
        b.out.check().then_some(b.out)
    }

    /// Whether every node and leaf reachable from the roots lies inside
    /// `t` and every leaf's records inside `recs` — what `step` and `scan`
    /// rely on.
    fn check(&self) -> bool {
        let t = &self.t;
        let rec_words = 1 + 3 * self.triples;
        let mut stack: Vec<u32> = self.roots.clone();
        stack.push(LEAF_BIT);
        while let Some(r) = stack.pop() {
            let at = (r & !LEAF_BIT) as usize;
            if r & LEAF_BIT != 0 {
                let Some(&count) = t.get(at + 4) else {
                    return false;
                };
                let pairs = (count as usize).max(1);
                let Some(pairs) = t.get(at + 5..at + 5 + 2 * pairs) else {
                    return false;
                };
                if pairs
                    .chunks_exact(2)
                    .any(|c| c[1] as usize + rec_words > self.recs.len())
                {
                    return false;
                }
                continue;
            }
            // Every step reads QUAD_WORDS words, whatever the kind.
            let Some(n) = t.get(at..at + QUAD_WORDS) else {
                return false;
            };
            let children = match n[0] >> 24 {
                K_QUAD => &n[4..8],
                K_WIDE if (n[1] as usize) < self.wide_cuts.len() => &n[2..4],
                K_MULTI => match t.get(n[2] as usize..=(n[2] as usize + n[3] as usize)) {
                    Some(c) => c,
                    None => return false,
                },
                _ => return false,
            };
            stack.extend(children);
        }
        true
    }

    /// `(words of nodes, fanouts and leaves; complex records; 128-bit
    /// cuts)`, so tests can show they reach every kind.
    #[doc(hidden)]
    pub fn shape(&self) -> (usize, usize, usize) {
        let complex = self
            .recs
            .chunks_exact(1 + 3 * self.triples)
            .filter(|r| r[0] & COMPLEX != 0)
            .count();
        (self.t.len(), complex, self.wide_cuts.len())
    }

    /// Bytes this copy takes (reported with the image's size).
    pub fn bytes(&self) -> usize {
        4 * (self.t.len() + self.recs.len() + self.rule_ids.len() + 2 * self.roots.len())
            + 16 * self.wide_cuts.len()
    }

    /// One step from node `r` (never a leaf). `WIDE`: the trees may hold
    /// 128-bit-cut nodes (without any, the kind test is left out).
    #[inline(always)]
    fn step<const WIDE: bool>(&self, r: u32, v: &Vals, key: &KeyWords) -> u32 {
        let t = self.t.as_slice();
        let r = r as usize;
        debug_assert!(r + QUAD_WORDS <= t.len());
        // SAFETY: `check` (run by `build`, which returns no fast path when
        // it fails) proved that every node reachable from a root has
        // QUAD_WORDS words inside `t`, and only such nodes are stepped.
        let n = unsafe { t.get_unchecked(r..r + QUAD_WORDS) };
        let h = n[0];
        let kind = h >> 24;
        if WIDE && kind == K_WIDE {
            let f = (h & 0xff) as usize;
            return n[2 + (key.value(f) > self.wide_cuts[n[1] as usize]) as usize];
        }
        // Quad: two binary levels, their three cuts compared at once.
        let b0 = v[(h & SLOT_MASK) as usize] > n[1] as u64;
        let b1 = v[((h >> 5) & SLOT_MASK) as usize] > n[2] as u64;
        let b2 = v[((h >> 10) & SLOT_MASK) as usize] > n[3] as u64;
        let iq = 2 * b0 as u32 + select_unpredictable(b0, b2, b1) as u32;
        // Multi-way: as the image walker, wrapping 32-bit arithmetic on the
        // low word is exact because the region spans ≤ 2^32 values.
        let x = v[(h & SLOT_MASK) as usize] as u32;
        let im = (x.wrapping_sub(n[1]) >> ((h >> 16) & 31)).min(n[3]);
        // Both are computed and one selected: the kind is data, a branch
        // on it mispredicts.
        let multi = kind == K_MULTI;
        let base = select_unpredictable(multi, n[2], r as u32 + 4);
        let idx = select_unpredictable(multi, im, iq);
        debug_assert!(((base + idx) as usize) < t.len());
        // SAFETY: `check` proved that a quad node's words 4..8 and a
        // multi-way node's fanout `base..=base + mask` lie inside `t`; `idx`
        // is ≤ 3 or ≤ mask respectively.
        unsafe { *t.get_unchecked((base + idx) as usize) }
    }

    /// Does record `rec` match? No branches on the data for fixed records.
    #[inline(always)]
    fn matches(&self, image: &[u32], rec: u32, v: &Vals, key: &KeyWords) -> bool {
        let r = &self.recs[rec as usize..rec as usize + 1 + 3 * self.triples];
        if r[0] & COMPLEX != 0 {
            return record_matches(image, (r[0] & !COMPLEX) as usize, key);
        }
        r[1..].chunks_exact(3).fold(true, |ok, c| {
            ok & (v[(c[0] & SLOT_MASK) as usize].wrapping_sub(c[1] as u64) <= c[2] as u64)
        })
    }

    /// The first entry below `best` matching in the leaf `r`, or `best`.
    #[inline(always)]
    fn scan(&self, image: &[u32], r: u32, mut best: u32, v: &Vals, key: &KeyWords) -> u32 {
        let at = (r & !LEAF_BIT) as usize + 4;
        let count = self.t[at] as usize;
        for c in self.t[at + 1..at + 1 + 2 * count].chunks_exact(2) {
            // Leaves are sorted: nothing further can beat `best`.
            if c[0] >= best {
                break;
            }
            if self.matches(image, c[1], v, key) {
                best = c[0];
                break;
            }
        }
        best
    }

    /// The first matching entry of `key` in the image whose words are
    /// `image` (the one this was built from).
    #[inline]
    pub fn first_match(&self, image: &[u32], key: &KeyWords) -> Option<u32> {
        let best = self.walk(image, key).0;
        (best != u32::MAX).then_some(best)
    }

    /// Node steps [`FastPath::first_match`] takes for `key` (a quad node is
    /// one step for two binary levels), for `explain`.
    pub fn steps(&self, image: &[u32], key: &KeyWords) -> usize {
        self.walk(image, key).1
    }

    /// The first matching entry and the tree steps taken to find it; the
    /// step count is dead code (and optimised away) in `first_match`.
    #[inline(always)]
    fn walk(&self, image: &[u32], key: &KeyWords) -> (u32, usize) {
        let mut v = [0u64; SLOTS];
        fill_values(key, &mut v, self.ext);
        let (mut best, mut steps) = (u32::MAX, 0);
        for p in 0..self.roots.len() {
            if self.min_entry[p] >= best {
                continue;
            }
            let mut r = self.roots[p];
            while r & LEAF_BIT == 0 {
                r = self.step::<true>(r, &v, key);
                steps += 1;
            }
            best = self.scan(image, r, best, &v, key);
        }
        (best, steps)
    }

    /// Rule id of entry `i`; 0 (the policy) for `u32::MAX`.
    #[inline(always)]
    fn rule_id(&self, i: u32) -> u32 {
        self.rule_ids.get(i as usize).copied().unwrap_or(0)
    }

    /// Deciding rule ids of many keys: [`LANES`] keys at a time walk each
    /// tree together so their independent loads overlap. Each round steps
    /// only the walks still at a node (compacted without branches): no step
    /// is wasted and no per-walk "at a leaf?" branch mispredicts. Lanes
    /// whose best match already beats a tree's smallest entry skip it.
    pub fn first_match_ids(&self, image: &[u32], keys: &[KeyWords], out: &mut [u32]) {
        if self.wide_cuts.is_empty() {
            self.ids::<false>(image, keys, out)
        } else {
            self.ids::<true>(image, keys, out)
        }
    }

    /// [`FastPath::first_match_ids`]; `WIDE` as in [`FastPath::step`].
    fn ids<const WIDE: bool>(&self, image: &[u32], keys: &[KeyWords], out: &mut [u32]) {
        let mut vals = [[0u64; SLOTS]; LANES];
        let mut refs = [0u32; LANES];
        let mut act = [0u8; LANES];
        for (keys, out) in keys.chunks(LANES).zip(out.chunks_mut(LANES)) {
            let n = keys.len();
            for (v, k) in vals.iter_mut().zip(keys) {
                fill_values(k, v, self.ext);
            }
            let mut best = [u32::MAX; LANES];
            for (p, &root) in self.roots.iter().enumerate() {
                let mut na = 0;
                for l in 0..n {
                    // A skipping lane waits at the empty leaf.
                    let go = self.min_entry[p] < best[l];
                    refs[l] = if go { root } else { LEAF_BIT };
                    act[na] = l as u8;
                    na += (refs[l] & LEAF_BIT == 0) as usize;
                }
                while na > 0 {
                    let mut k = 0;
                    for j in 0..na {
                        let l = act[j] as usize % LANES;
                        let r = self.step::<WIDE>(refs[l], &vals[l], &keys[l]);
                        refs[l] = r;
                        act[k] = l as u8;
                        k += (r & LEAF_BIT == 0) as usize;
                    }
                    na = k;
                }
                // Request every lane's first candidate record before
                // checking any, so those misses overlap too.
                for &r in &refs[..n] {
                    let at = (r & !LEAF_BIT) as usize + 4;
                    prefetch(&self.recs[self.t[at + 2] as usize..]);
                }
                for l in 0..n {
                    best[l] = self.scan(image, refs[l], best[l], &vals[l], &keys[l]);
                }
            }
            for l in 0..n {
                out[l] = self.rule_id(best[l]);
            }
        }
    }
}
