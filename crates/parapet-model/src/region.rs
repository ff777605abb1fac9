//! Region arithmetic: sets of packets as unions of disjoint boxes.
//!
//! A rule's match is already a product of interval sets, one per field
//! (`Matches`), so the natural exact representation of "the packets that
//! reach rule i" is a union of such products ([`Cube`]s). Subtracting one
//! product from another gives at most one piece per field (peel off, field
//! by field, the part outside the subtrahend), so the pieces stay disjoint
//! and every operation is exact. The number of pieces can grow with the
//! number of overlapping rules; a [`Budget`] bounds it, and an operation
//! that would pass it fails with [`OverBudget`] instead of approximating.
//!
//! Only the fields some rule constrains are dimensions of the [`Space`];
//! a packet's other fields are free, and witnesses take their defaults.
//!
//! The universe is every packet the `--packet` syntax can describe: family
//! 4 or 6, IPv4 addresses below 2^32, conntrack states 0-4, and interface
//! names of up to 15 printable ASCII bytes other than space (or none).
//! Interface sides are kept as plain number intervals; [`Space::witness`]
//! finds a writable name inside them, and a cube without one holds no
//! packet.

use crate::field::{CtState, Family, Field, IfName};
use crate::interval::{width_mask, IntervalSet};
use crate::packet::Packet;
use crate::rule::Matches;

/// The analysed fields, in [`Field`] order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Space {
    dims: Vec<Field>,
}

/// A product of interval sets, one side per dimension of its [`Space`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cube {
    sides: Vec<IntervalSet>,
}

/// A union of pairwise disjoint cubes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Region {
    cubes: Vec<Cube>,
}

/// The most cubes one working region may hold, and when to stop.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Budget {
    /// Bound on the cubes of a region.
    pub max_cubes: usize,
    /// After this instant every operation is over budget: what was not
    /// proven by then is reported as not proven.
    pub deadline: Option<std::time::Instant>,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            max_cubes: 20_000,
            deadline: None,
        }
    }
}

/// An operation needed more cubes than its [`Budget`] allows: its result is
/// not proven either way.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct OverBudget;

/// Printable ASCII other than space: the interface-name bytes a `--packet`
/// string can write.
const NAME_BYTES: std::ops::RangeInclusive<u8> = 0x21..=0x7e;

/// The smallest interface-name value `>= x` that `--packet` can write (the
/// empty name 0 included), if any.
fn next_name(x: u128) -> Option<u128> {
    let b = x.to_be_bytes();
    let mut len = 0;
    while len < 15 && NAME_BYTES.contains(&b[len]) {
        len += 1;
    }
    if b[len..].iter().all(|&c| c == 0) {
        return Some(x);
    }
    let with = |k: usize, byte: u8| {
        let mut y = [0u8; 16];
        y[..k].copy_from_slice(&b[..k]);
        y[k] = byte;
        u128::from_be_bytes(y)
    };
    if len < 15 && b[len] < *NAME_BYTES.start() {
        return Some(with(len, *NAME_BYTES.start()));
    }
    // Too long, or a byte above the range: raise an earlier byte.
    (0..len)
        .rev()
        .find(|&k| b[k] < *NAME_BYTES.end())
        .map(|k| with(k, b[k] + 1))
}

/// The smallest value of `side` a packet can carry in `field`.
fn first_value(field: Field, side: &IntervalSet) -> Option<u128> {
    match field {
        Field::InIface | Field::OutIface => side
            .ranges()
            .iter()
            .find_map(|&(lo, hi)| next_name(lo).filter(|&v| v <= hi)),
        _ => side.ranges().first().map(|r| r.0),
    }
}

