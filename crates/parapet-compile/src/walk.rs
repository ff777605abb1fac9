//! The Rust walker of the classifier image.
//!
//! It reads the image words directly — the same words the BPF walker reads
//! from its maps — so a difference between the two walkers is a bug in one
//! of them, never a difference of data.

use crate::fast::Fast;
use crate::image::{self, hw, kind, Image};
use parapet_model::{Decision, Field, Packet, Verdict};

/// Key word offset of each field id (`docs/image-format.md`).
pub(crate) const KEY_OFF: [usize; 12] = [0, 1, 5, 9, 10, 11, 12, 13, 14, 18, 22, 23];
/// Whether each field id takes 4 key words (128-bit fields).
pub(crate) const KEY_WIDE: [bool; 12] = [
    false, true, true, false, false, false, false, false, true, true, false, false,
];

/// A packet as the walkers see it: exactly the 26-word key of
/// `docs/image-format.md` (every fixed field, then the set-membership
/// bitmask). Compact on purpose: a batch of keys streams through the cache.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Key {
    /// The key words.
    pub w: [u32; image::KEY_WORDS],
}

impl Key {
    /// The key of a packet with membership bitmask `sets`.
    #[inline]
    pub fn new(pkt: &Packet, sets: u64) -> Key {
        let mut w = [0u32; image::KEY_WORDS];
        for (f, &field) in Field::FIXED.iter().enumerate() {
            let v = pkt.value(field);
            let at = KEY_OFF[f];
            if KEY_WIDE[f] {
                for k in 0..4 {
                    w[at + k] = (v >> (32 * k)) as u32;
                }
            } else {
                w[at] = v as u32;
            }
        }
        w[24] = sets as u32;
        w[25] = (sets >> 32) as u32;
        Key { w }
    }

    /// The key of a packet with membership as `DecisionList::classify`
    /// takes it (bit `n` = `set_bits[n]`; at most 64).
    pub fn from_bits(pkt: &Packet, set_bits: &[bool]) -> Key {
        let sets = set_bits
            .iter()
            .take(image::MAX_SET_REFS)
            .enumerate()
            .fold(0u64, |m, (i, &b)| m | ((b as u64) << i));
        Key::new(pkt, sets)
    }

    /// The value of field id `f` (0..=11).
    #[inline(always)]
    pub fn value(&self, f: usize) -> u128 {
        let at = KEY_OFF[f];
        if KEY_WIDE[f] {
            u128_at(&self.w[at..at + 4])
        } else {
            self.w[at] as u128
        }
    }

    /// The least significant word of field id `f` (what multi-way nodes
    /// read).
    #[inline(always)]
    pub fn low_word(&self, f: usize) -> u32 {
        self.w[KEY_OFF[f]]
    }

    /// The set-membership bitmask.
    #[inline(always)]
    pub fn sets(&self) -> u64 {
        (self.w[24] as u64) | (self.w[25] as u64) << 32
    }

    /// The key as the 26 words of `docs/image-format.md`, for the BPF walker
    /// and its tests.
    pub fn to_words(&self) -> [u32; image::KEY_WORDS] {
        self.w
    }
}

/// The walker: a validated image and the offsets it reads, cached.
#[derive(Clone, Debug)]
pub struct Walker {
    image: Image,
    roots: Vec<u32>,
    /// Per partition: its smallest entry index.
    min_entry: Vec<u32>,
    nodes_off: usize,
    fanout_off: usize,
    leaves_off: usize,
    table_off: usize,
    entries_off: usize,
    pure: bool,
    verdicts: Vec<Verdict>,
    /// The compact copy of the trees for user-space first-match lookups
    /// (pure first-match images only; `crate::fast`).
    fast: Option<Fast>,
}

/// One lookup's raw answer: the deciding entry (if any) and the
/// non-terminal entries that matched, as entry indices.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RawDecision {
    /// Index of the deciding entry; `None` when the policy decides.
    pub entry: Option<u32>,
    /// Indices of the matched non-terminal entries, in evaluation order.
    pub nonterminal: Vec<u32>,
}

