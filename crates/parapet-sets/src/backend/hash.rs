//! Open-addressing hash table (linear probing, 7-bit tags in a control
//! byte array, backward-shift deletion, per-table random seed).
//! Lookup/insert/delete O(1) expected; space O(capacity) with
//! capacity ≤ 2·n (growable, performance), ≤ 8/7·n·2 (memory) or fixed.

use super::{BErr, Ins, NEVER};
use crate::word::Word;

#[derive(Clone)]
pub(crate) struct HashTable<K: Word> {
    ctrl: Vec<u8>,
    keys: Vec<K>,
    /// Expiry per slot; empty when the set has no timeouts.
    exp: Vec<u64>,
    mask: usize,
    len: usize,
    seed: u64,
    growable: bool,
    /// Maximum load, as numerator over 8.
    load8: usize,
    timeouts: bool,
    cursor: usize,
}

#[inline(always)]
fn tag(h: u64) -> u8 {
    0x80 | (h >> 57) as u8
}

impl<K: Word> HashTable<K> {
    /// `cap_hint` elements; `load8` = max load in eighths (4 = 50 %, 7 = 87.5 %).
    pub fn new(cap_hint: usize, growable: bool, load8: usize, timeouts: bool) -> Self {
        let slots = (cap_hint.max(4) * 8).div_ceil(load8).next_power_of_two();
        let mut t = HashTable {
            ctrl: Vec::new(),
            keys: Vec::new(),
            exp: Vec::new(),
            mask: 0,
            len: 0,
            seed: super::random_seed(),
            growable,
            load8,
            timeouts,
            cursor: 0,
        };
        t.alloc(slots);
        t
    }
    fn alloc(&mut self, slots: usize) {
        self.ctrl = vec![0; slots];
        self.keys = vec![K::default(); slots];
        self.exp = if self.timeouts {
            vec![NEVER; slots]
        } else {
            Vec::new()
        };
        self.mask = slots - 1;
        self.cursor = 0;
    }
    #[allow(dead_code)]
    pub fn capacity(&self) -> usize {
        self.ctrl.len()
    }
    #[inline(always)]
    fn find(&self, k: &K, h: u64) -> Result<usize, usize> {
        let t = tag(h);
        let mut i = h as usize & self.mask;
        loop {
            let c = unsafe { *self.ctrl.get_unchecked(i) };
            if c == 0 {
                return Err(i);
            }
            if c == t && unsafe { self.keys.get_unchecked(i) } == k {
                return Ok(i);
            }
            i = (i + 1) & self.mask;
        }
    }
    fn grow(&mut self) {
        let old_ctrl = std::mem::take(&mut self.ctrl);
        let old_keys = std::mem::take(&mut self.keys);
        let old_exp = std::mem::take(&mut self.exp);
        self.alloc(old_ctrl.len() * 2);
        for i in 0..old_ctrl.len() {
            if old_ctrl[i] != 0 {
                let k = old_keys[i];
                let h = k.hash64(self.seed);
                if let Err(j) = self.find(&k, h) {
                    self.ctrl[j] = tag(h);
                    self.keys[j] = k;
                    if self.timeouts {
                        self.exp[j] = old_exp[i];
                    }
                }
            }
        }
    }
    /// Whether one more element fits without exceeding the load limit.
    #[inline(always)]
    fn fits(&self) -> bool {
        (self.len + 1) * 8 <= self.ctrl.len() * self.load8
    }
    #[inline]
    pub fn insert(&mut self, k: K, exp: u64, maxelem: usize) -> Result<Ins, BErr> {
        let h = k.hash64(self.seed);
        match self.find(&k, h) {
            Ok(i) => {
                if self.timeouts {
                    self.exp[i] = exp;
                }
                Ok(Ins::Refreshed)
            }
            Err(mut i) => {
                if self.len >= maxelem {
                    return Err(BErr::Full);
                }
                if !self.fits() {
                    if !self.growable {
                        // fixed table: allow up to 15/16 load before refusing
                        if (self.len + 1) * 16 > self.ctrl.len() * 15 {
                            return Err(BErr::Full);
                        }
                    } else {
                        self.grow();
                        i = self.find(&k, h).unwrap_err();
                    }
                }
                self.ctrl[i] = tag(h);
                self.keys[i] = k;
                if self.timeouts {
                    self.exp[i] = exp;
                }
                self.len += 1;
                Ok(Ins::New)
            }
        }
    }
    fn remove_at(&mut self, i: usize) {
        let mut hole = i;
        let mut j = (i + 1) & self.mask;
        while self.ctrl[j] != 0 {
            let home = self.keys[j].hash64(self.seed) as usize & self.mask;
            if (j.wrapping_sub(home) & self.mask) >= (j.wrapping_sub(hole) & self.mask) {
                self.ctrl[hole] = self.ctrl[j];
                self.keys[hole] = self.keys[j];
                if self.timeouts {
                    self.exp[hole] = self.exp[j];
                }
                hole = j;
            }
            j = (j + 1) & self.mask;
        }
        self.ctrl[hole] = 0;
        self.len -= 1;
    }
    pub fn remove(&mut self, k: K) -> bool {
        let h = k.hash64(self.seed);
        match self.find(&k, h) {
            Ok(i) => {
                self.remove_at(i);
                true
            }
            Err(_) => false,
        }
    }
    #[inline]
    pub fn contains(&self, k: K, now: u64) -> bool {
        let h = k.hash64(self.seed);
        match self.find(&k, h) {
            Ok(i) => !self.timeouts || unsafe { *self.exp.get_unchecked(i) } > now,
            Err(_) => false,
        }
    }
    pub fn get(&self, k: K) -> Option<u64> {
        let h = k.hash64(self.seed);
        self.find(&k, h)
            .ok()
            .map(|i| if self.timeouts { self.exp[i] } else { NEVER })
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn for_each(&self, f: &mut dyn FnMut(K, u64)) {
        for i in 0..self.ctrl.len() {
            if self.ctrl[i] != 0 {
                f(
                    self.keys[i],
                    if self.timeouts { self.exp[i] } else { NEVER },
                );
            }
        }
    }
    /// Examines up to `budget` slots from a rotating cursor.
    pub fn reap(&mut self, now: u64, budget: usize, f: &mut dyn FnMut(K)) -> usize {
        if !self.timeouts || self.len == 0 {
            return 0;
        }
        let mut n = 0;
        for _ in 0..budget {
            let i = self.cursor;
            if self.ctrl[i] != 0 && self.exp[i] <= now {
                let k = self.keys[i];
                self.remove_at(i);
                f(k);
                n += 1;
                // an element may have shifted into slot i: look at it again
            } else {
                self.cursor = (i + 1) & self.mask;
            }
        }
        n
    }
    pub fn clear(&mut self) {
        self.ctrl.iter_mut().for_each(|c| *c = 0);
        self.len = 0;
    }
    pub fn mem_bytes(&self) -> usize {
        self.ctrl.len() * (1 + std::mem::size_of::<K>())
            + self.exp.len() * 8
            + std::mem::size_of::<Self>()
    }
}
