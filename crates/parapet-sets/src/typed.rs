//! The storage of a set for one packed key width: the backend, the
//! per-element extras, and all-or-nothing batches. [`Inner`] picks the
//! narrowest word that holds the key; the `typed!` macro dispatches on it.

use crate::backend::{
    bitmap::Bitmap, hash::HashTable, interval::IntervalSet, tss::Tss, BErr, Backend, Ins, Seeded,
    NEVER,
};
use crate::desc::{BackendKind, SetDesc, FIXED_HASH_LIMIT, MAX_EXPAND};
use crate::element::{Element, StoredElement};
use crate::key::{Layout, LookupKey, MAX_DIMS};
use crate::word::{Wide, Word};
use parapet_model::Policy;
use std::collections::HashMap;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Extra {
    pub packets: u64,
    pub bytes: u64,
    pub comment: Option<Box<str>>,
    /// The element's own timeout (ms) when it differs from the set default.
    pub timeout: Option<u64>,
}

#[derive(Clone)]
pub(crate) struct Typed<K: Word> {
    pub layout: Layout,
    pub backend: Backend<K>,
    pub extras: HashMap<(K, K), Extra, Seeded>,
    exact: bool,
}

pub(crate) enum Inner {
    W16(Typed<u16>),
    W32(Typed<u32>),
    W64(Typed<u64>),
    W128(Typed<u128>),
    Wide(Typed<Wide>),
}

impl Clone for Inner {
    fn clone(&self) -> Self {
        match self {
            Inner::W16(t) => Inner::W16(t.clone()),
            Inner::W32(t) => Inner::W32(t.clone()),
            Inner::W64(t) => Inner::W64(t.clone()),
            Inner::W128(t) => Inner::W128(t.clone()),
            Inner::Wide(t) => Inner::Wide(t.clone()),
        }
    }
}

macro_rules! typed {
    ($inner:expr, $t:ident => $e:expr) => {
        match $inner {
            Inner::W16($t) => $e,
            Inner::W32($t) => $e,
            Inner::W64($t) => $e,
            Inner::W128($t) => $e,
            Inner::Wide($t) => $e,
        }
    };
}
pub(crate) use typed;

pub(crate) fn make_typed<K: Word>(desc: &SetDesc, kind: BackendKind) -> Typed<K> {
    let layout = Layout::new(&desc.dims);
    let maxe = desc.max_elements();
    let backend = match kind {
        BackendKind::Bitmap => {
            let (a, b) = desc.domain().expect("bitmap domain");
            Backend::Bitmap(Bitmap::new(a, (b - a + 1) as usize, desc.timeouts))
        }
        BackendKind::HashFixed => {
            let n = desc.size.unwrap_or(maxe).min(maxe).min(FIXED_HASH_LIMIT);
            Backend::Hash(HashTable::new(n, false, 4, desc.timeouts))
        }
        BackendKind::HashGrowable => {
            let load = if desc.policy == Policy::Memory { 7 } else { 4 };
            let hint = desc
                .size
                .or(desc.ipset.as_ref().and_then(|i| i.hashsize))
                .unwrap_or(16)
                .min(maxe)
                .min(1 << 20);
            Backend::Hash(HashTable::new(hint, true, load, desc.timeouts))
        }
        BackendKind::Interval => Backend::Interval(IntervalSet::new()),
        BackendKind::TupleSpace => Backend::Tss(Tss::new(layout.clone())),
    };
    let exact = matches!(
        kind,
        BackendKind::Bitmap | BackendKind::HashFixed | BackendKind::HashGrowable
    );
    Typed {
        layout,
        backend,
        extras: HashMap::with_hasher(Seeded(crate::backend::random_seed())),
        exact,
    }
}

/// Undo record for all-or-nothing batches: an entry's expiry and extras
/// (own timeout, comment, counters) before the batch touched it.
pub(crate) type Undo<K> = Vec<(K, K, Option<u64>, Option<Extra>)>;

