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
//! A query counts the run lengths in every dimension, enumerates the
//! dimension with the fewest, and filters those by the whole box — so its
//! cost follows the entries that overlap the query in its most selective
//! field. The answer is exact: the same entries, in the same order, as a
//! scan with the same box test.

/// One level of one dimension: the entries whose side fits a block of
/// `2^shift` values, as (block number, entry), sorted.
struct Level {
    shift: u32,
    keys: Vec<(u128, u32)>,
}

impl Level {
    /// The index range of `keys` whose block may meet `[lo, hi]`, cut to
    /// entries `from..to` in the first and last block: keys sort by
    /// (block, entry), so for a query within one block (a point, a narrow
    /// box) the run holds only entries of `from..to` — a search standing
    /// at entry 90,000 does not look at the 90,000 before it.
    fn run(&self, lo: u128, hi: u128, from: usize, to: usize) -> std::ops::Range<usize> {
        let (blo, bhi) = (shr(lo, self.shift), shr(hi, self.shift));
        let (from, to) = (from as u32, to.min(u32::MAX as usize) as u32);
        let start = self.keys.partition_point(|k| (k.0, k.1) < (blo, from));
        let end = start + self.keys[start..].partition_point(|k| (k.0, k.1) < (bhi, to));
        start..end
    }
}

fn shr(x: u128, s: u32) -> u128 {
    x.checked_shr(s).unwrap_or(0)
}

/// See the module documentation.
pub struct HullIndex {
    dims: usize,
    /// Per dimension, its non-empty levels.
    levels: Vec<Vec<Level>>,
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
        let mut levels = Vec::with_capacity(dims);
        for d in 0..dims {
            let mut by_level: Vec<Vec<(u128, u32)>> = vec![Vec::new(); 129];
            for e in 0..n {
                let h = &hulls[e * dims..(e + 1) * dims];
                if h.iter().any(|&(lo, hi)| lo > hi) {
                    continue;
                }
                let (lo, hi) = h[d];
                let shift = 128 - (lo ^ hi).leading_zeros();
                by_level[shift as usize].push((shr(lo, shift), e as u32));
            }
            levels.push(
                by_level
                    .into_iter()
                    .enumerate()
                    .filter(|(_, keys)| !keys.is_empty())
                    .map(|(shift, mut keys)| {
                        keys.sort_unstable();
                        Level {
                            shift: shift as u32,
                            keys,
                        }
                    })
                    .collect(),
            );
        }
        HullIndex { dims, levels }
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
        let d = self.dims;
        let meets = |e: usize| hulls_meet(query, &hulls[e * d..(e + 1) * d]);
        if query.iter().any(|&(lo, hi)| lo > hi) || from >= to {
            return Vec::new();
        }
        // The most selective dimension; a scan when none beats it.
        let mut best: Option<(usize, usize)> = None;
        for (dim, levels) in self.levels.iter().enumerate() {
            let (lo, hi) = query[dim];
            let count: usize = levels.iter().map(|l| l.run(lo, hi, from, to).len()).sum();
            if best.is_none_or(|(c, _)| count < c) {
                best = Some((count, dim));
            }
        }
        match best {
            Some((count, dim)) if count < (to - from) / 2 => {
                let (lo, hi) = query[dim];
                let mut out: Vec<usize> = self.levels[dim]
                    .iter()
                    .flat_map(|l| l.keys[l.run(lo, hi, from, to)].iter().map(|k| k.1 as usize))
                    .filter(|&e| (from..to).contains(&e) && meets(e))
                    .collect();
                out.sort_unstable();
                out
            }
            _ => (from..to).filter(|&e| meets(e)).collect(),
        }
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
            prop_assert_eq!(index.meeting(&hulls, &query, from, to.min(n)), want);
        }
    }
}
