//! Packed key words.
//!
//! A set key (one value per dimension) is packed into one fixed-width
//! machine word: dimension 0 in the most significant bits, so numeric
//! order equals lexicographic order of the dimensions. Widths: `u16`,
//! `u32`, `u64`, `u128` and [`Wide`] (512 bits, four 128-bit dimensions).

use std::fmt::Debug;
use std::hash::Hash;

/// A packed key word. Implemented for `u16`, `u32`, `u64`, `u128`, [`Wide`].
pub trait Word: Copy + Eq + Ord + Hash + Debug + Default + Send + Sync + 'static {
    /// Number of bits.
    #[allow(dead_code)]
    const BITS: u32;
    /// Bits `[off, off+width)` (counted from the least significant bit).
    fn get(&self, off: u32, width: u32) -> u128;
    /// Sets bits `[off, off+width)` to the low `width` bits of `v`.
    fn put(&mut self, off: u32, width: u32, v: u128);
    /// Bitwise and.
    fn and(self, o: Self) -> Self;
    /// Seeded 64-bit hash (good avalanche; the seed is per table).
    fn hash64(&self, seed: u64) -> u64;
    /// Whole word as u128 (only meaningful when `BITS <= 128`).
    fn to_u128(self) -> u128;
    /// From u128 (truncating; only meaningful when `BITS <= 128`).
    fn from_u128(v: u128) -> Self;
}

#[inline(always)]
pub(crate) fn mix64(mut x: u64) -> u64 {
    // murmur3 fmix64
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^= x >> 33;
    x
}

#[inline(always)]
fn mask(width: u32) -> u128 {
    if width >= 128 {
        u128::MAX
    } else {
        (1u128 << width) - 1
    }
}

macro_rules! prim_word {
    ($t:ty) => {
        impl Word for $t {
            const BITS: u32 = <$t>::BITS;
            #[inline(always)]
            fn get(&self, off: u32, width: u32) -> u128 {
                ((*self as u128) >> off) & mask(width)
            }
            #[inline(always)]
            fn put(&mut self, off: u32, width: u32, v: u128) {
                let m = mask(width) << off;
                let cur = *self as u128;
                *self = ((cur & !m) | ((v << off) & m)) as $t;
            }
            #[inline(always)]
            fn and(self, o: Self) -> Self {
                self & o
            }
            #[inline(always)]
            fn hash64(&self, seed: u64) -> u64 {
                let v = *self as u128;
                mix64((v as u64) ^ seed ^ mix64(((v >> 64) as u64) ^ seed.rotate_left(32)))
            }
            #[inline(always)]
            fn to_u128(self) -> u128 {
                self as u128
            }
            #[inline(always)]
            fn from_u128(v: u128) -> Self {
                v as $t
            }
        }
    };
}
prim_word!(u16);
prim_word!(u32);
prim_word!(u64);
prim_word!(u128);

/// 512-bit key word for wide concatenations (e.g. `ifname . ipv6_addr . inet_service`).
/// Word 0 is the most significant.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Wide(pub [u64; 8]);

impl Wide {
    #[inline]
    fn get_bit_chunk(&self, pos: u32) -> u64 {
        // 64-bit word containing bit `pos` (from LSB)
        self.0[7 - (pos / 64) as usize]
    }
}

impl Word for Wide {
    const BITS: u32 = 512;
    fn get(&self, off: u32, width: u32) -> u128 {
        let mut out = 0u128;
        let mut i = 0;
        while i < width {
            let p = off + i;
            let within = p % 64;
            let take = (64 - within).min(width - i);
            let w = self.get_bit_chunk(p);
            let bits = (w >> within) as u128 & mask(take);
            out |= bits << i;
            i += take;
        }
        out
    }
    fn put(&mut self, off: u32, width: u32, v: u128) {
        let mut i = 0;
        while i < width {
            let p = off + i;
            let within = p % 64;
            let take = (64 - within).min(width - i);
            let idx = 7 - (p / 64) as usize;
            let m = (mask(take) as u64) << within;
            let bits = (((v >> i) & mask(take)) as u64) << within;
            self.0[idx] = (self.0[idx] & !m) | bits;
            i += take;
        }
    }
    fn and(self, o: Self) -> Self {
        let mut r = self;
        for i in 0..8 {
            r.0[i] &= o.0[i];
        }
        r
    }
    fn hash64(&self, seed: u64) -> u64 {
        let mut h = seed;
        for w in self.0 {
            h = mix64(h ^ w).wrapping_add(0x9e37_79b9_7f4a_7c15);
        }
        h
    }
    fn to_u128(self) -> u128 {
        ((self.0[6] as u128) << 64) | self.0[7] as u128
    }
    fn from_u128(v: u128) -> Self {
        let mut w = Wide::default();
        w.0[7] = v as u64;
        w.0[6] = (v >> 64) as u64;
        w
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn wide_get_put() {
        let mut w = Wide::default();
        w.put(100, 128, 0x1234_5678_9abc_def0_1122_3344_5566_7788);
        w.put(300, 16, 0xbeef);
        assert_eq!(w.get(100, 128), 0x1234_5678_9abc_def0_1122_3344_5566_7788);
        assert_eq!(w.get(300, 16), 0xbeef);
        assert_eq!(w.get(0, 100), 0);
        let mut x = 0u32;
        x.put(8, 8, 0xff);
        assert_eq!(x, 0xff00);
        assert_eq!(x.get(8, 8), 0xff);
    }
}
