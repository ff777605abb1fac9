//! Sorted sets of closed intervals: the one shape every match lowers to.
//!
//! A prefix is one interval, `--dport 1000:2000` is one, `multiport 22,80,443`
//! is three, `! -s 10.0.0.0/8` is two. Keeping the set normalized (sorted,
//! disjoint, never adjacent) makes equality structural, so two rulesets that
//! mean the same thing compare equal after a round trip through any format.

use serde::{Deserialize, Serialize};
use smallvec::SmallVec;

/// A set's ranges: one inline, more on the heap. Nearly every side of a
/// region's cube is one range, and region arithmetic builds and clones
/// millions of them; a heap block per set was a quarter of `diff`'s CPU on
/// fw1_10k with mixed verdicts (allocation and freeing, benchmarks.md §66).
type Ranges = SmallVec<[(u128, u128); 1]>;

/// A normalized set of closed intervals `[lo, hi]` over `u128`.
///
/// ```
/// use parapet_model::IntervalSet;
/// let ports = IntervalSet::from_ranges([(80, 80), (22, 22), (23, 30)]);
/// assert_eq!(ports.ranges(), &[(22, 30), (80, 80)]);
/// assert!(ports.contains(25) && !ports.contains(31));
/// ```
#[derive(Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct IntervalSet {
    ranges: Ranges,
}

impl Clone for IntervalSet {
    /// A copy of the ranges (the derived clone went range by range).
    fn clone(&self) -> Self {
        IntervalSet {
            ranges: Ranges::from_slice(&self.ranges),
        }
    }
}

impl IntervalSet {
    /// The set containing nothing.
    pub fn empty() -> Self {
        IntervalSet {
            ranges: Ranges::new(),
        }
    }

    /// Every value from 0 to `max` inclusive.
    pub fn full(max: u128) -> Self {
        IntervalSet::range(0, max)
    }

    /// A single value.
    pub fn point(v: u128) -> Self {
        IntervalSet::range(v, v)
    }

    /// The closed interval `[lo, hi]`; empty when `lo > hi`.
    pub fn range(lo: u128, hi: u128) -> Self {
        if lo > hi {
            return IntervalSet::empty();
        }
        IntervalSet {
            ranges: smallvec::smallvec![(lo, hi)],
        }
    }

    /// The values of a `width`-bit field whose top `len` bits equal `value`'s.
    ///
    /// Bits of `value` below the prefix are ignored, as iptables does for
    /// `-s 10.1.2.3/8`.
    pub fn prefix(value: u128, len: u32, width: u32) -> Self {
        debug_assert!(len <= width && width <= 128);
        let (lo, hi) = prefix_range(value, len, width);
        IntervalSet::range(lo, hi)
    }

    /// Builds a normalized set from intervals in any order, overlapping or not.
    /// Intervals with `lo > hi` are ignored.
    pub fn from_ranges<I: IntoIterator<Item = (u128, u128)>>(iter: I) -> Self {
        let mut ranges: Vec<(u128, u128)> = iter.into_iter().filter(|(lo, hi)| lo <= hi).collect();
        ranges.sort_unstable();
        let mut out = Ranges::with_capacity(ranges.len());
        for (lo, hi) in ranges {
            match out.last_mut() {
                // Merge when overlapping or adjacent; `last.1 + 1` cannot
                // overflow once we know last.1 < lo.
                Some(last) if lo <= last.1 || lo == last.1 + 1 => last.1 = last.1.max(hi),
                _ => out.push((lo, hi)),
            }
        }
        IntervalSet { ranges: out }
    }

    /// The intervals, sorted, disjoint and non-adjacent.
    pub fn ranges(&self) -> &[(u128, u128)] {
        &self.ranges
    }

    /// The heap bytes the set holds (none when its ranges fit inline).
    pub fn heap_bytes(&self) -> usize {
        if self.ranges.spilled() {
            self.ranges.capacity() * std::mem::size_of::<(u128, u128)>()
        } else {
            0
        }
    }

