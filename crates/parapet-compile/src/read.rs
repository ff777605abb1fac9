//! Low-level image reading both user-space engines share: the tree
//! [`crate::Walker`] and the [`crate::FastPath`] (whose complex records are
//! the image's own).

use parapet_image::{
    u128_at, KeyWords, MASKED_BIT, MASK_NEGATE_BIT, RECORD_HEADER_WORDS, SET_FIELD, WIDE_BIT,
};

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

/// Does the entry record at image word `rec` match `key`?
#[inline]
pub(crate) fn record_matches(w: &[u32], rec: usize, key: &KeyWords) -> bool {
    let nc = (w[rec + 1] >> 16) & 0xff;
    let mut p = rec + RECORD_HEADER_WORDS;
    for _ in 0..nc {
        let c = w[p];
        let field = (c & 0xff) as usize;
        let r = (c >> 16) as usize;
        p += 1;
        if field == SET_FIELD as usize {
            let mask = (w[p] as u64) | (w[p + 1] as u64) << 32;
            let want = (w[p + 2] as u64) | (w[p + 3] as u64) << 32;
            if key.sets() & mask != want {
                return false;
            }
            p += 4;
            continue;
        }
        // the pattern hits sit apart from the fixed fields, as the set
        // bits do (`parapet_image::patterns`)
        let v = if field == parapet_image::patterns::FIELD as usize {
            key.patterns()
        } else {
            key.value(field)
        };
        if c & MASKED_BIT != 0 {
            // `key & mask == value` (or `!=`), narrow or wide.
            let (mask, value) = if c & WIDE_BIT == 0 {
                p += 2;
                (w[p - 2] as u128, w[p - 1] as u128)
            } else {
                p += 8;
                (u128_at(&w[p - 8..p - 4]), u128_at(&w[p - 4..p]))
            };
            if (v & mask == value) == (c & MASK_NEGATE_BIT != 0) {
                return false;
            }
            continue;
        }
        if c & WIDE_BIT == 0 && r == 1 {
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
        let hit = if c & WIDE_BIT == 0 {
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
