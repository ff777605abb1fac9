//! Tuple-space structure for concatenations with ranges (and, generally,
//! any box of per-dimension ranges).
//!
//! Each element (a box: one range per dimension) is decomposed into
//! prefix boxes (a range of a `w`-bit dimension splits into at most
//! `2w − 2` prefixes). Boxes with the same per-dimension prefix lengths
//! ("shape") share one hash table keyed by the masked packed key. A lookup
//! masks the packet key once per shape and probes: O(S) expected with S
//! distinct shapes — the ipset `hash:net*` algorithm, generalised.
//! Insert/delete O(P) with P prefix boxes of the element; space O(Σ P).

use super::{BErr, Ins, Seeded, NEVER};
use crate::key::{Layout, MAX_DIMS};
use crate::word::Word;
use parapet_model::range_to_prefixes;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

/// Maximum number of prefix boxes one element may decompose into.
pub(crate) const MAX_BOXES: usize = 1 << 16;

#[derive(Clone)]
enum Owners {
    One(u64, u64),
    Many(Vec<(u64, u64)>),
}

impl Owners {
    #[inline]
    fn live(&self, now: u64) -> bool {
        match self {
            Owners::One(_, e) => *e > now,
            Owners::Many(v) => v.iter().any(|&(_, e)| e > now),
        }
    }
}

#[derive(Clone)]
struct Shape<K: Word> {
    lens: [u8; MAX_DIMS],
    mask: K,
    table: HashMap<K, Owners, Seeded>,
}

#[derive(Clone)]
pub(crate) struct Tss<K: Word> {
    layout: Layout,
    shapes: Vec<Shape<K>>,
    elems: HashMap<(K, K), (u64, u64), Seeded>,
    next_id: u64,
    heap: BinaryHeap<Reverse<(u64, K, K)>>,
    seed: u64,
    entries: usize,
}

impl<K: Word> Tss<K> {
    pub(crate) fn new(layout: Layout) -> Self {
        let seed = super::random_seed();
        Tss {
            layout,
            shapes: Vec::new(),
            elems: HashMap::with_hasher(Seeded(seed)),
            next_id: 0,
            heap: BinaryHeap::new(),
            seed,
            entries: 0,
        }
    }

    /// Prefix boxes of `[lo, hi]`: (masked key, per-dim lengths).
    fn decompose(&self, lo: K, hi: K) -> Result<Vec<(K, [u8; MAX_DIMS])>, BErr> {
        let d = self.layout.dims.len();
        let mut per: Vec<Vec<(u128, u32)>> = Vec::with_capacity(d);
        let mut total: usize = 1;
        for i in 0..d {
            let (l, h) = (self.layout.unpack(&lo, i), self.layout.unpack(&hi, i));
            let mut v = Vec::new();
            range_to_prefixes(l, h, self.layout.dims[i].width(), &mut v);
            total = total.saturating_mul(v.len());
            per.push(v);
        }
        if total > MAX_BOXES {
            return Err(BErr::TooComplex(total));
        }
        let mut out = Vec::with_capacity(total);
        let mut idx = [0usize; MAX_DIMS];
        loop {
            let mut k = K::default();
            let mut lens = [0u8; MAX_DIMS];
            for i in 0..d {
                let (base, len) = per[i][idx[i]];
                k.put(self.layout.offs[i], self.layout.dims[i].width(), base);
                lens[i] = len as u8;
            }
            out.push((k, lens));
            // odometer
            let mut i = d;
            loop {
                if i == 0 {
                    return Ok(out);
                }
                i -= 1;
                idx[i] += 1;
                if idx[i] < per[i].len() {
                    break;
                }
                idx[i] = 0;
            }
        }
    }

    #[allow(clippy::needless_range_loop)]
    fn shape_mask(&self, lens: &[u8; MAX_DIMS]) -> K {
        let mut m = K::default();
        for i in 0..self.layout.dims.len() {
            let w = self.layout.dims[i].width();
            let l = lens[i] as u32;
            let v = if l == 0 {
                0
            } else {
                let full = if w >= 128 {
                    u128::MAX
                } else {
                    (1u128 << w) - 1
                };
                full & !((1u128 << (w - l)) - 1)
            };
            m.put(self.layout.offs[i], w, v);
        }
        m
    }

    fn shape_index(&mut self, lens: [u8; MAX_DIMS]) -> usize {
        if let Some(i) = self.shapes.iter().position(|s| s.lens == lens) {
            return i;
        }
        let mask = self.shape_mask(&lens);
        self.shapes.push(Shape {
            lens,
            mask,
            table: HashMap::with_hasher(Seeded(self.seed)),
        });
        // most specific shapes first (most likely hits for ban lists)
        self.shapes
            .sort_by_key(|s| Reverse(s.lens.iter().map(|&l| l as u32).sum::<u32>()));
        self.shapes.iter().position(|s| s.lens == lens).unwrap()
    }