    /// True when the set holds no value.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// True when the set is exactly `[0, max]`.
    pub fn is_full(&self, max: u128) -> bool {
        self.ranges[..] == [(0, max)]
    }

    /// Membership test, O(log n) in the number of intervals.
    pub fn contains(&self, v: u128) -> bool {
        // Most sets hold one to three intervals; a scan beats the branchy
        // binary search there.
        if self.ranges.len() <= 4 {
            return self.ranges.iter().any(|&(lo, hi)| lo <= v && v <= hi);
        }
        let i = self.ranges.partition_point(|&(_, hi)| hi < v);
        i < self.ranges.len() && self.ranges[i].0 <= v
    }

    /// Values in both sets.
    pub fn intersect(&self, other: &IntervalSet) -> IntervalSet {
        let (a, b) = (&self.ranges, &other.ranges);
        let (mut i, mut j) = (0, 0);
        let mut out = Ranges::new();
        while i < a.len() && j < b.len() {
            let lo = a[i].0.max(b[j].0);
            let hi = a[i].1.min(b[j].1);
            if lo <= hi {
                out.push((lo, hi));
            }
            if a[i].1 < b[j].1 {
                i += 1;
            } else {
                j += 1;
            }
        }
        // Pieces of two normalized sets are already normalized: two in a
        // row lie in different ranges of one of the sets, with that set's
        // gap (at least one value) between them. Normalizing them again
        // (two more vectors and a sort) was a tenth of `diff`'s CPU on
        // fw1_10k with mixed verdicts (benchmarks.md §66); only sets built
        // unnormalized (deserialized ones) still need it.
        if is_normal(&out) {
            IntervalSet { ranges: out }
        } else {
            IntervalSet::from_ranges(out)
        }
    }

    /// Values in either set.
    pub fn union(&self, other: &IntervalSet) -> IntervalSet {
        IntervalSet::from_ranges(self.ranges.iter().chain(other.ranges.iter()).copied())
    }

    /// Values in `[0, max]` not in the set.
    pub fn complement(&self, max: u128) -> IntervalSet {
        let mut out = Ranges::new();
        let mut next: Option<u128> = Some(0);
        for &(lo, hi) in &self.ranges {
            if lo > max {
                break;
            }
            if let Some(n) = next {
                if lo > n {
                    out.push((n, lo - 1));
                }
            }
            next = hi.checked_add(1);
        }
        if let Some(n) = next {
            if n <= max {
                out.push((n, max));
            }
        }
        IntervalSet { ranges: out }
    }

    /// True when the sets share a value; allocation-free, for the hot loops
    /// of region arithmetic.
    pub fn overlaps(&self, other: &IntervalSet) -> bool {
        let (a, b) = (&self.ranges, &other.ranges);
        // A piece cut by many rules in one field has hundreds of ranges
        // there, and meets rules of one range: a binary search per range
        // of the short set, not a walk of the long one (fw1_100k with
        // mixed verdicts, benchmarks.md §66).
        let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
        if long.len() > 8 * short.len() {
            return short.iter().any(|&(lo, hi)| {
                let i = long.partition_point(|r| r.1 < lo);
                i < long.len() && long[i].0 <= hi
            });
        }
        let (mut i, mut j) = (0, 0);
        while i < a.len() && j < b.len() {
            if a[i].0.max(b[j].0) <= a[i].1.min(b[j].1) {
                return true;
            }
            if a[i].1 < b[j].1 {
                i += 1;
            } else {
                j += 1;
            }
        }
        false
    }

