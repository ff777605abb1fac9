//! Interval set for one-dimensional networks and ranges (overlapping and
//! nested elements allowed).
//!
//! Two views:
//! * the elements, as given (`[lo, hi]` → expiry), bucketed by span class
//!   `c = bitlen(hi - lo)` so a stabbing query ("which elements cover p")
//!   is one B-tree range scan per non-empty class;
//! * the flattened lookup index: disjoint segments `lo → (hi, max expiry
//!   of the elements covering it)`. A point is a member iff the segment
//!   containing it has `max expiry > now`, so expiry costs one compare.
//!
//! Lookup O(log s) (s ≤ 2n+1 segments); insert/delete O(C·log n + k log k)
//! with C non-empty span classes and k elements overlapping the changed
//! range; bulk loads rebuild the index in one O(n log n) sweep.

use super::{BErr, Ins, Seeded, NEVER};
use crate::word::Word;
use std::cmp::Reverse;
use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BinaryHeap, HashMap};

#[derive(Clone)]
pub(crate) struct IntervalSet<K: Word> {
    classes: Vec<BTreeMap<(K, K), u64>>,
    /// Bit i set when class i is non-empty.
    nonempty: [u64; 3],
    len: usize,
    segs: BTreeMap<K, (K, u64)>,
    heap: BinaryHeap<Reverse<(u64, K, K)>>,
    bulk: bool,
    dirty: bool,
    /// Bulk mode: elements not yet merged into `classes` (merged in one
    /// O(n) B-tree bulk build per class at the end of the bulk).
    pending: HashMap<(K, K), u64, Seeded>,
}

/// Position with a carry bit so that `hi + 1` never overflows.
type Pos = (u8, u128);

#[inline]
fn succ(x: u128) -> Pos {
    if x == u128::MAX {
        (1, 0)
    } else {
        (0, x + 1)
    }
}

#[inline]
fn class_of(lo: u128, hi: u128) -> usize {
    (128 - (hi - lo).leading_zeros()) as usize
}

/// Flattens `(lo, hi, exp)` items into disjoint `(lo, hi, max exp)` pieces.
fn sweep(items: &mut [(u128, u128, u64)], out: &mut Vec<(u128, u128, u64)>) {
    if items.is_empty() {
        return;
    }
    let e0 = items[0].2;
    if items.iter().all(|x| x.2 == e0) {
        // one expiry (e.g. no timeouts): plain union of intervals
        items.sort_unstable_by_key(|x| x.0);
        let (mut lo, mut hi) = (items[0].0, items[0].1);
        for &(l, h, _) in &items[1..] {
            if hi != u128::MAX && l > hi + 1 {
                out.push((lo, hi, e0));
                lo = l;
                hi = h;
            } else if h > hi {
                hi = h;
            }
        }
        out.push((lo, hi, e0));
        return;
    }
    let mut ev: Vec<(Pos, bool, u64)> = Vec::with_capacity(items.len() * 2);
    for &(l, h, e) in items.iter() {
        ev.push(((0, l), true, e));
        ev.push((succ(h), false, e));
    }
    ev.sort_unstable_by_key(|&(p, start, _)| (p, start));
    let mut active: BTreeMap<u64, usize> = BTreeMap::new();
    let mut i = 0;
    while i < ev.len() {
        let pos = ev[i].0;
        while i < ev.len() && ev[i].0 == pos {
            let (_, start, e) = ev[i];
            if start {
                *active.entry(e).or_insert(0) += 1;
            } else {
                let c = active.get_mut(&e).unwrap();
                *c -= 1;
                if *c == 0 {
                    active.remove(&e);
                }
            }
            i += 1;
        }
        if let Some((&maxe, _)) = active.iter().next_back() {
            // piece from pos to next event position - 1
            let next = ev[i].0; // active non-empty => more events follow
            debug_assert!(pos.0 == 0);
            let lo = pos.1;
            let hi = if next.0 == 1 { u128::MAX } else { next.1 - 1 };
            match out.last_mut() {
                Some(last) if last.2 == maxe && last.1 != u128::MAX && last.1 + 1 == lo => {
                    last.1 = hi
                }
                _ => out.push((lo, hi, maxe)),
            }
        }
    }
}

