//! The IPv6 routing header (`-m rt`, `ip6t_rt.c`; nft `rt type|seg-left|
//! hdrlength`, `nft_exthdr.c`): its value in [`crate::Field::Routing`].
//!
//! Both matches read the *first* routing header `ipv6_find_hdr` finds.
//! The field packs it into one number with a presence bit:
//! `1 << 24 | type << 16 | segments_left << 8 | hdrlen`, where `hdrlen`
//! is the header's own length byte (in 8-octet units, not counting the
//! first 8). A packet without a routing header has the value 0, which no
//! constraint built here contains: both kernels' matches fail when there is
//! no header, `!` or `!=` included.
//!
//! A constraint on one part (the type, segments left or the length byte)
//! is the product of its byte set with the other two parts' full ranges;
//! several parts intersect into the product of their sets
//! ([`product`]), and a listing factors a constraint back into its parts
//! ([`factor`]).

use crate::interval::IntervalSet;

/// The presence bit of [`crate::Field::Routing`].
pub const PRESENT: u128 = 1 << 24;

/// The largest value of a part (one byte).
pub const BYTE_MAX: u128 = 0xff;

/// A packet's first routing header, as the field sees it.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct RoutingHeader {
    /// The routing type (0: the deprecated source route, 2: Mobile IPv6,
    /// 4: segment routing).
    pub rt_type: u8,
    /// Segments left.
    pub segments_left: u8,
    /// The header's length byte (`(hdrlen + 1) * 8` bytes long).
    pub hdrlen: u8,
}

/// One part of the routing header a constraint names.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Part {
    /// The routing type (`--rt-type`, `rt type`).
    Type,
    /// Segments left (`--rt-segsleft`, `rt seg-left`).
    SegmentsLeft,
    /// The length byte (`--rt-len` in bytes, `rt hdrlength` the byte).
    HdrLen,
}

impl Part {
    fn shift(self) -> u32 {
        match self {
            Part::Type => 16,
            Part::SegmentsLeft => 8,
            Part::HdrLen => 0,
        }
    }
}

/// The key value of a packet's first routing header (0 without one).
pub fn key_value(h: Option<RoutingHeader>) -> u128 {
    h.map_or(0, |h| {
        PRESENT | (h.rt_type as u128) << 16 | (h.segments_left as u128) << 8 | h.hdrlen as u128
    })
}

/// The header of a key value, `None` for the absent value.
pub fn from_key_value(v: u128) -> Option<RoutingHeader> {
    (v & PRESENT != 0).then_some(RoutingHeader {
        rt_type: (v >> 16) as u8,
        segments_left: (v >> 8) as u8,
        hdrlen: v as u8,
    })
}

/// Every value of a present routing header (`-m rt` without options, nft
/// `exthdr rt exists`).
pub fn present() -> IntervalSet {
    IntervalSet::range(PRESENT, 2 * PRESENT - 1)
}

/// The present headers whose `part` is in `bytes` (a set within
/// `0..=255`).
pub fn values(part: Part, bytes: &IntervalSet) -> IntervalSet {
    let full = IntervalSet::full(BYTE_MAX);
    let mut parts = [full.clone(), full.clone(), full];
    parts[2 - part.shift() as usize / 8] = bytes.intersect(&IntervalSet::full(BYTE_MAX));
    product(&parts[0], &parts[1], &parts[2])
}

/// The present headers whose type is in `types`, segments left in
/// `segs` and length byte in `lens`. A full lower part makes one interval
/// per value (or range) of the part above it, so a constraint on the type
/// alone is one interval per type range; a length byte alone is one
/// interval per type and segments-left pair.
pub fn product(types: &IntervalSet, segs: &IntervalSet, lens: &IntervalSet) -> IntervalSet {
    let full = |s: &IntervalSet| s.is_full(BYTE_MAX);
    let mut out = Vec::new();
    for &(t0, t1) in types.ranges() {
        if full(segs) && full(lens) {
            out.push((PRESENT | t0 << 16, PRESENT | t1 << 16 | 0xffff));
            continue;
        }
        for t in t0..=t1 {
            for &(s0, s1) in segs.ranges() {
                let base = PRESENT | t << 16;
                if full(lens) {
                    out.push((base | s0 << 8, base | s1 << 8 | 0xff));
                    continue;
                }
                for s in s0..=s1 {
                    for &(l0, l1) in lens.ranges() {
                        out.push((base | s << 8 | l0, base | s << 8 | l1));
                    }
                }
            }
        }
    }
    IntervalSet::from_ranges(out)
}