impl Space {
    /// The space of every field the given matches constrain, plus family
    /// and addresses (whose universe depends on each other). Set membership
    /// depends on the sets' contents and is refused.
    pub fn of<'a>(matches: impl IntoIterator<Item = &'a Matches>) -> Result<Space, String> {
        let space = Space::with_sets(matches);
        if space.dims.iter().any(|f| matches!(f, Field::Set(_))) {
            return Err(
                "rules that match named sets are not analysed yet (their contents can change)"
                    .into(),
            );
        }
        Ok(space)
    }

    /// As [`Space::of`], with each set reference a dimension of its own
    /// (0: the packet's key is not in the set, 1: it is), free of every
    /// other field: the sets' contents are unknown, so every combination of
    /// memberships is a point. A claim about every point holds whatever the
    /// sets hold (`lint`). A packet written as `--packet` carries no
    /// membership: point lookups (witness checks, probes) take every
    /// membership as 0, consistently, so a point they prove something of is
    /// a real point of the space.
    pub fn with_sets<'a>(matches: impl IntoIterator<Item = &'a Matches>) -> Space {
        let mut dims = vec![Field::Family, Field::SrcAddr, Field::DstAddr];
        for m in matches {
            for (f, _) in m.iter() {
                if !dims.contains(f) {
                    dims.push(*f);
                }
            }
        }
        dims.sort();
        Space { dims }
    }

    /// The value of dimension `f` at `pkt` (a set membership: 0, see
    /// [`Space::with_sets`]).
    pub fn point_value(f: Field, pkt: &Packet) -> u128 {
        match f {
            Field::Set(_) => 0,
            _ => pkt.value(f),
        }
    }

    /// The analysed fields.
    pub fn dims(&self) -> &[Field] {
        &self.dims
    }

    /// Every packet: one cube per family.
    pub fn universe(&self) -> Region {
        let cubes = [Family::V4, Family::V6]
            .into_iter()
            .map(|family| Cube {
                sides: self
                    .dims
                    .iter()
                    .map(|&f| match f {
                        Field::Family => IntervalSet::point(family.value()),
                        f if f.is_address() => IntervalSet::full(width_mask(family.addr_bits())),
                        Field::CtState => IntervalSet::full(CtState::Untracked as u128),
                        _ => IntervalSet::full(f.max_value()),
                    })
                    .collect(),
            })
            .collect();
        Region { cubes }
    }

    /// The cube of a rule's match (fields it does not constrain are full).
    pub fn cube(&self, m: &Matches) -> Cube {
        Cube {
            sides: self
                .dims
                .iter()
                .map(|&f| {
                    m.get(f)
                        .cloned()
                        .unwrap_or_else(|| IntervalSet::full(f.max_value()))
                })
                .collect(),
        }
    }

    /// A packet in the cube (its smallest writable point), if it holds one.
    pub fn witness(&self, cube: &Cube) -> Option<Packet> {
        let mut values = Vec::with_capacity(self.dims.len());
        for (&f, side) in self.dims.iter().zip(&cube.sides) {
            values.push((f, first_value(f, side)?));
        }
        let get = |field: Field| values.iter().find(|(f, _)| *f == field).map(|v| v.1);
        let family = match get(Field::Family) {
            Some(6) => Family::V6,
            Some(4) => Family::V4,
            _ => return None,
        };
        let mut p = Packet::new(
            family,
            get(Field::SrcAddr).unwrap_or(0),
            get(Field::DstAddr).unwrap_or(0),
            get(Field::Proto).unwrap_or(6) as u8,
            get(Field::SrcPort).unwrap_or(1024) as u16,
            get(Field::DstPort).unwrap_or(80) as u16,
        );
        if let Some(v) = get(Field::IcmpTypeCode) {
            (p.icmp_type, p.icmp_code) = ((v >> 8) as u8, v as u8);
        }
        if let Some(v) = get(Field::TcpFlags) {
            p.tcp_flags = v as u8;
        }
        if let Some(v) = get(Field::InIface) {
            p.iif = IfName(v);
        }
        if let Some(v) = get(Field::OutIface) {
            p.oif = IfName(v);
        }
        if let Some(v) = get(Field::CtState) {
            p.ct_state = CtState::ALL[v as usize];
        }
        if let Some(v) = get(Field::Fragment) {
            p.fragment = v == 1;
        }
        if let Some(v) = get(Field::Ttl) {
            p.ttl = v as u8;
        }
        if let Some(v) = get(Field::Dscp) {
            p.dscp = v as u8;
        }
        if let Some(v) = get(Field::Length) {
            p.len = v as u32;
        }
        if let Some(v) = get(Field::CtStatus) {
            p.ct_status = v as u8;
        }
        if let Some(v) = get(Field::SrcType) {
            p.src_type = Some(v as u8);
        }
        if let Some(v) = get(Field::DstType) {
            p.dst_type = Some(v as u8);
        }
        if let Some(v) = get(Field::PktType) {
            p.pkt_type = Some(v as u8);
        }
        if let Some(v) = get(Field::CtOrigDstPort) {
            p.ct_orig_dport = v as u16;
        }
        if let Some(v) = get(Field::CtOrigSrcPort) {
            p.ct_orig_sport = v as u16;
        }
        if let Some(v) = get(Field::RevPath) {
            p.rev_path = v as u8;
        }
        for f in crate::packet::CT_ADDR_FIELDS {
            if let Some(v) = get(f) {
                p.set_ct_addr(f, v);
            }
        }
        if let Some(v) = get(Field::CtProto) {
            p.ct_proto = v as u8;
        }
        if let Some(v) = get(Field::Mark) {
            p.mark = v as u32;
        }
        if let Some(v) = get(Field::CtMark) {
            p.ct_mark = v as u32;
        }
        if let Some(v) = get(Field::MacSrc) {
            p.mac_src = crate::mac::from_key_value(v);
        }
        if let Some(v) = get(Field::SkUid) {
            p.sk_uid = v as u32;
        }
        if let Some(v) = get(Field::SkGid) {
            p.sk_gid = v as u32;
        }
        if let Some(v) = get(Field::Routing) {
            p.rt = v as u32;
        }
        // The TCP options the cube wants present, each as kind and a
        // length of 2 (NOP and End of List as one byte), padded with End
        // of List: the walk finds exactly those (iptables tests kinds
        // 1-255, so the padding's kind 0 is never asked about).
        let mut options = Vec::new();
        for (f, v) in &values {
            if let (Field::TcpOption(kind), 1) = (f, v) {
                options.push(*kind);
                if *kind >= 2 {
                    options.push(2);
                }
            }
        }
        if !options.is_empty() {
            options.resize(options.len().next_multiple_of(4), 0);
            if options.len() > crate::tcp_option::MAX_LEN {
                return None;
            }
            p.tcp_options = Some(options.into_boxed_slice());
        }
        Some(p)
    }

    /// True when the packet lies in the cube.
    pub fn contains(&self, cube: &Cube, pkt: &Packet) -> bool {
        self.dims
            .iter()
            .zip(&cube.sides)
            .all(|(&f, side)| side.contains(Space::point_value(f, pkt)))
    }

    /// log2 of the number of points of the cube (interface sides count
    /// every number of their intervals).
    pub fn points_log2(&self, cube: &Cube) -> f64 {
        cube.sides
            .iter()
            .map(|s| (s.cardinality() as f64).log2())
            .sum()
    }
}