impl<K: Word> IntervalSet<K> {
    pub fn new() -> Self {
        IntervalSet {
            classes: (0..=128).map(|_| BTreeMap::new()).collect(),
            nonempty: [0; 3],
            len: 0,
            segs: BTreeMap::new(),
            heap: BinaryHeap::new(),
            bulk: false,
            dirty: false,
            pending: HashMap::with_hasher(Seeded(super::random_seed())),
        }
    }

    fn k(v: u128) -> K {
        K::from_u128(v)
    }

    /// All elements overlapping `[a, b]`, clipped to it.
    fn gather(&self, a: u128, b: u128, out: &mut Vec<(u128, u128, u64)>) {
        for (w, &bits) in self.nonempty.iter().enumerate() {
            let mut m = bits;
            while m != 0 {
                let c = w * 64 + m.trailing_zeros() as usize;
                m &= m - 1;
                let lower = if c >= 128 {
                    0
                } else {
                    a.saturating_sub((1u128 << c) - 1)
                };
                let range = (Self::k(lower), K::default())..=(Self::k(b), Self::k(u128::MAX));
                for (&(l, h), &e) in self.classes[c].range(range) {
                    let (l, h) = (l.to_u128(), h.to_u128());
                    if h >= a {
                        out.push((l.max(a), h.min(b), e));
                    }
                }
            }
        }
    }

    /// Recomputes the lookup index over `[a, b]` from the elements.
    fn recompute(&mut self, a: u128, b: u128) {
        if self.bulk {
            self.dirty = true;
            return;
        }
        let mut items = Vec::new();
        self.gather(a, b, &mut items);
        // cut existing segments at a and b
        if let Some((&lo, &(hi, e))) = self.segs.range(..Self::k(a)).next_back() {
            if hi.to_u128() >= a {
                self.segs.insert(lo, (Self::k(a - 1), e));
                if hi.to_u128() > b {
                    self.segs.insert(Self::k(b + 1), (hi, e));
                }
            }
        }
        let inside: Vec<K> = self
            .segs
            .range(Self::k(a)..=Self::k(b))
            .map(|(&l, _)| l)
            .collect();
        for l in inside {
            let (hi, e) = self.segs.remove(&l).unwrap();
            if hi.to_u128() > b {
                self.segs.insert(Self::k(b + 1), (hi, e));
            }
        }
        let mut pieces = Vec::new();
        sweep(&mut items, &mut pieces);
        for (l, h, e) in pieces {
            self.segs.insert(Self::k(l), (Self::k(h), e));
        }
        self.merge_at(a);
        if b != u128::MAX {
            self.merge_at(b + 1);
        }
    }

