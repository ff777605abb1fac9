//! An index over the bounding boxes of a decision list's entries: which
//! entries' boxes meet a given box, in list order.
//!
//! A region walk only needs the entries whose box meets the walked
//! region's (every packet it carries lies in the box it started with), so
//! instead of scanning every earlier entry of the list per walk — quadratic
//! over a whole list — it asks this index. Per dimension, each entry's side
//! `[lo, hi]` is filed under the smallest aligned power-of-two block that
//! holds it (its *level* `L` and block number `lo >> L`; a prefix is its own
//! block), and each level keeps its (block, entry) pairs sorted. The
//! entries whose side may meet `[qlo, qhi]` at level `L` are then one
//! contiguous run, blocks `qlo >> L ..= qhi >> L`, found by binary search.
//!
//! **Groups by key field.** A field where an entry is a wildcard files it
//! in the one block every query meets: in ClassBench fw1, 59 % of the rules
//! have any source and 25 % any destination (never both), so whichever
//! single field a query picks, a quarter of the list or more answers it —
//! a point lookup over 100,000 rules filtered 25,000 boxes. So each entry
//! belongs to one *group*, that of its key field: the field where the
//! fewest entries' sides meet its own block (counted when the index is
//! built, two binary searches per field). Each group is indexed on every
//! field; a query asks every group separately, on the field that group
//! answers with the fewest entries (its key field first: for a point, that
//! run is nearly always a handful), and enumerates only those. A source-
//! wildcard rule then sits in the destination group, where a query asks
//! by destination, and no field's wildcards reach every query.
//!
//! The answer is exact: the same entries, in the same order, as a scan
//! with the same box test.

/// One level of one dimension: the entries whose side fits a block of
/// `2^shift` values, as (block number, entry), sorted.
struct Level {
    shift: u32,
    keys: Vec<(u128, u32)>,
    /// One bit per hash of a block number, set for the blocks `keys`
    /// holds (about 8 bits per key): a query within one block whose bit is
    /// clear has an empty run without the binary searches. Nearly nine in
    /// ten runs a `diff` of fw1_10k with mixed verdicts asked for were
    /// empty, most of them of one block (benchmarks.md §70).
    present: Vec<u64>,
}