/// A hasher for keys that are hashes already (`Cube::merge_all`'s).
#[derive(Default)]
struct HashedKey(u64);

impl std::hash::Hasher for HashedKey {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

impl Cube {
    /// The sides, one per dimension of the space.
    pub fn sides(&self) -> &[IntervalSet] {
        &self.sides
    }

    /// The same points in fewer cubes: cubes equal on every side but one
    /// are one cube (that side the union of theirs), merged dimension by
    /// dimension until a round merges nothing. A merged cube takes the
    /// place of the first of its parts. Pairwise disjoint cubes stay
    /// pairwise disjoint (two parts equal elsewhere are disjoint on the
    /// side they differ in, and a cube missing both parts misses their
    /// union).
    pub fn merge_all(mut cubes: Vec<Cube>) -> Vec<Cube> {
        use std::collections::HashMap;
        use std::hash::BuildHasherDefault;
        let dims = cubes.first().map_or(0, |c| c.sides.len());
        // Every side is hashed once (and again only when a merge changes
        // it); a round keys a cube by its other sides' hashes and compares
        // the sides themselves only within one key. Keying by the sides
        // hashed every side of every cube again in every round.
        // A multiply-rotate hash, not SipHash (a twentieth of a `diff`
        // of fw1_10k with mixed verdicts hashed sides, benchmarks.md §66):
        // a collision only costs a comparison of the sides, never a wrong
        // merge, and no outside input chooses the sides.
        let side_hash = |s: &IntervalSet| {
            let mix = |h: u64, v: u128| {
                (h.rotate_left(23) ^ v as u64 ^ (v >> 64) as u64)
                    .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            };
            s.ranges()
                .iter()
                .fold(0x243f_6a88_85a3_08d3, |h, &(lo, hi)| mix(mix(h, lo), hi))
        };
        // One flat vector, `dims` hashes per cube (a vector per cube was
        // an allocation per piece).
        let mut hashes: Vec<u64> = cubes
            .iter()
            .flat_map(|c| c.sides.iter().map(side_hash))
            .collect();
        let mut quiet = 0;
        let mut dim = 0;
        // Stop when every dimension in a row merged nothing.
        while quiet < dims && cubes.len() > 1 {
            let before = cubes.len();
            let key = |h: &[u64]| {
                h.iter()
                    .enumerate()
                    .filter(|&(d, _)| d != dim)
                    .fold(0u64, |acc, (_, &x)| {
                        (acc.rotate_left(17) ^ x).wrapping_mul(0x9e37_79b9_7f4a_7c15)
                    })
            };
            let same_elsewhere = |a: &Cube, b: &Cube| {
                a.sides
                    .iter()
                    .zip(&b.sides)
                    .enumerate()
                    .all(|(d, (x, y))| d == dim || x == y)
            };
            // Per key, the first part seen with it; parts with the same key
            // but other sides elsewhere (a collision, nearly never) are
            // chained after it, in the order seen. A vector per key was an
            // allocation per part and round.
            // Keyed by hashes already: the map does not hash them again.
            const END: usize = usize::MAX;
            let mut firsts: HashMap<u64, usize, BuildHasherDefault<HashedKey>> =
                HashMap::with_capacity_and_hasher(cubes.len(), Default::default());
            let mut chained: Vec<usize> = vec![END; cubes.len()];
            let mut into: Vec<usize> = Vec::with_capacity(cubes.len());
            for (i, c) in cubes.iter().enumerate() {
                let mut f = *firsts
                    .entry(key(&hashes[i * dims..(i + 1) * dims]))
                    .or_insert(i);
                while f != i && !same_elsewhere(&cubes[f], c) {
                    if chained[f] == END {
                        chained[f] = i;
                    }
                    f = chained[f];
                }
                into.push(f);
            }
            drop(firsts);
            // All of a merged cube's parts' intervals are normalized in one
            // sort: a union per part re-sorted the growing side every time,
            // quadratic in the parts (fw1_10k's mixed-verdict diff merges
            // hundreds of pieces into one box, and spent most of its time
            // here).
            let mut parts: Vec<Vec<(u128, u128)>> = vec![Vec::new(); cubes.len()];
            for (i, c) in cubes.iter().enumerate() {
                if into[i] != i {
                    parts[into[i]].extend_from_slice(c.sides[dim].ranges());
                }
            }
            let mut kept_hashes = Vec::with_capacity(hashes.len());
            cubes = cubes
                .into_iter()
                .zip(parts)
                .enumerate()
                .filter(|&(i, _)| into[i] == i)
                .map(|(i, (mut c, mut more))| {
                    let at = kept_hashes.len();
                    kept_hashes.extend_from_slice(&hashes[i * dims..(i + 1) * dims]);
                    if !more.is_empty() {
                        more.extend_from_slice(c.sides[dim].ranges());
                        c.sides[dim] = IntervalSet::from_ranges(more);
                        kept_hashes[at + dim] = side_hash(&c.sides[dim]);
                    }
                    c
                })
                .collect();
            hashes = kept_hashes;
            quiet = if cubes.len() < before { 0 } else { quiet + 1 };
            dim = (dim + 1) % dims.max(1);
        }
        cubes
    }