    /// Raises the max-expiry over `[a, b]` to at least `e` (a new element, or
    /// a refresh that extends): touches only the segments overlapping `[a, b]`.
    fn raise(&mut self, a: u128, b: u128, e: u64) {
        if self.bulk {
            self.dirty = true;
            return;
        }
        let mut ov: Vec<(u128, u128, u64)> = Vec::new();
        if let Some((&lo, &(hi, se))) = self.segs.range(..Self::k(a)).next_back() {
            if hi.to_u128() >= a {
                ov.push((lo.to_u128(), hi.to_u128(), se));
            }
        }
        ov.extend(
            self.segs
                .range(Self::k(a)..=Self::k(b))
                .map(|(&l, &(h, se))| (l.to_u128(), h.to_u128(), se)),
        );
        if ov.len() == 1 && ov[0].0 <= a && ov[0].1 >= b && ov[0].2 >= e {
            return; // already covered at least as long
        }
        for &(l, _, _) in &ov {
            self.segs.remove(&Self::k(l));
        }
        let mut pieces: Vec<(u128, u128, u64)> = Vec::with_capacity(ov.len() * 2 + 1);
        fn push(p: &mut Vec<(u128, u128, u64)>, l: u128, h: u128, x: u64) {
            if let Some(last) = p.last_mut() {
                if last.2 == x && last.1 != u128::MAX && last.1 + 1 == l {
                    last.1 = h;
                    return;
                }
            }
            p.push((l, h, x));
        }
        let mut cur = Some(a);
        for &(l, h, se) in &ov {
            if l < a {
                push(&mut pieces, l, a - 1, se);
            }
            let (ol, oh) = (l.max(a), h.min(b));
            if let Some(c) = cur {
                if ol > c {
                    push(&mut pieces, c, ol - 1, e);
                }
            }
            push(&mut pieces, ol, oh, se.max(e));
            if h > b {
                push(&mut pieces, b + 1, h, se);
            }
            cur = oh.checked_add(1);
        }
        if let Some(c) = cur {
            if c <= b {
                push(&mut pieces, c, b, e);
            }
        }
        let first = pieces[0].0;
        let last = pieces[pieces.len() - 1].1;
        for (l, h, x) in pieces {
            self.segs.insert(Self::k(l), (Self::k(h), x));
        }
        self.merge_at(first);
        if last != u128::MAX {
            self.merge_at(last + 1);
        }
    }

    /// Merges the segment starting at `x` into its left neighbour when adjacent with equal expiry.
    fn merge_at(&mut self, x: u128) {
        if x == 0 {
            return;
        }
        let Some(&(hi, e)) = self.segs.get(&Self::k(x)) else {
            return;
        };
        if let Some((&pl, &(ph, pe))) = self.segs.range(..Self::k(x)).next_back() {
            if pe == e && ph.to_u128() == x - 1 {
                self.segs.remove(&Self::k(x));
                self.segs.insert(pl, (hi, e));
            }
        }
    }

    /// Merges bulk-pending elements into the class maps.
    fn merge_pending(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let mut v: Vec<(usize, K, K, u64)> = self
            .pending
            .drain()
            .map(|((lo, hi), e)| (class_of(lo.to_u128(), hi.to_u128()), lo, hi, e))
            .collect();
        v.sort_unstable_by_key(|x| (x.0, x.1, x.2));
        let mut i = 0;
        while i < v.len() {
            let c = v[i].0;
            let mut j = i;
            while j < v.len() && v[j].0 == c {
                j += 1;
            }
            let mut tmp: BTreeMap<(K, K), u64> =
                v[i..j].iter().map(|x| ((x.1, x.2), x.3)).collect();
            if self.classes[c].is_empty() {
                self.classes[c] = tmp;
            } else {
                self.classes[c].append(&mut tmp);
            }
            self.nonempty[c / 64] |= 1 << (c % 64);
            i = j;
        }
    }

    pub fn insert(&mut self, lo: K, hi: K, exp: u64, maxelem: usize) -> Result<Ins, BErr> {
        let (l, h) = (lo.to_u128(), hi.to_u128());
        let c = class_of(l, h);
        if self.bulk {
            let known =
                self.pending.contains_key(&(lo, hi)) || self.classes[c].contains_key(&(lo, hi));
            if !known && self.len >= maxelem {
                return Err(BErr::Full);
            }
            self.pending.insert((lo, hi), exp);
            if exp != NEVER {
                self.heap.push(Reverse((exp, lo, hi)));
            }
            self.dirty = true;
            if known {
                return Ok(Ins::Refreshed);
            }
            self.len += 1;
            return Ok(Ins::New);
        }
        let mut lowered = false;
        let r = match self.classes[c].entry((lo, hi)) {
            Entry::Occupied(mut o) => {
                lowered = exp < *o.get();
                *o.get_mut() = exp;
                Ins::Refreshed
            }
            Entry::Vacant(v) => {
                if self.len >= maxelem {
                    return Err(BErr::Full);
                }
                v.insert(exp);
                self.nonempty[c / 64] |= 1 << (c % 64);
                self.len += 1;
                Ins::New
            }
        };
        if exp != NEVER {
            self.heap.push(Reverse((exp, lo, hi)));
            if self.heap.len() > 2 * self.len + 1024 {
                self.rebuild_heap();
            }
        }
        if lowered {
            self.recompute(l, h);
        } else {
            self.raise(l, h, exp);
        }
        Ok(r)
    }