    pub fn insert(&mut self, lo: K, hi: K, exp: u64, maxelem: usize) -> Result<Ins, BErr> {
        let existing = self.elems.get(&(lo, hi)).copied();
        if existing.is_none() && self.elems.len() >= maxelem {
            return Err(BErr::Full);
        }
        let boxes = self.decompose(lo, hi)?;
        let r = match existing {
            Some((id, _)) => {
                for (k, lens) in boxes {
                    let si = self.shape_index(lens);
                    match self.shapes[si].table.get_mut(&k) {
                        Some(Owners::One(oid, e)) if *oid == id => *e = exp,
                        Some(Owners::Many(v)) => {
                            for o in v.iter_mut() {
                                if o.0 == id {
                                    o.1 = exp;
                                }
                            }
                        }
                        _ => unreachable!("tss: element box missing"),
                    }
                }
                self.elems.insert((lo, hi), (id, exp));
                Ins::Refreshed
            }
            None => {
                let id = self.next_id;
                self.next_id += 1;
                for (k, lens) in boxes {
                    let si = self.shape_index(lens);
                    let t = &mut self.shapes[si].table;
                    match t.get_mut(&k) {
                        None => {
                            t.insert(k, Owners::One(id, exp));
                            self.entries += 1;
                        }
                        Some(o) => {
                            let mut v = match std::mem::replace(o, Owners::Many(Vec::new())) {
                                Owners::One(a, b) => vec![(a, b)],
                                Owners::Many(v) => v,
                            };
                            v.push((id, exp));
                            *o = Owners::Many(v);
                        }
                    }
                }
                self.elems.insert((lo, hi), (id, exp));
                Ins::New
            }
        };
        if exp != NEVER {
            self.heap.push(Reverse((exp, lo, hi)));
            if self.heap.len() > 2 * self.elems.len() + 1024 {
                self.heap = self
                    .elems
                    .iter()
                    .filter(|(_, &(_, e))| e != NEVER)
                    .map(|(&(l, h), &(_, e))| Reverse((e, l, h)))
                    .collect();
            }
        }
        Ok(r)
    }

    pub fn remove(&mut self, lo: K, hi: K) -> bool {
        // Some(None) = entry now empty; Some(Some(x)) = one owner left; None = unchanged
        fn return_empty(e: bool) -> Option<Option<(u64, u64)>> {
            if e {
                Some(None)
            } else {
                None
            }
        }
        let Some((id, _)) = self.elems.remove(&(lo, hi)) else {
            return false;
        };
        let boxes = self.decompose(lo, hi).expect("decomposed on insert");
        for (k, lens) in boxes {
            let Some(si) = self.shapes.iter().position(|s| s.lens == lens) else {
                continue;
            };
            let t = &mut self.shapes[si].table;
            let empty = match t.get_mut(&k) {
                Some(o) => {
                    let single = match o {
                        Owners::One(oid, _) => return_empty(*oid == id),
                        Owners::Many(v) => {
                            v.retain(|x| x.0 != id);
                            if v.len() == 1 {
                                Some(Some(v[0]))
                            } else {
                                None
                            }
                        }
                    };
                    match single {
                        Some(Some((a, b))) => {
                            *o = Owners::One(a, b);
                            false
                        }
                        Some(None) => true,
                        None => false,
                    }
                }
                None => false,
            };
            if empty {
                t.remove(&k);
                self.entries -= 1;
                if t.is_empty() {
                    self.shapes.remove(si);
                }
            }
        }
        true
    }

    #[inline]
    pub fn contains(&self, k: K, now: u64) -> bool {
        for s in &self.shapes {
            if let Some(o) = s.table.get(&k.and(s.mask)) {
                if o.live(now) {
                    return true;
                }
            }
        }
        false
    }

    pub fn get(&self, lo: K, hi: K) -> Option<u64> {
        self.elems.get(&(lo, hi)).map(|&(_, e)| e)
    }

    pub fn len(&self) -> usize {
        self.elems.len()
    }

    pub fn for_each(&self, f: &mut dyn FnMut(K, K, u64)) {
        let mut all: Vec<(K, K, u64)> = self
            .elems
            .iter()
            .map(|(&(l, h), &(_, e))| (l, h, e))
            .collect();
        all.sort_unstable_by_key(|&(l, h, _)| (l, h));
        for (l, h, e) in all {
            f(l, h, e);
        }
    }

    pub fn reap(&mut self, now: u64, budget: usize, f: &mut dyn FnMut(K, K)) -> usize {
        let mut n = 0;
        let mut steps = 0;
        while steps < budget {
            let Some(&Reverse((e, lo, hi))) = self.heap.peek() else {
                break;
            };
            if e > now {
                break;
            }
            self.heap.pop();
            steps += 1;
            if self.get(lo, hi) == Some(e) {
                self.remove(lo, hi);
                f(lo, hi);
                n += 1;
            }
        }
        n
    }

    pub fn clear(&mut self) {
        self.shapes.clear();
        self.elems.clear();
        self.heap.clear();
        self.entries = 0;
    }

    /// Number of distinct shapes (hash probes per lookup).
    pub fn shapes(&self) -> usize {
        self.shapes.len()
    }

    pub fn mem_bytes(&self) -> usize {
        let ent = std::mem::size_of::<K>() + std::mem::size_of::<Owners>() + 1;
        let el = 2 * std::mem::size_of::<K>() + 16 + 1;
        let mut t = 0;
        for s in &self.shapes {
            t += s.table.capacity() * ent + std::mem::size_of::<Shape<K>>();
        }
        t + self.elems.capacity() * el
            + self.heap.capacity() * (2 * std::mem::size_of::<K>() + 8)
            + std::mem::size_of::<Self>()
    }
}