    /// The bytes the cube takes: itself, its sides and their ranges on
    /// the heap (what `diff` counts of the pieces it holds).
    pub fn bytes(&self) -> usize {
        std::mem::size_of::<Cube>()
            + self.sides.capacity() * std::mem::size_of::<IntervalSet>()
            + self
                .sides
                .iter()
                .map(IntervalSet::heap_bytes)
                .sum::<usize>()
    }

    /// True when some side is empty.
    pub fn is_empty(&self) -> bool {
        self.sides.iter().any(|s| s.is_empty())
    }

    /// True when the cubes share a point.
    pub fn overlaps(&self, other: &Cube) -> bool {
        self.sides
            .iter()
            .zip(&other.sides)
            .all(|(a, b)| a.overlaps(b))
    }

    /// True when every point of `self` is in `other`.
    pub fn is_subset(&self, other: &Cube) -> bool {
        self.sides
            .iter()
            .zip(&other.sides)
            .all(|(a, b)| a.is_subset(b))
    }

    /// The common points.
    pub fn intersect(&self, other: &Cube) -> Cube {
        Cube {
            sides: self
                .sides
                .iter()
                .zip(&other.sides)
                .map(|(a, b)| a.intersect(b))
                .collect(),
        }
    }

    /// Pushes `self \ other` onto `out` as disjoint cubes (at most one per
    /// dimension): piece k keeps the sides before k inside `other`, side k
    /// outside it, and the sides after k as they were.
    pub fn subtract_into(&self, other: &Cube, out: &mut Vec<Cube>) {
        if !self.overlaps(other) {
            out.push(self.clone());
            return;
        }
        self.split_into(other, out);
    }