    fn rebuild_heap(&mut self) {
        let mut v = Vec::new();
        for c in &self.classes {
            for (&(l, h), &e) in c {
                if e != NEVER {
                    v.push(Reverse((e, l, h)));
                }
            }
        }
        self.heap = BinaryHeap::from(v);
    }

    pub fn remove(&mut self, lo: K, hi: K) -> bool {
        self.merge_pending();
        let (l, h) = (lo.to_u128(), hi.to_u128());
        if l > h {
            return false;
        }
        let c = class_of(l, h);
        if self.classes[c].remove(&(lo, hi)).is_none() {
            return false;
        }
        if self.classes[c].is_empty() {
            self.nonempty[c / 64] &= !(1 << (c % 64));
        }
        self.len -= 1;
        self.recompute(l, h);
        true
    }

    #[inline]
    pub fn contains(&self, k: K, now: u64) -> bool {
        match self.segs.range(..=k).next_back() {
            Some((_, &(hi, e))) => hi >= k && e > now,
            None => false,
        }
    }

    pub fn get(&self, lo: K, hi: K) -> Option<u64> {
        let (l, h) = (lo.to_u128(), hi.to_u128());
        if l > h {
            return None;
        }
        if let Some(&e) = self.pending.get(&(lo, hi)) {
            return Some(e);
        }
        self.classes[class_of(l, h)].get(&(lo, hi)).copied()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn for_each(&self, f: &mut dyn FnMut(K, K, u64)) {
        debug_assert!(self.pending.is_empty(), "for_each during a bulk load");
        // in (lo, hi) order across classes
        let mut all: Vec<(K, K, u64)> = Vec::with_capacity(self.len);
        for c in &self.classes {
            all.extend(c.iter().map(|(&(l, h), &e)| (l, h, e)));
        }
        all.sort_unstable_by_key(|&(l, h, _)| (l, h));
        for (l, h, e) in all {
            f(l, h, e);
        }
    }

    pub fn reap(&mut self, now: u64, budget: usize, f: &mut dyn FnMut(K, K)) -> usize {
        self.merge_pending();
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
        for c in &mut self.classes {
            c.clear();
        }
        self.nonempty = [0; 3];
        self.len = 0;
        self.segs.clear();
        self.heap.clear();
        self.pending.clear();
        self.dirty = false;
    }

    pub fn begin_bulk(&mut self) {
        self.bulk = true;
    }

    pub fn end_bulk(&mut self) {
        self.bulk = false;
        self.merge_pending();
        if self.dirty {
            self.dirty = false;
            let mut items = Vec::with_capacity(self.len);
            for c in &self.classes {
                items.extend(c.iter().map(|(&(l, h), &e)| (l.to_u128(), h.to_u128(), e)));
            }
            let mut pieces = Vec::new();
            sweep(&mut items, &mut pieces);
            self.segs = pieces
                .into_iter()
                .map(|(l, h, e)| (Self::k(l), (Self::k(h), e)))
                .collect();
        }
    }

    /// Number of lookup segments.
    #[allow(dead_code)]
    pub fn segments(&self) -> usize {
        self.segs.len()
    }

    pub fn mem_bytes(&self) -> usize {
        // B-tree nodes: ~ entry size / 0.7 fill, plus node headers
        let el = (2 * std::mem::size_of::<K>() + 8) * self.len;
        let sg = (2 * std::mem::size_of::<K>() + 8) * self.segs.len();
        let hp = (2 * std::mem::size_of::<K>() + 8) * self.heap.capacity();
        (el + sg) * 10 / 7 + hp + std::mem::size_of::<Self>() + self.classes.len() * 24
    }
}
