//! The Rust walker of the classifier image.
//!
//! It reads the image words directly — the same words the BPF walker reads
//! from its maps — so a difference between the two walkers is a bug in one
//! of them, never a difference of data. Pure first-match lists also get
//! the compact [`crate::FastPath`], a sibling engine built from the same
//! image; [`crate::Classifier`] picks between the two.

use crate::read::{prefetch, record_matches};
use crate::stateful::ImageState;
use parapet_image::{self as image, hw, kind, u128_at, Image, KeyWords};
use parapet_model::{Decision, Verdict};

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
        Walker {
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
        }
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
    fn step(&self, w: &[u32], r: u32, key: &KeyWords) -> u32 {
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
    fn leaf_of(&self, w: &[u32], p: usize, key: &KeyWords) -> usize {
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

    /// First-match lookup: the index of the first matching entry, ignoring
    /// entry kinds. Exact for pure first-match lists (every entry decides).
    /// Reads the image words directly, as the BPF walker does (the fast
    /// path's reference in tests).
    pub fn first_match(&self, key: &KeyWords) -> Option<u32> {
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
                if record_matches(w, self.record(w, i), key) {
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
    pub fn first_match_where(&self, key: &KeyWords, skip: impl Fn(u32) -> bool) -> Option<u32> {
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
                if !skip(i) && record_matches(w, self.record(w, i), key) {
                    best = i;
                    break;
                }
            }
        }
        (best != u32::MAX).then_some(best)
    }

    /// Full lookup with non-terminal entries and RETURNs: the merge scan of
    /// the doc's "General path". Stateful conditions are assumed to match
    /// (the offline assumption); [`Walker::lookup_stateful`] checks them.
    pub fn lookup(&self, key: &KeyWords) -> RawDecision {
        self.lookup_with(key, &mut |_| true)
    }

    /// As [`Walker::lookup`], checking each stateful condition against
    /// `state` (and changing it, as the kernel does) when its entry's
    /// constraints match.
    pub fn lookup_stateful(&self, key: &KeyWords, state: &mut ImageState) -> RawDecision {
        self.lookup_with(key, &mut |row| state.check(&self.image, row, key))
    }

    /// The full decision with stateful conditions checked against `state`.
    pub fn decide_stateful(&self, key: &KeyWords, state: &mut ImageState) -> Decision {
        self.decision(&self.lookup_stateful(key, state))
    }

    /// The merge scan; `check(row)` answers the stateful condition of a
    /// matching entry (its row in the stateful table).
    fn lookup_with(&self, key: &KeyWords, check: &mut dyn FnMut(u32) -> bool) -> RawDecision {
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
            if !record_matches(w, rec, key) {
                continue;
            }
            let k = w[rec + 1];
            // A stateful condition comes last: a failure means no match and
            // the scan goes on to the next candidate.
            if k & kind::STATEFUL_BIT != 0 && !check(k >> kind::STATEFUL_ROW_SHIFT) {
                continue;
            }
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
    pub fn lookup_cost(&self, key: &KeyWords) -> (usize, usize) {
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
                if record_matches(w, self.record(w, i), key) {
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

    /// Fills `key`'s pattern hits from `pkt`'s bytes (its `datagram`)
    /// when the image tests `-m string` patterns: what the BPF walker
    /// finds by searching the packet (`parapet_image::patterns`).
    pub fn fill_patterns(&self, key: &mut KeyWords, pkt: &parapet_model::Packet) {
        if self.image.header(hw::FLAGS) & image::FLAG_PATTERNS != 0 {
            key.set_patterns(image::patterns::hits(
                self.image.words(),
                pkt.datagram.as_deref(),
            ));
        }
    }

    /// The full decision for a key, as `DecisionList::classify` gives it.
    pub fn decide(&self, key: &KeyWords) -> Decision {
        self.decision(&self.lookup(key))
    }

    /// The full decision of a raw lookup answer (rule ids and verdicts of
    /// its entries).
    pub fn decision(&self, raw: &RawDecision) -> Decision {
        Decision {
            rule_id: raw.entry.map_or(0, |i| self.rule_id(i)),
            verdict: raw
                .entry
                .map_or_else(|| self.policy().clone(), |i| self.verdict(i).clone()),
            nonterminal: raw.nonterminal.iter().map(|&i| self.rule_id(i)).collect(),
            // the image carries no mark changes: `Classifier` fills it
            mark: None,
        }
    }

    /// Deciding rule id (0 for the policy) of each key, walking `LANES`
    /// packets in lock-step through each tree so their independent memory
    /// loads overlap (pure first-match images; the others fall back to
    /// [`Walker::lookup`] per key). Reads the image words directly, the
    /// batch form of [`Walker::first_match`].
    // Lanes index several per-lane arrays at once.
    #[allow(clippy::needless_range_loop)]
    pub fn first_match_ids(&self, keys: &[KeyWords], out: &mut [u32]) {
        assert_eq!(keys.len(), out.len(), "one output per key");
        if !self.pure {
            for (k, o) in keys.iter().zip(out.iter_mut()) {
                *o = self.lookup(k).entry.map_or(0, |i| self.rule_id(i));
            }
            return;
        }
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
                        if record_matches(w, self.record(w, i), &keys[l]) {
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