    /// For a cube that overlaps `other`: pushes `self \ other` onto `out`
    /// as [`Cube::subtract_into`] does and returns `self ∩ other`, which
    /// the subtraction builds on the way (the last piece's sides before
    /// its own): a search that wants both parts of a split gets them for
    /// the price of one.
    pub fn split_into(&self, other: &Cube, out: &mut Vec<Cube>) -> Cube {
        debug_assert!(self.overlaps(other));
        let mut rest = self.clone();
        for k in 0..self.sides.len() {
            let outside = rest.sides[k].difference(&other.sides[k]);
            if !outside.is_empty() {
                let mut piece = rest.clone();
                piece.sides[k] = outside;
                out.push(piece);
                rest.sides[k] = rest.sides[k].intersect(&other.sides[k]);
            }
        }
        rest
    }

    /// The box with these sides (one `(lo, hi)` per dimension).
    pub fn from_hull(hull: &[(u128, u128)]) -> Cube {
        Cube {
            sides: hull
                .iter()
                .map(|&(lo, hi)| IntervalSet::range(lo, hi))
                .collect(),
        }
    }

    /// The smallest and largest value of each side: the bounding box.
    pub fn hull(&self) -> impl Iterator<Item = (u128, u128)> + '_ {
        self.sides.iter().map(|s| match s.ranges() {
            [] => (1, 0),
            r => (r[0].0, r[r.len() - 1].1),
        })
    }
}

impl Region {
    /// The region of no packet.
    pub fn empty() -> Region {
        Region { cubes: Vec::new() }
    }

    /// A region of one cube (none when the cube is empty).
    pub fn from_cube(cube: Cube) -> Region {
        let mut r = Region::empty();
        if !cube.is_empty() {
            r.cubes.push(cube);
        }
        r
    }

