//! Setting the packet mark: iptables' `-j MARK`, nft's `meta mark set`.
//!
//! The kernel's MARK target (xt_mark.c, `mark_tg`) computes
//! `mark = (mark & ~mask) ^ value` and goes on to the next rule; every
//! other form reduces to it (iptables-save writes them all as
//! `--set-xmark VALUE/MASK`), and so do nft's `meta mark set V` and
//! `meta mark set mark and A xor B` / `or B` (nft_bitwise: `(mark & A) ^ B`).
//! Two of them in a row are one again ([`MarkSet::then`]), so a decision
//! carries one [`MarkSet`]: what to do to the mark the packet came with.
//!
//! Rules after a mark change read the new mark. The classifiers cannot
//! change a field mid-walk, so `flatten.rs` rewrites the rules after one
//! for the packets it changed: [`MarkSet::preimage`] turns "the new mark is
//! in S" into "the old mark is in S'", exactly.

use crate::interval::{range_to_prefixes, IntervalSet};
use crate::masked::MaskedMatch;
use serde::{Deserialize, Serialize};

/// `mark = (mark & !mask) ^ value`.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MarkSet {
    /// The bits cleared before the xor.
    pub mask: u32,
    /// The bits xored in.
    pub value: u32,
}

/// The most intervals a rewritten mark constraint may have; a mark match
/// whose rewrite would need more is refused ([`MarkSet::preimage`]).
pub const MAX_PREIMAGE_INTERVALS: usize = 4096;

impl MarkSet {
    /// `--set-xmark V/M`: `(mark & ~M) ^ V`.
    pub fn xmark(value: u32, mask: u32) -> Self {
        MarkSet { mask, value }
    }

    /// `--set-mark V/M` (M 0xffffffff when not given): the masked bits
    /// become V's, as libxt_MARK stores it (mask `M | V`, value V).
    pub fn set(value: u32, mask: u32) -> Self {
        MarkSet {
            mask: mask | value,
            value,
        }
    }

    /// `--and-mark V`: `mark & V`.
    pub fn and(value: u32) -> Self {
        MarkSet {
            mask: !value,
            value: 0,
        }
    }

    /// `--or-mark V`: `mark | V`.
    pub fn or(value: u32) -> Self {
        MarkSet { mask: value, value }
    }

    /// `--xor-mark V`: `mark ^ V`.
    pub fn xor(value: u32) -> Self {
        MarkSet { mask: 0, value }
    }

    /// The new mark of a packet whose mark was `old`.
    pub fn apply(self, old: u32) -> u32 {
        (old & !self.mask) ^ self.value
    }

    /// `self` and then `next`, as one change.
    pub fn then(self, next: MarkSet) -> MarkSet {
        // ((m & ~a) ^ b) & ~c ^ d = (m & ~(a|c)) ^ ((b & ~c) ^ d)
        MarkSet {
            mask: self.mask | next.mask,
            value: (self.value & !next.mask) ^ next.value,
        }
    }

    /// True when it changes no mark.
    pub fn is_identity(self) -> bool {
        self.mask == 0 && self.value == 0
    }

    /// The old marks whose new mark is in `new`, or `None` when more than
    /// [`MAX_PREIMAGE_INTERVALS`] intervals would say it.
    ///
    /// The new mark's bits in `mask` are `value`'s; the others are the
    /// old bits xored with `value`'s. So a prefix block of new marks (its
    /// top bits fixed) comes from the old marks whose fixed bits outside
    /// `mask` equal the block's xor `value` — or from none, when a fixed
    /// bit inside `mask` is not `value`'s.
    pub fn preimage(self, new: &IntervalSet) -> Option<IntervalSet> {
        let mut out: Vec<(u128, u128)> = Vec::new();
        for (care, want) in self.preimage_patterns(new) {
            pattern_ranges(care, want, &mut out)?;
            if out.len() > MAX_PREIMAGE_INTERVALS {
                return None;
            }
        }
        let set = IntervalSet::from_ranges(out);
        (set.ranges().len() <= MAX_PREIMAGE_INTERVALS).then_some(set)
    }

    /// The old marks whose new mark is in `new`, as disjoint patterns
    /// `(care, want)`: the marks `m` with `m & care == want`.
    pub(crate) fn preimage_patterns(self, new: &IntervalSet) -> Vec<(u32, u32)> {
        let mut prefixes = Vec::new();
        for &(lo, hi) in new.ranges() {
            range_to_prefixes(lo, hi, 32, &mut prefixes);
        }
        let mut out = Vec::new();
        for (p, len) in prefixes {
            let fixed = if len == 0 { 0 } else { u32::MAX << (32 - len) };
            let p = p as u32;
            if (p ^ self.value) & fixed & self.mask != 0 {
                continue;
            }
            let care = fixed & !self.mask;
            out.push((care, (p ^ self.value) & care));
        }
        out
    }

    /// The old marks for which `m` (a comparison on the new mark) holds.
    pub fn preimage_masked(self, m: &MaskedMatch) -> MaskedPreimage {
        let (cmp, want) = (m.mask as u32, m.value as u32);
        // bits compared inside our mask are constants: equal or not
        let constant_ok =
            (want ^ self.value) & cmp & self.mask == 0 && m.value >> 32 == 0 && want & !cmp == 0;
        let rest = cmp & !self.mask;
        let eq = MaskedMatch {
            field: m.field,
            mask: rest as u128,
            value: ((want ^ self.value) & rest) as u128,
            negate: false,
        };
        match (m.negate, constant_ok, rest == 0) {
            // `==` that the constant bits already fail: nothing; `!=`: all
            (false, false, _) => MaskedPreimage::Nothing,
            (true, false, _) => MaskedPreimage::Every,
            // only constant bits compared, and they agree
            (false, true, true) => MaskedPreimage::Every,
            (true, true, true) => MaskedPreimage::Nothing,
            (negate, true, false) => MaskedPreimage::Only(MaskedMatch { negate, ..eq }),
        }
    }
}