/// The byte values `part` takes over the present values of `v`.
pub fn projection(v: &IntervalSet, part: Part) -> IntervalSet {
    let k = part.shift();
    let mut out = Vec::new();
    for &(lo, hi) in v.intersect(&present()).ranges() {
        // The part of x in [lo, hi] is the low byte of x >> k, and x >> k
        // runs over the contiguous [lo >> k, hi >> k].
        let (a, b) = (lo >> k, hi >> k);
        let (a8, b8) = (a & BYTE_MAX, b & BYTE_MAX);
        if b - a >= BYTE_MAX {
            return IntervalSet::full(BYTE_MAX);
        } else if a8 <= b8 {
            out.push((a8, b8));
        } else {
            out.push((a8, BYTE_MAX));
            out.push((0, b8));
        }
    }
    IntervalSet::from_ranges(out)
}

/// `v` as `[types, segments left, length bytes]` when it is their
/// product (as every constraint the parsers build is), else `None`.
pub fn factor(v: &IntervalSet) -> Option<[IntervalSet; 3]> {
    if !v.is_subset(&present()) {
        return None;
    }
    let parts = [
        projection(v, Part::Type),
        projection(v, Part::SegmentsLeft),
        projection(v, Part::HdrLen),
    ];
    (product(&parts[0], &parts[1], &parts[2]) == *v).then_some(parts)
}

/// The length byte of a header `bytes` long (`--rt-len`, which compares
/// `ipv6_optlen`: `(hdrlen + 1) * 8`), `None` for a length no header has.
pub fn len_byte(bytes: u32) -> Option<u8> {
    (bytes.is_multiple_of(8) && (8..=2048).contains(&bytes)).then(|| (bytes / 8 - 1) as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(t: u8, s: u8, l: u8) -> u128 {
        key_value(Some(RoutingHeader {
            rt_type: t,
            segments_left: s,
            hdrlen: l,
        }))
    }

    #[test]
    fn parts_and_absence() {
        let type0 = values(Part::Type, &IntervalSet::point(0));
        assert_eq!(type0.ranges().len(), 1);
        assert!(type0.contains(h(0, 5, 2)) && !type0.contains(h(2, 5, 2)));
        let not0 = values(Part::Type, &IntervalSet::point(0).complement(BYTE_MAX));
        assert!(not0.contains(h(2, 1, 2)));
        // no routing header: neither the match nor its negation
        assert!(!type0.contains(key_value(None)) && !not0.contains(key_value(None)));
        let segs = values(Part::SegmentsLeft, &IntervalSet::range(1, 3));
        assert_eq!(segs.ranges().len(), 256);
        assert!(segs.contains(h(7, 3, 9)) && !segs.contains(h(7, 4, 0)));
        let len = values(Part::HdrLen, &IntervalSet::point(2));
        assert!(len.contains(h(9, 9, 2)) && !len.contains(h(9, 9, 3)));
        assert_eq!(from_key_value(h(4, 3, 2)).map(|r| r.hdrlen), Some(2));
        assert_eq!(len_byte(24), Some(2));
        assert_eq!(len_byte(20), None);
        assert_eq!(len_byte(0), None);
    }

    #[test]
    fn factor_inverts_product() {
        let t = IntervalSet::point(0).complement(BYTE_MAX);
        let s = IntervalSet::range(2, 5);
        let l = IntervalSet::point(2);
        let v = values(Part::Type, &t)
            .intersect(&values(Part::SegmentsLeft, &s))
            .intersect(&values(Part::HdrLen, &l));
        assert_eq!(v, product(&t, &s, &l));
        assert_eq!(factor(&v), Some([t, s, l]));
        let full = IntervalSet::full(BYTE_MAX);
        assert_eq!(factor(&present()), Some([full.clone(), full.clone(), full]));
        // two headers that are not a product
        let odd = IntervalSet::point(h(0, 1, 2)).union(&IntervalSet::point(h(2, 3, 4)));
        assert_eq!(factor(&odd), None);
        assert_eq!(factor(&IntervalSet::point(0)), None);
    }
}