    /// The disjoint cubes.
    pub fn cubes(&self) -> &[Cube] {
        &self.cubes
    }

    /// True when no cube is left (geometrically; see [`Space::witness`] for
    /// whether a writable packet is left).
    pub fn is_empty(&self) -> bool {
        self.cubes.is_empty()
    }

    /// Adds a region disjoint from this one.
    pub fn extend_disjoint(&mut self, other: Region) {
        self.cubes.extend(other.cubes);
    }

    /// The points also in `cube`.
    pub fn intersect(&self, cube: &Cube) -> Region {
        Region {
            cubes: self
                .cubes
                .iter()
                .filter(|c| c.overlaps(cube))
                .map(|c| c.intersect(cube))
                .collect(),
        }
    }

    /// Splits into (inside `cube`, outside it).
    pub fn split(self, cube: &Cube, budget: Budget) -> Result<(Region, Region), OverBudget> {
        if budget
            .deadline
            .is_some_and(|d| std::time::Instant::now() > d)
        {
            return Err(OverBudget);
        }
        let mut inside = Vec::new();
        let mut outside = Vec::new();
        for c in self.cubes {
            if !c.overlaps(cube) {
                outside.push(c);
                continue;
            }
            inside.push(c.split_into(cube, &mut outside));
            if outside.len() > budget.max_cubes {
                return Err(OverBudget);
            }
        }
        Ok((Region { cubes: inside }, Region { cubes: outside }))
    }

    /// The points not in `cube`.
    pub fn subtract(self, cube: &Cube, budget: Budget) -> Result<Region, OverBudget> {
        Ok(self.split(cube, budget)?.1)
    }

    /// A writable packet of the region, if it holds one.
    pub fn witness(&self, space: &Space) -> Option<Packet> {
        self.cubes.iter().find_map(|c| space.witness(c))
    }