/// Hints the CPU to start loading the cache line of `w[0]`.
#[inline(always)]
pub(crate) fn prefetch(w: &[u32]) {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: prefetching is a hint; it never faults, even on an
        // invalid address, and here the address is a live slice's start.
        #[allow(unused_unsafe)]
        unsafe {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            _mm_prefetch::<_MM_HINT_T0>(w.as_ptr() as *const i8);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = w;
}

#[inline(always)]
pub(crate) fn u128_at(w: &[u32]) -> u128 {
    (w[0] as u128) | (w[1] as u128) << 32 | (w[2] as u128) << 64 | (w[3] as u128) << 96
}

impl Walker {
    /// Prepares to walk `image`.
    pub fn new(image: Image) -> Walker {
        let w = image.words();
        let h = |i: usize| w[i] as usize;
        let roots = (0..h(hw::N_PARTITIONS))
            .map(|p| w[h(hw::PARTITIONS_OFF) + p * image::PARTITION_WORDS])
            .collect();
        let min_entry = (0..h(hw::N_PARTITIONS))
            .map(|p| w[h(hw::PARTITIONS_OFF) + p * image::PARTITION_WORDS + 3])
            .collect();
        let strings_off = h(hw::STRINGS_OFF);
        let string_bytes: Vec<u8> = w[strings_off..strings_off + h(hw::STRINGS_BYTES).div_ceil(4)]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        let verdicts = (0..h(hw::N_VERDICTS))
            .map(|v| {
                let row = &w[h(hw::VERDICTS_OFF) + v * image::VERDICT_WORDS..];
                match row[0] {
                    0 => Verdict::Accept,
                    1 => Verdict::Drop,
                    2 => Verdict::Reject { with: None },
                    _ => {
                        let (off, len) = (row[1] as usize, row[2] as usize);
                        Verdict::Reject {
                            with: Some(
                                String::from_utf8_lossy(&string_bytes[off..off + len]).into(),
                            ),
                        }
                    }
                }
            })
            .collect();
        let mut walker = Walker {
            roots,
            min_entry,
            nodes_off: h(hw::NODES_OFF),
            fanout_off: h(hw::FANOUT_OFF),
            leaves_off: h(hw::LEAVES_OFF),
            table_off: h(hw::ENTRY_TABLE_OFF),
            entries_off: h(hw::ENTRIES_OFF),
            pure: w[hw::FLAGS] & image::FLAG_PURE_FIRST_MATCH != 0,
            verdicts,
            image,
            fast: None,
        };
        walker.fast = Fast::build(&walker);
        walker
    }

    /// Bytes of the user-space fast path's compact trees (0 when the image
    /// is walked directly).
    pub fn fast_bytes(&self) -> usize {
        self.fast.as_ref().map_or(0, Fast::bytes)
    }

    /// The fast path's `(tree words, complex records, 128-bit cuts)`, for
    /// tests that must reach each kind.
    #[doc(hidden)]
    pub fn fast_shape(&self) -> Option<(usize, usize, usize)> {
        self.fast.as_ref().map(Fast::shape)
    }

    /// Whether first-match lookups use the compact trees of `crate::fast`.
    pub fn has_fast_path(&self) -> bool {
        self.fast.is_some()
    }

    /// Does entry record at image word `rec` match `key`? (For the fast
    /// path's complex records.)
    #[inline]
    pub(crate) fn matches_at(&self, rec: usize, key: &Key) -> bool {
        self.matches(self.image.words(), rec, key)
    }

    /// The image walked.
    pub fn image(&self) -> &Image {
        &self.image
    }

    /// True when the image's list is pure first-match (the fast path).
    pub fn is_pure(&self) -> bool {
        self.pure
    }

    /// Number of partitions (trees walked per lookup).
    pub fn partitions(&self) -> usize {
        self.roots.len()
    }

    /// One step down the tree from node `r`.
    #[inline(always)]
    fn step(&self, w: &[u32], r: u32, key: &Key) -> u32 {
        let n = &w[self.nodes_off + r as usize * image::NODE_WORDS..][..image::NODE_WORDS];
        let f = (n[0] & 0xff) as usize;
        if n[0] >> 8 == image::NODE_BINARY {
            // Index, not branch: the direction is data, so random traffic
            // costs no branch mispredictions.
            n[1 + (key.value(f) > u128_at(&n[4..8])) as usize]
        } else {
            // Equal-width cut over a ≤ 2^32 span: the offset from the
            // region's low end fits 32 bits, so wrapping 32-bit arithmetic
            // on the low words is exact. The clamp keeps a corrupt image
            // inside the fanout (the BPF verifier needs it too).
            let bits = n[2] & 0xff;
            let shift = (n[2] >> 8) & 0xff;
            let idx = (key.low_word(f).wrapping_sub(n[3]) >> shift).min((1 << bits) - 1);
            w[self.fanout_off + n[1] as usize + idx as usize]
        }
    }

    /// Word index of the leaf partition `p`'s tree sends `key` to.
    #[inline]
    fn leaf_of(&self, w: &[u32], p: usize, key: &Key) -> usize {
        let mut r = self.roots[p];
        while r & image::LEAF_BIT == 0 {
            r = self.step(w, r, key);
        }
        self.leaves_off + (r & !image::LEAF_BIT) as usize
    }

    /// Offset of entry `i`'s record.
    #[inline(always)]
    fn record(&self, w: &[u32], i: u32) -> usize {
        self.entries_off + w[self.table_off + i as usize] as usize
    }

    /// Does the record at word `rec` match `key`?
    #[inline]
    fn matches(&self, w: &[u32], rec: usize, key: &Key) -> bool {
        let nc = (w[rec + 1] >> 16) & 0xff;
        let mut p = rec + image::RECORD_HEADER_WORDS;
        for _ in 0..nc {
            let c = w[p];
            let field = (c & 0xff) as usize;
            let r = (c >> 16) as usize;
            p += 1;
            if field == image::SET_FIELD as usize {
                let mask = (w[p] as u64) | (w[p + 1] as u64) << 32;
                let want = (w[p + 2] as u64) | (w[p + 3] as u64) << 32;
                if key.sets() & mask != want {
                    return false;
                }
                p += 4;
                continue;
            }
            let v = key.value(field);
            if c & image::WIDE_BIT == 0 && r == 1 {
                // The common case (a prefix, a port range, a protocol): one
                // narrow range, one unsigned compare. A value above 32 bits
                // wraps to a huge difference and fails, as it must.
                let (lo, hi) = (w[p], w[p + 1]);
                p += 2;
                if v.wrapping_sub(lo as u128) > (hi.wrapping_sub(lo)) as u128 {
                    return false;
                }
                continue;
            }
            let hit = if c & image::WIDE_BIT == 0 {
                let ranges = &w[p..p + 2 * r];
                p += 2 * r;
                // Narrow ranges hold 32-bit bounds: a wider value is outside.
                v <= u32::MAX as u128 && {
                    let v = v as u32;
                    ranges.chunks_exact(2).any(|x| x[0] <= v && v <= x[1])
                }
            } else {
                let ranges = &w[p..p + 8 * r];
                p += 8 * r;
                ranges
                    .chunks_exact(8)
                    .any(|x| u128_at(&x[0..4]) <= v && v <= u128_at(&x[4..8]))
            };
            if !hit {
                return false;
            }
        }
        true
    }

    /// First-match lookup: the index of the first matching entry, ignoring
    /// entry kinds. Exact for pure first-match lists (every entry decides).
    #[inline]
    pub fn first_match(&self, key: &Key) -> Option<u32> {
        if let Some(f) = &self.fast {
            let best = f.first_match(self, key);
            return (best != u32::MAX).then_some(best);
        }
        self.first_match_image(key)
    }

    /// [`Walker::first_match`] reading the image words directly, as the
    /// BPF walker does (the fast path's reference in tests).
    pub fn first_match_image(&self, key: &Key) -> Option<u32> {
        let w = self.image.words();
        let mut best = u32::MAX;
        for p in 0..self.roots.len() {
            if self.min_entry[p] >= best {
                continue;
            }
            let leaf = self.leaf_of(w, p, key);
            let count = w[leaf] as usize;
            for &i in &w[leaf + 1..leaf + 1 + count] {
                // Leaves are sorted: nothing further can beat `best`.
                if i >= best {
                    break;
                }
                if self.matches(w, self.record(w, i), key) {
                    best = i;
                    break;
                }
            }
        }
        (best != u32::MAX).then_some(best)
    }

    /// As [`Walker::first_match`], skipping entries for which `skip` is
    /// true (tombstones of incremental deletes): the scan goes on past them
    /// in the same leaf.
    pub fn first_match_where(&self, key: &Key, skip: impl Fn(u32) -> bool) -> Option<u32> {
        let w = self.image.words();
        let mut best = u32::MAX;
        for p in 0..self.roots.len() {
            if self.min_entry[p] >= best {
                continue;
            }
            let leaf = self.leaf_of(w, p, key);
            let count = w[leaf] as usize;
            for &i in &w[leaf + 1..leaf + 1 + count] {
                if i >= best {
                    break;
                }
                if !skip(i) && self.matches(w, self.record(w, i), key) {
                    best = i;
                    break;
                }
            }
        }
        (best != u32::MAX).then_some(best)
    }

    /// Full lookup with non-terminal entries and RETURNs: the merge scan of
    /// the doc's "General path".
    pub fn lookup(&self, key: &Key) -> RawDecision {
        if self.pure {
            return RawDecision {
                entry: self.first_match(key),
                nonterminal: Vec::new(),
            };
        }
        let w = self.image.words();
        // Cursors into each partition's leaf: [next word, end word); on the
        // stack, the format caps partitions at MAX_PARTITIONS.
        let mut cur = [(0usize, 0usize); image::MAX_PARTITIONS];
        let cur = &mut cur[..self.roots.len()];
        for (p, c) in cur.iter_mut().enumerate() {
            let leaf = self.leaf_of(w, p, key);
            *c = (leaf + 1, leaf + 1 + w[leaf] as usize);
        }
        let mut pos = 0u32;
        let mut nonterminal = Vec::new();
        loop {
            // The smallest candidate index ≥ pos over all partitions.
            let mut next: Option<(u32, usize)> = None;
            for (p, c) in cur.iter_mut().enumerate() {
                while c.0 < c.1 && w[c.0] < pos {
                    c.0 += 1;
                }
                if c.0 < c.1 && next.is_none_or(|(i, _)| w[c.0] < i) {
                    next = Some((w[c.0], p));
                }
            }
            let Some((i, p)) = next else {
                return RawDecision {
                    entry: None,
                    nonterminal,
                };
            };
            cur[p].0 += 1;
            pos = i + 1;
            let rec = self.record(w, i);
            if !self.matches(w, rec, key) {
                continue;
            }
            let k = w[rec + 1];
            match k & 0xf {
                kind::DECIDE => {
                    return RawDecision {
                        entry: Some(i),
                        nonterminal,
                    }
                }
                kind::RETURN => {
                    if k & kind::COUNTED_BIT != 0 {
                        nonterminal.push(i);
                    }
                    pos = w[rec + 2];
                }
                _ => nonterminal.push(i),
            }
        }
    }

    /// Work of one first-match lookup, for `explain` and tuning: (nodes
    /// visited, candidate entries checked) summed over partitions.
    pub fn lookup_cost(&self, key: &Key) -> (usize, usize) {
        let w = self.image.words();
        let (mut nodes, mut checked) = (0, 0);
        let mut best = u32::MAX;
        for p in 0..self.roots.len() {
            let mut r = self.roots[p];
            if self.min_entry[p] >= best {
                continue;
            }
            while r & image::LEAF_BIT == 0 {
                r = self.step(w, r, key);
                nodes += 1;
            }
            let leaf = self.leaves_off + (r & !image::LEAF_BIT) as usize;
            for &i in &w[leaf + 1..leaf + 1 + w[leaf] as usize] {
                if i >= best {
                    break;
                }
                checked += 1;
                if self.matches(w, self.record(w, i), key) {
                    best = i;
                    break;
                }
            }
        }
        (nodes, checked)
    }

    /// Rule id of entry `i`.
    #[inline]
    pub fn rule_id(&self, i: u32) -> u32 {
        let w = self.image.words();
        w[self.record(w, i)]
    }

    /// Verdict of Decide entry `i`.
    pub fn verdict(&self, i: u32) -> &Verdict {
        let w = self.image.words();
        let k = w[self.record(w, i) + 1];
        &self.verdicts[((k >> 8) & 0xff) as usize]
    }

    /// The chain policy.
    pub fn policy(&self) -> &Verdict {
        &self.verdicts[self.image.header(hw::POLICY) as usize]
    }

    /// The full decision for a key, as `DecisionList::classify` gives it.
    pub fn decide(&self, key: &Key) -> Decision {
        let raw = self.lookup(key);
        Decision {
            rule_id: raw.entry.map_or(0, |i| self.rule_id(i)),
            verdict: raw
                .entry
                .map_or_else(|| self.policy().clone(), |i| self.verdict(i).clone()),
            nonterminal: raw.nonterminal.iter().map(|&i| self.rule_id(i)).collect(),
        }
    }

    /// Deciding rule id (0 for the policy) of each key, walking `LANES`
    /// packets in lock-step through each tree so their independent memory
    /// loads overlap. Pure first-match images only use the fast path; the
    /// others fall back to [`Walker::lookup`] per key.
    // Lanes index several per-lane arrays at once.
    #[allow(clippy::needless_range_loop)]
    pub fn first_match_ids(&self, keys: &[Key], out: &mut [u32]) {
        assert_eq!(keys.len(), out.len(), "one output per key");
        if !self.pure {
            for (k, o) in keys.iter().zip(out.iter_mut()) {
                *o = self.lookup(k).entry.map_or(0, |i| self.rule_id(i));
            }
            return;
        }
        if let Some(f) = &self.fast {
            return f.first_match_ids(self, keys, out);
        }
        self.first_match_ids_image(keys, out)
    }

    /// Node steps of the fast path's walk for `key` (a quad node is one
    /// step for two binary levels); 0 without a fast path.
    pub fn fast_steps(&self, key: &Key) -> usize {
        self.fast.as_ref().map_or(0, |f| f.steps(self, key))
    }

    /// [`Walker::first_match_ids`] reading the image words directly (the
    /// batch form of [`Walker::first_match_image`]); pure images only.
    #[allow(clippy::needless_range_loop)]
    pub fn first_match_ids_image(&self, keys: &[Key], out: &mut [u32]) {
        assert!(
            self.pure,
            "the image batch walk needs a pure first-match image"
        );
        assert_eq!(keys.len(), out.len(), "one output per key");
        const LANES: usize = 16;
        let w = self.image.words();
        for (c, (keys_c, out)) in keys.chunks(LANES).zip(out.chunks_mut(LANES)).enumerate() {
            // Start loading the next chunk's keys while this one walks.
            for k in keys.iter().skip((c + 1) * LANES).take(LANES) {
                prefetch(&k.w[..]);
                prefetch(&k.w[16..]);
            }
            let keys = keys_c;
            let n = keys.len();
            let mut best = [u32::MAX; LANES];
            for p in 0..self.roots.len() {
                let mut refs = [self.roots[p]; LANES];
                // Lanes that already beat this partition's rules skip it.
                for l in 0..n {
                    if self.min_entry[p] >= best[l] {
                        refs[l] = image::LEAF_BIT | u32::MAX >> 1;
                    }
                }
                // Step every lane that is still at a node; stop when all
                // have reached leaves.
                loop {
                    let mut active = false;
                    for l in 0..n {
                        let r = refs[l];
                        if r & image::LEAF_BIT == 0 {
                            refs[l] = self.step(w, r, &keys[l]);
                            active = true;
                        }
                    }
                    if !active {
                        break;
                    }
                }
                // Every lane's first candidates are likely cache misses
                // (records are most of the image): request them all before
                // checking any, so the misses overlap.
                for l in 0..n {
                    if refs[l] == image::LEAF_BIT | u32::MAX >> 1 {
                        continue;
                    }
                    let leaf = self.leaves_off + (refs[l] & !image::LEAF_BIT) as usize;
                    let count = w[leaf] as usize;
                    for &i in w[leaf + 1..leaf + 1 + count].iter().take(2) {
                        prefetch(&w[self.record(w, i)..]);
                    }
                }
                for l in 0..n {
                    if refs[l] == image::LEAF_BIT | u32::MAX >> 1 {
                        continue;
                    }
                    let leaf = self.leaves_off + (refs[l] & !image::LEAF_BIT) as usize;
                    let count = w[leaf] as usize;
                    for &i in &w[leaf + 1..leaf + 1 + count] {
                        if i >= best[l] {
                            break;
                        }
                        if self.matches(w, self.record(w, i), &keys[l]) {
                            best[l] = i;
                            break;
                        }
                    }
                }
            }
            for l in 0..n {
                out[l] = if best[l] == u32::MAX {
                    0
                } else {
                    self.rule_id(best[l])
                };
            }
        }
    }
}