/// The bit of `block` in a [`Level`]'s `present` of `2^bits` bits.
fn block_bit(block: u128, bits: u32) -> usize {
    let h = (block as u64 ^ (block >> 64) as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (h >> (64 - bits)) as usize
}

impl Level {
    fn new(shift: u32, mut keys: Vec<(u128, u32)>) -> Self {
        keys.sort_unstable();
        let bits = (keys.len() * 8)
            .next_power_of_two()
            .clamp(64, 1 << 24)
            .trailing_zeros();
        let mut present = vec![0u64; 1 << (bits - 6)];
        for &(block, _) in &keys {
            let b = block_bit(block, bits);
            present[b / 64] |= 1 << (b % 64);
        }
        Level {
            shift,
            keys,
            present,
        }
    }

    /// False when no key lies in block `block` (true: it may).
    fn may_hold(&self, block: u128) -> bool {
        let bits = (self.present.len() * 64).trailing_zeros();
        let b = block_bit(block, bits);
        self.present[b / 64] & (1 << (b % 64)) != 0
    }

    /// The index range of `keys` whose block may meet `[lo, hi]`, cut to
    /// entries `from..to` in the first and last block: keys sort by
    /// (block, entry), so for a query within one block (a point, a narrow
    /// box) the run holds only entries of `from..to` — a search standing
    /// at entry 90,000 does not look at the 90,000 before it.
    fn run(&self, lo: u128, hi: u128, from: usize, to: usize) -> std::ops::Range<usize> {
        let (blo, bhi) = (shr(lo, self.shift), shr(hi, self.shift));
        if blo == bhi && !self.may_hold(blo) {
            return 0..0;
        }
        let (from, to) = (from as u32, to.min(u32::MAX as usize) as u32);
        let start = self.keys.partition_point(|k| (k.0, k.1) < (blo, from));
        let end = start + self.keys[start..].partition_point(|k| (k.0, k.1) < (bhi, to));
        start..end
    }
}

fn shr(x: u128, s: u32) -> u128 {
    x.checked_shr(s).unwrap_or(0)
}

/// The level of a side: the bit length of the block that holds it.
fn level_of(lo: u128, hi: u128) -> u32 {
    128 - (lo ^ hi).leading_zeros()
}

/// The aligned block of `2^shift` values holding `lo`.
fn block_of(lo: u128, shift: u32) -> (u128, u128) {
    let mask = 1u128.checked_shl(shift).map_or(u128::MAX, |b| b - 1);
    (lo & !mask, lo | mask)
}

/// Runs of one field's levels: (level, range of its keys).
type Runs = Vec<(usize, std::ops::Range<usize>)>;

/// The entries of one key field, indexed on every field.
struct Group {
    /// Its entries, ascending.
    members: Vec<u32>,
    /// The field its entries were filed under.
    key: usize,
    /// Per dimension, its non-empty levels.
    levels: Vec<Vec<Level>>,
}

impl Group {
    fn new(members: Vec<u32>, key: usize, hulls: &[(u128, u128)], dims: usize) -> Self {
        let levels = (0..dims)
            .map(|d| {
                let mut by_level: Vec<Vec<(u128, u32)>> = vec![Vec::new(); 129];
                for &e in &members {
                    let (lo, hi) = hulls[e as usize * dims + d];
                    let shift = level_of(lo, hi);
                    by_level[shift as usize].push((shr(lo, shift), e));
                }
                by_level
                    .into_iter()
                    .enumerate()
                    .filter(|(_, keys)| !keys.is_empty())
                    .map(|(shift, keys)| Level::new(shift as u32, keys))
                    .collect()
            })
            .collect();
        Group {
            members,
            key,
            levels,
        }
    }

    /// How many of the group's (block, entry) keys in `from..to` dimension
    /// `dim` enumerates for `[lo, hi]`, or any number `>= bound` once it
    /// is clear there are at least that many (the levels left are not
    /// searched: another field already answers with fewer). Coarse levels
    /// first: the wildcards, the longest runs, are there. The runs found
    /// are left in `runs` (level, key range), so that the field that wins
    /// is enumerated without its binary searches again (they were half of
    /// a point lookup's cost, benchmarks.md §66).
    fn count(
        &self,
        dim: usize,
        (lo, hi): (u128, u128),
        (from, to): (usize, usize),
        bound: usize,
        runs: &mut Runs,
    ) -> usize {
        runs.clear();
        let mut sum = 0;
        for (at, l) in self.levels[dim].iter().enumerate().rev() {
            let run = l.run(lo, hi, from, to);
            sum += run.len();
            runs.push((at, run));
            if sum >= bound {
                break;
            }
        }
        sum
    }

    /// Appends the group's entries in `from..to` whose box meets `query`
    /// (unordered) to `out`.
    fn meeting_into(
        &self,
        meets: &dyn Fn(usize) -> bool,
        query: &[(u128, u128)],
        from: usize,
        to: usize,
        out: &mut Vec<usize>,
        scratch: (&mut Runs, &mut Runs),
    ) {
        // A run this short is cheaper to filter than counting the others.
        const SHORT: usize = 32;
        let (best_runs, runs) = scratch;
        let mut best = (
            self.count(self.key, query[self.key], (from, to), usize::MAX, best_runs),
            self.key,
        );
        if best.0 > SHORT {
            for dim in (0..self.levels.len()).filter(|&d| d != self.key) {
                let count = self.count(dim, query[dim], (from, to), best.0, runs);
                if count < best.0 {
                    // Counted below the bound: every level's run is there.
                    best = (count, dim);
                    std::mem::swap(best_runs, runs);
                }
            }
        }
        let lo = self.members.partition_point(|&e| (e as usize) < from);
        let hi = self.members.partition_point(|&e| (e as usize) < to);
        let (count, dim) = best;
        if count < (hi - lo) / 2 {
            let levels = &self.levels[dim];
            out.extend(
                best_runs
                    .iter()
                    .flat_map(|(at, run)| {
                        levels[*at].keys[run.clone()].iter().map(|k| k.1 as usize)
                    })
                    .filter(|&e| (from..to).contains(&e) && meets(e)),
            );
        } else {
            out.extend(
                self.members[lo..hi]
                    .iter()
                    .map(|&e| e as usize)
                    .filter(|&e| meets(e)),
            );
        }
    }
}

/// A stretch of entries shorter than this is cheaper to scan than to
/// count: a query binary-searches every level of a field in every group
/// (`diff`'s same-decider check walks ask an index of the changed entries
/// only, a few hundred, for every piece; benchmarks.md §66).
pub const SCAN_BELOW: usize = 128;

/// See the module documentation.
pub struct HullIndex {
    dims: usize,
    groups: Vec<Group>,
}

/// True when two boxes (one `(lo, hi)` per dimension) share a point.
pub fn hulls_meet(a: &[(u128, u128)], b: &[(u128, u128)]) -> bool {
    a.iter().zip(b).all(|(x, y)| x.0.max(y.0) <= x.1.min(y.1))
}

impl HullIndex {
    /// Indexes `hulls`: `dims` sides per entry, entry after entry. Entries
    /// with an empty side (`lo > hi`) meet nothing and are left out.
    pub fn new(hulls: &[(u128, u128)], dims: usize) -> Self {
        let n = hulls.len().checked_div(dims).unwrap_or(0);
        let valid: Vec<u32> = (0..n)
            .filter(|&e| {
                hulls[e * dims..(e + 1) * dims]
                    .iter()
                    .all(|&(lo, hi)| lo <= hi)
            })
            .map(|e| e as u32)
            .collect();
        // Per field, the sides' ends sorted: how many sides meet a block
        // is all of them but those ending below it and those starting above.
        let ends: Vec<(Vec<u128>, Vec<u128>)> = (0..dims)
            .map(|d| {
                let side = |e: u32| hulls[e as usize * dims + d];
                let mut los: Vec<u128> = valid.iter().map(|&e| side(e).0).collect();
                let mut his: Vec<u128> = valid.iter().map(|&e| side(e).1).collect();
                los.sort_unstable();
                his.sort_unstable();
                (los, his)
            })
            .collect();
        let mut members: Vec<Vec<u32>> = vec![Vec::new(); dims];
        for &e in &valid {
            let key = (0..dims)
                .min_by_key(|&d| {
                    let (lo, hi) = hulls[e as usize * dims + d];
                    let (blo, bhi) = block_of(lo, level_of(lo, hi));
                    let (los, his) = &ends[d];
                    let below = his.partition_point(|&h| h < blo);
                    let above = los.len() - los.partition_point(|&l| l <= bhi);
                    los.len() - below - above
                })
                .unwrap_or(0);
            members[key].push(e);
        }
        let groups = members
            .into_iter()
            .enumerate()
            .filter(|(_, m)| !m.is_empty())
            .map(|(key, m)| Group::new(m, key, hulls, dims))
            .collect();
        HullIndex { dims, groups }
    }

    /// The entries in `from..to` whose box meets `query`, ascending.
    /// `hulls` must be the boxes the index was built from.
    pub fn meeting(
        &self,
        hulls: &[(u128, u128)],
        query: &[(u128, u128)],
        from: usize,
        to: usize,
    ) -> Vec<usize> {
        // An entry with an empty side meets no box, as the index leaves it
        // out.
        let to = to.min(hulls.len().checked_div(self.dims).unwrap_or(0));
        if to.saturating_sub(from) < SCAN_BELOW {
            let d = self.dims;
            if query.iter().any(|&(lo, hi)| lo > hi) {
                return Vec::new();
            }
            return (from..to)
                .filter(|&e| hulls_meet(query, &hulls[e * d..(e + 1) * d]))
                .collect();
        }
        self.meeting_indexed(hulls, query, from, to)
    }

    /// [`HullIndex::meeting`] by the index, whatever the stretch.
    fn meeting_indexed(
        &self,
        hulls: &[(u128, u128)],
        query: &[(u128, u128)],
        from: usize,
        to: usize,
    ) -> Vec<usize> {
        let d = self.dims;
        let meets = |e: usize| hulls_meet(query, &hulls[e * d..(e + 1) * d]);
        if query.iter().any(|&(lo, hi)| lo > hi) || from >= to {
            return Vec::new();
        }
        let mut out = Vec::new();
        // The best field's runs and the runs of the field being counted,
        // one pair of buffers for every group.
        let (mut best_runs, mut runs) = (Vec::new(), Vec::new());
        for g in &self.groups {
            g.meeting_into(
                &meets,
                query,
                from,
                to,
                &mut out,
                (&mut best_runs, &mut runs),
            );
        }

        out.sort_unstable();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn side() -> impl Strategy<Value = (u128, u128)> {
        prop_oneof![
            // prefixes of an 8-bit field
            (0u128..256, 0u32..=8).prop_map(|(v, len)| {
                let size = 1u128 << (8 - len);
                let lo = v & !(size - 1);
                (lo, lo + size - 1)
            }),
            // any range, and the occasional empty side
            (0u128..256, 0u128..256).prop_map(|(a, b)| (a.min(b), a.max(b))),
            Just((1u128, 0u128)),
            Just((0u128, u128::MAX)),
        ]
    }

    proptest! {
        /// The index answers exactly what a scan answers.
        #[test]
        fn meeting_equals_a_scan(
            hulls in prop::collection::vec(side(), 3 * 60),
            query in prop::collection::vec(side(), 3),
            from in 0usize..70,
            to in 0usize..70,
        ) {
            let index = HullIndex::new(&hulls, 3);
            let n = hulls.len() / 3;
            let want: Vec<usize> = (from..to.min(n))
                .filter(|&e| {
                    query.iter().all(|&(lo, hi)| lo <= hi)
                        && hulls_meet(&query, &hulls[e * 3..e * 3 + 3])
                })
                .collect();
            prop_assert_eq!(index.meeting(&hulls, &query, from, to.min(n)), want.clone());
            // The index itself, on a stretch `meeting` would scan.
            prop_assert_eq!(index.meeting_indexed(&hulls, &query, from, to.min(n)), want);
        }
    }
}