    /// True when the packet lies in the region.
    pub fn contains(&self, space: &Space, pkt: &Packet) -> bool {
        self.cubes.iter().any(|c| space.contains(c, pkt))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn next_name_finds_the_smallest_writable_name() {
        let name = |s: &str| IfName::new(s).unwrap().0;
        assert_eq!(next_name(0), Some(0));
        assert_eq!(next_name(name("eth0")), Some(name("eth0")));
        // "eth" followed by a NUL and junk: the next name is "eth!".
        assert_eq!(next_name(name("eth") | 1), Some(name("eth!")));
        // A byte above '~' carries into the byte before it.
        let (_, hi) = IfName::wildcard_range("eth");
        assert_eq!(next_name(hi), Some(name("eti")));
        assert_eq!(next_name(u128::MAX), None);
        let fifteen = name("aaaaaaaaaaaaaaa");
        assert_eq!(next_name(fifteen | 1), Some(name("aaaaaaaaaaaaaab")));
    }

    fn cube(space: &Space, ranges: &[(u128, u128)]) -> Cube {
        Cube {
            sides: space
                .dims
                .iter()
                .zip(ranges)
                .map(|(_, &(lo, hi))| IntervalSet::range(lo, hi))
                .collect(),
        }
    }

    proptest! {
        /// Subtraction and splitting agree with point-wise membership on a
        /// small grid, and their pieces are disjoint.
        #[test]
        fn split_is_exact(
            a in prop::collection::vec((0u128..8, 0u128..8), 3),
            b in prop::collection::vec((0u128..8, 0u128..8), 3),
        ) {
            let space = Space { dims: vec![Field::Proto, Field::SrcPort, Field::DstPort] };
            let (ca, cb) = (cube(&space, &a), cube(&space, &b));
            let (inside, outside) = Region::from_cube(ca.clone())
                .split(&cb, Budget::default())
                .unwrap();
            for x in 0..8u128 {
                for y in 0..8u128 {
                    for z in 0..8u128 {
                        let mut p = Packet::v4(0, 0, x as u8, y as u16, z as u16);
                        p.proto = x as u8;
                        let (in_a, in_b) = (space.contains(&ca, &p), space.contains(&cb, &p));
                        let hits_in = inside.cubes().iter().filter(|c| space.contains(c, &p)).count();
                        let hits_out = outside.cubes().iter().filter(|c| space.contains(c, &p)).count();
                        prop_assert_eq!(hits_in, (in_a && in_b) as usize);
                        prop_assert_eq!(hits_out, (in_a && !in_b) as usize);
                    }
                }
            }
        }

        /// Merging disjoint cubes keeps every point in exactly one cube
        /// and never adds cubes; a cube cut by another comes back whole.
        #[test]
        fn merge_all_keeps_the_points(
            a in prop::collection::vec((0u128..8, 0u128..8), 3),
            b in prop::collection::vec((0u128..8, 0u128..8), 3),
        ) {
            let space = Space { dims: vec![Field::Proto, Field::SrcPort, Field::DstPort] };
            let (ca, cb) = (cube(&space, &a), cube(&space, &b));
            let (inside, outside) = Region::from_cube(ca.clone())
                .split(&cb, Budget::default())
                .unwrap();
            let pieces: Vec<Cube> = inside.cubes().iter().chain(outside.cubes()).cloned().collect();
            let merged = Cube::merge_all(pieces.clone());
            prop_assert!(merged.len() <= pieces.len());
            if !ca.is_empty() {
                prop_assert_eq!(merged, vec![ca.clone()]);
            }
            let merged = Cube::merge_all(outside.cubes().to_vec());
            for x in 0..8u128 {
                for y in 0..8u128 {
                    for z in 0..8u128 {
                        let mut p = Packet::v4(0, 0, x as u8, y as u16, z as u16);
                        p.proto = x as u8;
                        let want = space.contains(&ca, &p) && !space.contains(&cb, &p);
                        let hits = merged.iter().filter(|c| space.contains(c, &p)).count();
                        prop_assert_eq!(hits, want as usize);
                    }
                }
            }
        }
        /// Many pieces of one cube (cut by several others, so that one
        /// merged box takes several parts at once) merge back to exactly
        /// the points they held: every point in one cube, none added.
        #[test]
        fn merge_all_of_many_parts_keeps_the_points(
            a in prop::collection::vec((0u128..8, 0u128..8), 3),
            cuts in prop::collection::vec(prop::collection::vec((0u128..8, 0u128..8), 3), 1..6),
        ) {
            let space = Space { dims: vec![Field::Proto, Field::SrcPort, Field::DstPort] };
            let ca = cube(&space, &a);
            let mut inside = Vec::new();
            let mut rest = Region::from_cube(ca.clone());
            for c in &cuts {
                let (hit, miss) = rest.split(&cube(&space, c), Budget::default()).unwrap();
                inside.extend(hit.cubes().iter().cloned());
                rest = miss;
            }
            // Not asserted: that all pieces merge back into `ca`. Merging
            // two boxes at a time cannot undo every partition (a pinwheel
            // of five boxes has no two that form a box), so the pieces'
            // merge only has to hold `ca`'s points, each once.
            let pieces: Vec<Cube> = inside.iter().chain(rest.cubes()).cloned().collect();
            let whole = Cube::merge_all(pieces.clone());
            prop_assert!(whole.len() <= pieces.len());
            let merged = Cube::merge_all(inside.clone());
            for x in 0..8u128 {
                for y in 0..8u128 {
                    for z in 0..8u128 {
                        let mut p = Packet::v4(0, 0, x as u8, y as u16, z as u16);
                        p.proto = x as u8;
                        let want = inside.iter().filter(|c| space.contains(c, &p)).count();
                        prop_assert!(want <= 1);
                        let hits = merged.iter().filter(|c| space.contains(c, &p)).count();
                        prop_assert_eq!(hits, want);
                        let in_whole = whole.iter().filter(|c| space.contains(c, &p)).count();
                        prop_assert_eq!(in_whole, space.contains(&ca, &p) as usize);
                    }
                }
            }
        }
    }
}
