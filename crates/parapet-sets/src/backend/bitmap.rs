//! Bitmap over a domain of at most 65,536 keys (`base .. base + size`).
//! Lookup O(1), insert/delete O(1), space O(domain) bits (+ 8 bytes per
//! domain slot when timeouts are enabled).

use super::{BErr, Ins, NEVER};

#[derive(Clone)]
pub(crate) struct Bitmap {
    base: u128,
    size: usize,
    bits: Vec<u64>,
    /// Expiry per domain slot; empty when the set has no timeouts.
    exp: Vec<u64>,
    len: usize,
    cursor: usize,
}

impl Bitmap {
    pub fn new(base: u128, size: usize, timeouts: bool) -> Bitmap {
        Bitmap {
            base,
            size,
            bits: vec![0; size.div_ceil(64)],
            exp: if timeouts {
                vec![NEVER; size]
            } else {
                Vec::new()
            },
            len: 0,
            cursor: 0,
        }
    }
    #[inline(always)]
    fn idx(&self, k: u128) -> Option<usize> {
        let d = k.wrapping_sub(self.base);
        if k >= self.base && d < self.size as u128 {
            Some(d as usize)
        } else {
            None
        }
    }
    #[inline(always)]
    fn bit(&self, i: usize) -> bool {
        self.bits[i >> 6] >> (i & 63) & 1 != 0
    }
    pub fn insert(&mut self, k: u128, exp: u64, maxelem: usize) -> Result<Ins, BErr> {
        let i = self.idx(k).ok_or(BErr::OutOfRange)?;
        if self.bit(i) {
            if !self.exp.is_empty() {
                self.exp[i] = exp;
            }
            return Ok(Ins::Refreshed);
        }
        if self.len >= maxelem {
            return Err(BErr::Full);
        }
        self.bits[i >> 6] |= 1 << (i & 63);
        if !self.exp.is_empty() {
            self.exp[i] = exp;
        }
        self.len += 1;
        Ok(Ins::New)
    }
    pub fn remove(&mut self, k: u128) -> bool {
        let Some(i) = self.idx(k) else { return false };
        if !self.bit(i) {
            return false;
        }
        self.bits[i >> 6] &= !(1 << (i & 63));
        self.len -= 1;
        true
    }
    #[inline]
    pub fn contains(&self, k: u128, now: u64) -> bool {
        match self.idx(k) {
            Some(i) => self.bit(i) && (self.exp.is_empty() || self.exp[i] > now),
            None => false,
        }
    }
    pub fn get(&self, k: u128) -> Option<u64> {
        let i = self.idx(k)?;
        if self.bit(i) {
            Some(if self.exp.is_empty() {
                NEVER
            } else {
                self.exp[i]
            })
        } else {
            None
        }
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn for_each(&self, f: &mut dyn FnMut(u128, u64)) {
        for (w, &word) in self.bits.iter().enumerate() {
            let mut m = word;
            while m != 0 {
                let b = m.trailing_zeros() as usize;
                m &= m - 1;
                let i = w * 64 + b;
                f(
                    self.base + i as u128,
                    if self.exp.is_empty() {
                        NEVER
                    } else {
                        self.exp[i]
                    },
                );
            }
        }
    }
    /// Examines up to `budget` stored elements (empty words are skipped; at
    /// most one pass over the bitmap's words per call).
    pub fn reap(&mut self, now: u64, budget: usize, f: &mut dyn FnMut(u128)) -> usize {
        if self.exp.is_empty() || self.len == 0 {
            return 0;
        }
        let words = self.bits.len();
        let mut n = 0;
        let mut seen = 0;
        let mut w = self.cursor / 64;
        for _ in 0..=words {
            let mut m = self.bits[w];
            while m != 0 {
                let b = m.trailing_zeros() as usize;
                m &= m - 1;
                let i = w * 64 + b;
                seen += 1;
                if self.exp[i] <= now {
                    self.bits[w] &= !(1 << b);
                    self.len -= 1;
                    f(self.base + i as u128);
                    n += 1;
                }
            }
            w = (w + 1) % words;
            if seen >= budget {
                break;
            }
        }
        self.cursor = w * 64;
        n
    }
    pub fn clear(&mut self) {
        self.bits.iter_mut().for_each(|w| *w = 0);
        self.len = 0;
    }
    pub fn mem_bytes(&self) -> usize {
        self.bits.len() * 8 + self.exp.len() * 8 + std::mem::size_of::<Self>()
    }
}