    /// Values in `self` and not in `other`.
    pub fn difference(&self, other: &IntervalSet) -> IntervalSet {
        if !is_normal(&self.ranges) || !is_normal(&other.ranges) {
            return self.intersect(&other.complement(u128::MAX));
        }
        // One sweep of both lists, no complement built: each range of
        // `self` less the ranges of `other` that meet it. The pieces are
        // normalized (a range of `other`, or a gap of `self`, lies between
        // two in a row).
        let b = &other.ranges;
        let mut out = Ranges::new();
        let mut j = 0;
        for &(lo, hi) in &self.ranges {
            while j < b.len() && b[j].1 < lo {
                j += 1;
            }
            // The first value of [lo, hi] not yet passed; None past u128::MAX.
            let mut next = Some(lo);
            for &(blo, bhi) in b[j..].iter().take_while(|r| r.0 <= hi) {
                let Some(n) = next else { break };
                if blo > n {
                    out.push((n, blo - 1));
                }
                // Past this range of `other` (which ends at or after `n`).
                next = bhi.checked_add(1);
            }
            if let Some(n) = next.filter(|&n| n <= hi) {
                out.push((n, hi));
            }
        }
        debug_assert!(is_normal(&out));
        IntervalSet { ranges: out }
    }

    /// True when every value of `self` is in `other`.
    pub fn is_subset(&self, other: &IntervalSet) -> bool {
        // Each range must lie inside one range of `other` (they are sorted
        // and disjoint, and adjacent ones merged); no allocation, as region
        // searches ask this per piece and per candidate rule.
        let mut j = 0;
        self.ranges.iter().all(|&(lo, hi)| {
            while j < other.ranges.len() && other.ranges[j].1 < lo {
                j += 1;
            }
            j < other.ranges.len() && other.ranges[j].0 <= lo && hi <= other.ranges[j].1
        })
    }

    /// The number of values in the set, saturating at `u128::MAX`.
    pub fn cardinality(&self) -> u128 {
        self.ranges.iter().fold(0u128, |acc, &(lo, hi)| {
            acc.saturating_add(hi - lo).saturating_add(1)
        })
    }

    /// Splits each interval into maximal aligned prefixes of a `width`-bit
    /// field: `(value, prefix_len)` pairs, as iptables and tries need them.
    pub fn to_prefixes(&self, width: u32) -> Vec<(u128, u32)> {
        let mut out = Vec::new();
        for &(lo, hi) in &self.ranges {
            range_to_prefixes(lo, hi, width, &mut out);
        }
        out
    }
}

/// True when `ranges` is the normal form: every range non-empty, sorted,
/// disjoint and non-adjacent.
fn is_normal(ranges: &[(u128, u128)]) -> bool {
    ranges.iter().all(|r| r.0 <= r.1)
        && ranges
            .windows(2)
            // `w[0].1 < w[1].0` first: then `w[0].1 + 1` cannot overflow.
            .all(|w| w[0].1 < w[1].0 && w[0].1 + 1 < w[1].0)
}

/// All-ones mask of the low `width` bits.
pub fn width_mask(width: u32) -> u128 {
    if width >= 128 {
        u128::MAX
    } else {
        (1u128 << width) - 1
    }
}

/// The closed range `[lo, hi]` of a `width`-bit field whose top `len` bits
/// equal `value`'s (`len <= width`). Bits of `value` below the prefix are
/// ignored, as iptables does for `-s 10.1.2.3/8`.
pub fn prefix_range(value: u128, len: u32, width: u32) -> (u128, u128) {
    let host_mask = width_mask(width - len);
    let lo = value & !host_mask & width_mask(width);
    (lo, lo | host_mask)
}

/// If `[lo, hi]` is exactly one prefix of a `width`-bit field, its length.
pub fn prefix_len(lo: u128, hi: u128, width: u32) -> Option<u32> {
    if lo > hi {
        return None;
    }
    let span = hi - lo;
    if span == u128::MAX {
        return if width == 128 { Some(0) } else { None };
    }
    let size = span + 1;
    if !size.is_power_of_two() || lo & span != 0 {
        return None;
    }
    let host = size.trailing_zeros();
    if host > width {
        return None;
    }
    Some(width - host)
}