impl<K: Word> Typed<K> {
    /// Inserts one element (expanding ranges for exact backends).
    #[allow(clippy::too_many_arguments)]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn insert(
        &mut self,
        el: &Element,
        exp: u64,
        maxelem: usize,
        now: u64,
        extra: bool,
        custom: Option<u64>,
        undo: Option<&mut Undo<K>>,
    ) -> Result<usize, (BErr, usize)> {
        let mut undo = undo;
        let mut added = 0usize;
        let mut one = |t: &mut Self, lo: K, hi: K| -> Result<(), BErr> {
            if let Some(u) = undo.as_deref_mut() {
                let old = t.backend.get(lo, hi);
                let extra = old.and_then(|_| t.extras.get(&(lo, hi)).cloned());
                u.push((lo, hi, old, extra));
            }
            let r = match t.backend.insert(lo, hi, exp, maxelem) {
                Err(BErr::Full) => {
                    t.reap(now, 1024);
                    t.backend.insert(lo, hi, exp, maxelem)
                }
                r => r,
            };
            match r {
                Ok(ins) => {
                    if ins == Ins::New {
                        added += 1;
                    }
                    if extra || custom.is_some() || !t.extras.is_empty() {
                        let x = t.extras.entry((lo, hi)).or_default();
                        if ins == Ins::New {
                            *x = Extra::default();
                        }
                        if let Some(c) = &el.comment {
                            x.comment = Some(c.as_str().into());
                        }
                        if let Some((p, b)) = el.counters {
                            x.packets = p;
                            x.bytes = b;
                        }
                        x.timeout = custom;
                        if !extra && custom.is_none() {
                            t.extras.remove(&(lo, hi));
                        }
                    }
                    Ok(())
                }
                Err(e) => {
                    if let Some(u) = undo.as_deref_mut() {
                        u.pop();
                    }
                    Err(e)
                }
            }
        };
        let d = self.layout.dims.len();
        let r = el.ranges();
        if !self.exact || r.iter().all(|&(l, h)| l == h) {
            let lo: K = self.layout.pack_end(r, false);
            let hi: K = if self.exact {
                lo
            } else {
                self.layout.pack_end(r, true)
            };
            one(self, lo, hi).map_err(|e| (e, 0))?;
            return Ok(added);
        }
        // exact backend, ranges: expand points
        let mut count: u128 = 1;
        for &(l, h) in r {
            count = count.saturating_mul(h - l + 1);
        }
        if count > MAX_EXPAND {
            return Err((BErr::TooComplex(count.min(usize::MAX as u128) as usize), 1));
        }
        let mut cur: Vec<u128> = r.iter().map(|x| x.0).collect();
        loop {
            let k: K = self.layout.pack(&cur);
            one(self, k, k).map_err(|e| (e, 0))?;
            let mut i = d;
            loop {
                if i == 0 {
                    return Ok(added);
                }
                i -= 1;
                if cur[i] < r[i].1 {
                    cur[i] += 1;
                    break;
                }
                cur[i] = r[i].0;
            }
        }
    }

    pub(crate) fn for_each_key(
        &self,
        el: &Element,
        f: &mut dyn FnMut(&mut Vec<(K, K)>),
    ) -> Result<(), ()> {
        let r = el.ranges();
        let mut v = Vec::new();
        if !self.exact || r.iter().all(|&(l, h)| l == h) {
            let lo: K = self.layout.pack_end(r, false);
            let hi: K = if self.exact {
                lo
            } else {
                self.layout.pack_end(r, true)
            };
            v.push((lo, hi));
        } else {
            let mut count: u128 = 1;
            for &(l, h) in r {
                count = count.saturating_mul(h - l + 1);
            }
            if count > MAX_EXPAND {
                return Err(());
            }
            let d = r.len();
            let mut cur: Vec<u128> = r.iter().map(|x| x.0).collect();
            'outer: loop {
                let k: K = self.layout.pack(&cur);
                v.push((k, k));
                let mut i = d;
                loop {
                    if i == 0 {
                        break 'outer;
                    }
                    i -= 1;
                    if cur[i] < r[i].1 {
                        cur[i] += 1;
                        break;
                    }
                    cur[i] = r[i].0;
                }
            }
        }
        f(&mut v);
        Ok(())
    }

    pub(crate) fn remove(&mut self, el: &Element) -> Result<usize, ()> {
        let mut n = 0;
        let mut keys = Vec::new();
        self.for_each_key(el, &mut |v| keys = std::mem::take(v))?;
        for (lo, hi) in keys {
            if self.backend.remove(lo, hi) {
                n += 1;
                self.extras.remove(&(lo, hi));
            }
        }
        Ok(n)
    }

    pub(crate) fn reap(&mut self, now: u64, budget: usize) -> usize {
        let extras = &mut self.extras;
        let has = !extras.is_empty();
        self.backend.reap(now, budget, &mut |lo, hi| {
            if has {
                extras.remove(&(lo, hi));
            }
        })
    }

    pub(crate) fn undo(&mut self, u: Undo<K>) {
        for (lo, hi, old, extra) in u.into_iter().rev() {
            match old {
                None => {
                    self.backend.remove(lo, hi);
                    self.extras.remove(&(lo, hi));
                }
                Some(e) => {
                    let _ = self.backend.insert(lo, hi, e, usize::MAX);
                    match extra {
                        Some(x) => self.extras.insert((lo, hi), x),
                        None => self.extras.remove(&(lo, hi)),
                    };
                }
            }
        }
    }

    pub(crate) fn elements(
        &self,
        now: u64,
        timeouts: bool,
        extra_counters: bool,
    ) -> Vec<StoredElement> {
        let mut out = Vec::with_capacity(self.backend.len());
        self.each_element(now, timeouts, extra_counters, &mut |e| out.push(e));
        out
    }

    pub(crate) fn each_element(
        &self,
        now: u64,
        timeouts: bool,
        extra_counters: bool,
        f: &mut dyn FnMut(StoredElement),
    ) {
        let d = self.layout.dims.len();
        let mut raw: Vec<(K, K, u64)> = Vec::with_capacity(self.backend.len());
        self.backend.for_each(&mut |lo, hi, exp| {
            if exp > now {
                raw.push((lo, hi, exp));
            }
        });
        // packed order = lexicographic order of the dimensions
        raw.sort_unstable_by_key(|a| (a.0, a.1));
        let has_extras = !self.extras.is_empty();
        raw.into_iter()
            .map(|(lo, hi, exp)| {
                let mut ranges = [(0u128, 0u128); MAX_DIMS];
                for (i, r) in ranges.iter_mut().enumerate().take(d) {
                    *r = (self.layout.unpack(&lo, i), self.layout.unpack(&hi, i));
                }
                let remaining = if exp == NEVER { None } else { Some(exp - now) };
                let mut el = Element {
                    ranges,
                    dims: d as u8,
                    timeout: None,
                    expires: None,
                    comment: None,
                    counters: None,
                };
                if has_extras {
                    if let Some(x) = self.extras.get(&(lo, hi)) {
                        el.comment = x.comment.as_ref().map(|c| c.to_string());
                        if extra_counters {
                            el.counters = Some((x.packets, x.bytes));
                        }
                        if timeouts {
                            el.timeout = x.timeout;
                        }
                    }
                }
                StoredElement {
                    element: el,
                    remaining,
                }
            })
            .for_each(f)
    }

    #[inline]
    pub(crate) fn lookup(&self, key: &LookupKey, now: u64) -> bool {
        match self.layout.pack_key::<K>(key) {
            Some(k) => self.backend.contains(k, now),
            None => false,
        }
    }
}