/// The old marks a comparison on the new mark holds for
/// ([`MarkSet::preimage_masked`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MaskedPreimage {
    /// Every old mark.
    Every,
    /// No old mark.
    Nothing,
    /// Those this comparison holds for.
    Only(MaskedMatch),
}

/// The 32-bit values `v` with `v & care == want`, as intervals appended to
/// `out`: the free bits below the lowest cared-for bit make each interval,
/// every combination of the free bits above it one more. `None` when that
/// is more than [`MAX_PREIMAGE_INTERVALS`].
fn pattern_ranges(care: u32, want: u32, out: &mut Vec<(u128, u128)>) -> Option<()> {
    if care == 0 {
        out.push((0, u32::MAX as u128));
        return Some(());
    }
    let low_free = care.trailing_zeros();
    let span = (1u64 << low_free) - 1;
    // free bits above the lowest cared-for one (which is bit `low_free`)
    let high_free = !care & !((1u32 << low_free) - 1);
    let n = high_free.count_ones();
    if n > 12 || out.len() + (1usize << n) > MAX_PREIMAGE_INTERVALS {
        return None;
    }
    // enumerate the subsets of high_free
    let mut sub: u32 = 0;
    loop {
        let lo = (want | sub) as u64;
        out.push((lo as u128, (lo + span) as u128));
        if sub == high_free {
            break;
        }
        sub = sub.wrapping_sub(high_free) & high_free;
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::field::Field;

    #[test]
    fn the_iptables_forms_reduce_to_xmark() {
        let m = 0x1234_5678;
        assert_eq!(MarkSet::set(0x40, 0xff).apply(m), (m & !0xff) | 0x40);
        assert_eq!(MarkSet::set(7, u32::MAX).apply(m), 7);
        assert_eq!(MarkSet::and(0xff00).apply(m), m & 0xff00);
        assert_eq!(MarkSet::or(0x3).apply(m), m | 3);
        assert_eq!(MarkSet::xor(0x5).apply(m), m ^ 5);
        assert_eq!(
            MarkSet::xmark(0x40000, 0xff0000).apply(m),
            (m & !0xff0000) ^ 0x40000
        );
    }

    #[test]
    fn two_changes_compose_into_one() {
        let a = MarkSet::xmark(0x0f0f, 0xff00);
        let b = MarkSet::xmark(0x3003, 0x0ff0);
        for m in [0u32, 1, 0xffff_ffff, 0x1234_5678, 0xdead_beef] {
            assert_eq!(a.then(b).apply(m), b.apply(a.apply(m)));
        }
    }

    /// Every old mark of a small domain: is it in the preimage exactly
    /// when its new mark is in the set?
    fn check_preimage(f: MarkSet, new: IntervalSet) {
        let old = f.preimage(&new).expect("small");
        for m in (0u32..4096).chain([0xff00_0000, 0xffff_ffff, 0x8000_0001]) {
            assert_eq!(
                old.contains(m as u128),
                new.contains(f.apply(m) as u128),
                "mark {m:#x} under {f:?}"
            );
        }
    }

    #[test]
    fn preimages_are_exact() {
        let f = MarkSet::xmark(0x40000 | 0x5, 0xff0000);
        check_preimage(f, IntervalSet::range(0x40000, 0x4ffff));
        check_preimage(MarkSet::xmark(0x20, 0xf0), IntervalSet::range(3, 700));
        check_preimage(MarkSet::set(1, u32::MAX), IntervalSet::point(1));
        check_preimage(MarkSet::set(1, u32::MAX), IntervalSet::point(2));
        check_preimage(MarkSet::xor(0x11), IntervalSet::range(10, 300));
        check_preimage(
            MarkSet::and(0xffff_ff0f),
            IntervalSet::from_ranges([(0, 4), (9, 9)]),
        );
        // `mark & 0xf0f` in {0..4, 9}: the free high bits are 2^20 intervals
        assert_eq!(
            MarkSet::and(0xf0f).preimage(&IntervalSet::from_ranges([(0, 4), (9, 9)])),
            None
        );
    }

    #[test]
    fn masked_comparisons_rewrite_exactly() {
        let f = MarkSet::xmark(0x105, 0x0f0);
        for (mask, value, negate) in [
            (0x1u128, 1u128, false),
            (0xf0, 0, true),
            (0x101, 0x101, false),
            (0x30, 0x10, false),
        ] {
            let m = MaskedMatch {
                field: Field::Mark,
                mask,
                value,
                negate,
            };
            let r = f.preimage_masked(&m);
            for old in 0u32..1024 {
                let want = m.holds(f.apply(old) as u128);
                let got = match &r {
                    MaskedPreimage::Nothing => false,
                    MaskedPreimage::Every => true,
                    MaskedPreimage::Only(x) => x.holds(old as u128),
                };
                assert_eq!(got, want, "{m:?} old {old:#x}");
            }
        }
    }
}