/// Splits the closed range `[lo, hi]` of a `width`-bit field into the
/// minimal list of maximal aligned prefixes `(value, prefix_len)`, appended
/// to `out`.
pub fn range_to_prefixes(mut lo: u128, hi: u128, width: u32, out: &mut Vec<(u128, u32)>) {
    loop {
        // Largest block aligned at `lo` that does not pass `hi`.
        let align = if lo == 0 {
            width
        } else {
            lo.trailing_zeros().min(width)
        };
        let mut size_bits = align;
        while size_bits > 0 {
            let span = if size_bits >= 128 {
                u128::MAX
            } else {
                (1u128 << size_bits) - 1
            };
            if lo.checked_add(span).is_some_and(|end| end <= hi) {
                break;
            }
            size_bits -= 1;
        }
        out.push((lo, width - size_bits));
        let span = if size_bits >= 128 {
            u128::MAX
        } else {
            (1u128 << size_bits) - 1
        };
        match lo.checked_add(span).and_then(|e| e.checked_add(1)) {
            Some(next) if next <= hi => lo = next,
            _ => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn naive(set: &[(u128, u128)], v: u128) -> bool {
        set.iter().any(|&(lo, hi)| lo <= v && v <= hi)
    }

    #[test]
    fn prefix_maths() {
        let mut v = Vec::new();
        range_to_prefixes(1, 6, 8, &mut v);
        assert_eq!(v, vec![(1, 8), (2, 7), (4, 7), (6, 8)]);
        v.clear();
        range_to_prefixes(0, u128::MAX, 128, &mut v);
        assert_eq!(v, vec![(0, 0)]);
        v.clear();
        range_to_prefixes(0, 0xffff, 16, &mut v);
        assert_eq!(v, vec![(0, 0)]);
        assert_eq!(prefix_len(0x0a000000, 0x0affffff, 32), Some(8));
        assert_eq!(prefix_len(0, u32::MAX as u128, 32), Some(0));
        assert_eq!(prefix_len(1, 2, 32), None);
        assert_eq!(prefix_len(0, u128::MAX, 128), Some(0));
        assert_eq!(prefix_range(0x0a01_0203, 8, 32), (0x0a00_0000, 0x0aff_ffff));
        assert_eq!(prefix_range(0, 0, 128), (0, u128::MAX));
        // exhaustive on a small width: the prefixes tile the range exactly
        for lo in 0..64u128 {
            for hi in lo..64 {
                v.clear();
                range_to_prefixes(lo, hi, 6, &mut v);
                let mut next = lo;
                for &(p, len) in &v {
                    assert_eq!(p, next);
                    next = p + (1 << (6 - len));
                }
                assert_eq!(next, hi + 1);
            }
        }
    }

    #[test]
    fn prefix_ignores_host_bits() {
        let s = IntervalSet::prefix(0x0a01_0203, 8, 32);
        assert_eq!(s.ranges(), &[(0x0a00_0000, 0x0aff_ffff)]);
        assert_eq!(IntervalSet::prefix(5, 0, 32).ranges(), &[(0, 0xffff_ffff)]);
        assert_eq!(
            IntervalSet::prefix(u128::MAX, 0, 128).ranges(),
            &[(0, u128::MAX)]
        );
    }

    #[test]
    fn complement_of_prefix_is_two_ranges() {
        let s = IntervalSet::prefix(0x0a00_0000, 8, 32).complement(0xffff_ffff);
        assert_eq!(s.ranges(), &[(0, 0x09ff_ffff), (0x0b00_0000, 0xffff_ffff)]);
        assert!(IntervalSet::full(u128::MAX)
            .complement(u128::MAX)
            .is_empty());
    }

    #[test]
    fn prefixes_cover_exactly() {
        let s = IntervalSet::range(1, 14);
        let p = s.to_prefixes(4);
        assert_eq!(p, vec![(1, 4), (2, 3), (4, 2), (8, 2), (12, 3), (14, 4)]);
        assert_eq!(IntervalSet::full(u128::MAX).to_prefixes(128), vec![(0, 0)]);
    }

    /// Values at both ends of the `u128` range: a range may end at
    /// `u128::MAX`, where `hi + 1` overflows.
    fn edge_value() -> impl Strategy<Value = u128> {
        prop_oneof![0u128..48, (0u128..48).prop_map(|v| u128::MAX - v)]
    }

    /// The intersection as every pair of ranges meets, normalized by
    /// `from_ranges`: the reference the sweeps must equal exactly.
    fn intersect_by_pairs(a: &IntervalSet, b: &IntervalSet) -> IntervalSet {
        IntervalSet::from_ranges(a.ranges().iter().flat_map(|&(alo, ahi)| {
            b.ranges()
                .iter()
                .map(move |&(blo, bhi)| (alo.max(blo), ahi.min(bhi)))
        }))
    }

    proptest! {
        /// `intersect` without normalizing again and `difference` in one
        /// sweep give the very sets (same ranges) the pairwise reference
        /// and the complement give, at both ends of the range.
        #[test]
        fn sweeps_equal_the_references(
            a in prop::collection::vec((edge_value(), edge_value()), 0..6),
            b in prop::collection::vec((edge_value(), edge_value()), 0..6),
        ) {
            let sa = IntervalSet::from_ranges(a);
            let sb = IntervalSet::from_ranges(b);
            prop_assert_eq!(sa.intersect(&sb), intersect_by_pairs(&sa, &sb));
            let by_complement = intersect_by_pairs(&sa, &sb.complement(u128::MAX));
            prop_assert_eq!(sa.difference(&sb), by_complement);
            prop_assert!(is_normal(sa.difference(&sb).ranges()));
        }

        /// `overlaps` of a set of many ranges and one of a few (by binary
        /// search) says what the intersection says.
        #[test]
        fn overlaps_of_a_long_set(
            long in prop::collection::vec(
                (edge_value(), 0u128..2).prop_map(|(v, w)| (v, v.saturating_add(w))),
                0..40,
            ),
            short in prop::collection::vec((edge_value(), edge_value()), 0..3),
        ) {
            let (sl, ss) = (IntervalSet::from_ranges(long), IntervalSet::from_ranges(short));
            let meet = !intersect_by_pairs(&sl, &ss).is_empty();
            prop_assert_eq!(sl.overlaps(&ss), meet);
            prop_assert_eq!(ss.overlaps(&sl), meet);
        }

        #[test]
        fn ops_agree_with_naive(
            a in prop::collection::vec((0u128..64, 0u128..64), 0..6),
            b in prop::collection::vec((0u128..64, 0u128..64), 0..6),
        ) {
            let sa = IntervalSet::from_ranges(a.clone());
            let sb = IntervalSet::from_ranges(b.clone());
            let inter = sa.intersect(&sb);
            let uni = sa.union(&sb);
            let comp = sa.complement(63);
            for v in 0..64u128 {
                prop_assert_eq!(sa.contains(v), naive(&a, v));
                prop_assert_eq!(inter.contains(v), naive(&a, v) && naive(&b, v));
                prop_assert_eq!(uni.contains(v), naive(&a, v) || naive(&b, v));
                prop_assert_eq!(comp.contains(v), !naive(&a, v));
                prop_assert_eq!(sa.difference(&sb).contains(v), naive(&a, v) && !naive(&b, v));
            }
            prop_assert_eq!(sa.overlaps(&sb), !inter.is_empty());
            // Normal form: sorted, disjoint, non-adjacent.
            for w in inter.ranges().windows(2) {
                prop_assert!(w[0].1 + 1 < w[1].0);
            }
            let mut count = 0u128;
            for (value, len) in sa.to_prefixes(6) {
                let p = IntervalSet::prefix(value, len, 6);
                prop_assert!(p.is_subset(&sa));
                count += p.cardinality();
            }
            prop_assert_eq!(count, sa.cardinality());
        }
    }
}
