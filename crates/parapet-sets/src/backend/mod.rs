//! Set backends. Each stores packed keys ([`Word`]) with an absolute expiry
//! stamp in milliseconds (`NEVER` = permanent); expired entries read as
//! absent and are reaped in bounded steps.

pub(crate) mod bitmap;
pub(crate) mod hash;
pub(crate) mod interval;
pub(crate) mod tss;

use crate::word::Word;

/// Expiry stamp of a permanent element.
pub(crate) const NEVER: u64 = u64::MAX;

/// Outcome of an insert.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ins {
    New,
    Refreshed,
}

/// Why an insert failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BErr {
    /// `maxelem` (or a fixed table's capacity) reached.
    Full,
    /// A concatenation whose ranges decompose into too many prefix boxes.
    TooComplex(usize),
    /// Outside a bitmap's domain.
    OutOfRange,
}

pub(crate) enum Backend<K: Word> {
    Bitmap(bitmap::Bitmap),
    Hash(hash::HashTable<K>),
    Interval(interval::IntervalSet<K>),
    Tss(tss::Tss<K>),
}

macro_rules! each {
    ($s:expr, $b:ident => $e:expr) => {
        match $s {
            Backend::Bitmap($b) => $e,
            Backend::Hash($b) => $e,
            Backend::Interval($b) => $e,
            Backend::Tss($b) => $e,
        }
    };
}

impl<K: Word> Backend<K> {
    /// Inserts `[lo, hi]` (exact backends: `lo == hi`).
    #[inline]
    pub fn insert(&mut self, lo: K, hi: K, exp: u64, maxelem: usize) -> Result<Ins, BErr> {
        match self {
            Backend::Bitmap(b) => {
                debug_assert!(lo == hi);
                b.insert(lo.to_u128(), exp, maxelem)
            }
            Backend::Hash(b) => {
                debug_assert!(lo == hi);
                b.insert(lo, exp, maxelem)
            }
            Backend::Interval(b) => b.insert(lo, hi, exp, maxelem),
            Backend::Tss(b) => b.insert(lo, hi, exp, maxelem),
        }
    }
    #[inline]
    pub fn remove(&mut self, lo: K, hi: K) -> bool {
        match self {
            Backend::Bitmap(b) => b.remove(lo.to_u128()),
            Backend::Hash(b) => b.remove(lo),
            Backend::Interval(b) => b.remove(lo, hi),
            Backend::Tss(b) => b.remove(lo, hi),
        }
    }
    #[inline]
    pub fn contains(&self, k: K, now: u64) -> bool {
        match self {
            Backend::Bitmap(b) => b.contains(k.to_u128(), now),
            Backend::Hash(b) => b.contains(k, now),
            Backend::Interval(b) => b.contains(k, now),
            Backend::Tss(b) => b.contains(k, now),
        }
    }
    /// Expiry stamp of the stored element `[lo, hi]`, if stored (even if expired).
    pub fn get(&self, lo: K, hi: K) -> Option<u64> {
        match self {
            Backend::Bitmap(b) => b.get(lo.to_u128()),
            Backend::Hash(b) => b.get(lo),
            Backend::Interval(b) => b.get(lo, hi),
            Backend::Tss(b) => b.get(lo, hi),
        }
    }
    /// Stored elements (including expired, not yet reaped ones).
    pub fn len(&self) -> usize {
        each!(self, b => b.len())
    }
    pub fn for_each(&self, f: &mut dyn FnMut(K, K, u64)) {
        match self {
            Backend::Bitmap(b) => b.for_each(&mut |k, e| f(K::from_u128(k), K::from_u128(k), e)),
            Backend::Hash(b) => b.for_each(&mut |k, e| f(k, k, e)),
            Backend::Interval(b) => b.for_each(f),
            Backend::Tss(b) => b.for_each(f),
        }
    }
    /// Removes up to `budget` expired elements (bounded work); calls `f` on each.
    pub fn reap(&mut self, now: u64, budget: usize, f: &mut dyn FnMut(K, K)) -> usize {
        match self {
            Backend::Bitmap(b) => b.reap(now, budget, &mut |k| f(K::from_u128(k), K::from_u128(k))),
            Backend::Hash(b) => b.reap(now, budget, &mut |k| f(k, k)),
            Backend::Interval(b) => b.reap(now, budget, f),
            Backend::Tss(b) => b.reap(now, budget, f),
        }
    }
    pub fn clear(&mut self) {
        each!(self, b => b.clear())
    }
    pub fn mem_bytes(&self) -> usize {
        each!(self, b => b.mem_bytes())
    }
    pub fn begin_bulk(&mut self) {
        if let Backend::Interval(b) = self {
            b.begin_bulk()
        }
    }
    pub fn end_bulk(&mut self) {
        if let Backend::Interval(b) = self {
            b.end_bulk()
        }
    }
}

impl<K: Word> Clone for Backend<K> {
    fn clone(&self) -> Self {
        match self {
            Backend::Bitmap(b) => Backend::Bitmap(b.clone()),
            Backend::Hash(b) => Backend::Hash(b.clone()),
            Backend::Interval(b) => Backend::Interval(b.clone()),
            Backend::Tss(b) => Backend::Tss(b.clone()),
        }
    }
}

/// A seeded, fast hasher for std maps of packed words (and of the
/// dataplane's set mirror: SipHash, std's default, was a tenth of a fleet
/// node's catch-up, benchmarks.md §6x). The seed is random per map made
/// with [`Default`], so keys an outsider picks (banned addresses) cannot
/// be chosen to collide.
#[derive(Clone, Copy)]
pub struct Seeded(pub u64);

impl Default for Seeded {
    fn default() -> Self {
        Seeded(random_seed())
    }
}

/// The hasher of [`Seeded`].
pub struct SeededHasher(u64);

impl std::hash::BuildHasher for Seeded {
    type Hasher = SeededHasher;
    fn build_hasher(&self) -> SeededHasher {
        SeededHasher(self.0)
    }
}

impl std::hash::Hasher for SeededHasher {
    fn finish(&self) -> u64 {
        crate::word::mix64(self.0)
    }
    fn write(&mut self, bytes: &[u8]) {
        for c in bytes.chunks(8) {
            let mut b = [0u8; 8];
            b[..c.len()].copy_from_slice(c);
            self.write_u64(u64::from_le_bytes(b));
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(5) ^ x).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    fn write_u128(&mut self, x: u128) {
        self.write_u64(x as u64);
        self.write_u64((x >> 64) as u64);
    }
    fn write_u32(&mut self, x: u32) {
        self.write_u64(x as u64)
    }
    fn write_u16(&mut self, x: u16) {
        self.write_u64(x as u64)
    }
    fn write_u8(&mut self, x: u8) {
        self.write_u64(x as u64)
    }
    fn write_usize(&mut self, x: usize) {
        self.write_u64(x as u64)
    }
}

/// A per-table random seed (hash flooding resistance).
pub(crate) fn random_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(0x5eed);
    h.finish() | 1
}
