//! A named, typed set: creation from a description, adds and deletes
//! (all or nothing), lookups, timeouts and listing.

use crate::backend::{BErr, Backend, NEVER};
use crate::desc::{choose_backend, BackendKind, Explain, SetDesc};
use crate::element::{Element, StoredElement};
use crate::key::{KeyPart, LookupKey, MAX_DIMS};
use crate::set_error::SetError;
use crate::typed::{make_typed, typed, Inner};
use std::fmt;

/// A named, typed set.
///
/// ```
/// use parapet_sets::{Set, SetDesc, KeyPart, Element, LookupKey, Family};
/// let mut s = Set::new("ban", SetDesc::new(&[KeyPart::Ipv4Addr]).interval()).unwrap();
/// s.add(&Element::new(&[(0x0a00_0000, 0x0aff_ffff)]), 0).unwrap(); // 10.0.0.0/8
/// assert!(s.contains(&LookupKey::new().addr(Family::V4, 0x0a01_0203), 0));
/// assert!(!s.contains(&LookupKey::new().addr(Family::V4, 0x0b00_0000), 0));
/// println!("{}", s.explain());
/// ```
#[derive(Clone)]
pub struct Set {
    name: String,
    desc: SetDesc,
    kind: BackendKind,
    reasons: Vec<String>,
    pub(crate) inner: Inner,
}

impl fmt::Debug for Set {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Set")
            .field("name", &self.name)
            .field("desc", &self.desc)
            .field("backend", &self.kind)
            .field("len", &self.len())
            .finish()
    }
}

impl Set {
    /// Creates an empty set; the backend is chosen from the description.
    pub fn new(name: &str, desc: SetDesc) -> Result<Set, SetError> {
        if desc.dims.is_empty() || desc.dims.len() > MAX_DIMS {
            return Err(SetError::InvalidDesc(format!(
                "a key has 1 to {MAX_DIMS} dimensions, not {}",
                desc.dims.len()
            )));
        }
        if let Some((a, b)) = desc.range {
            if desc.dims.len() != 1 || a > b || b > desc.dims[0].max() || b - a >= 65536 {
                return Err(SetError::InvalidDesc(
                    "a bitmap range covers at most 65536 values of one dimension".into(),
                ));
            }
        }
        let (kind, reasons) = choose_backend(&desc)?;
        let bits = desc.key_bits();
        let inner = if bits <= 16 {
            Inner::W16(make_typed(&desc, kind))
        } else if bits <= 32 {
            Inner::W32(make_typed(&desc, kind))
        } else if bits <= 64 {
            Inner::W64(make_typed(&desc, kind))
        } else if bits <= 128 {
            Inner::W128(make_typed(&desc, kind))
        } else {
            Inner::Wide(make_typed(&desc, kind))
        };
        Ok(Set {
            name: name.to_string(),
            desc,
            kind,
            reasons,
            inner,
        })
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.name
    }
    pub(crate) fn set_name(&mut self, n: &str) {
        self.name = n.to_string();
    }
    pub(crate) fn set_name_pub(&mut self, n: &str) {
        self.set_name(n)
    }
    /// The description.
    pub fn desc(&self) -> &SetDesc {
        &self.desc
    }
    /// Key dimensions.
    pub fn key_dims(&self) -> &[KeyPart] {
        &self.desc.dims
    }
    /// The chosen backend.
    pub fn backend(&self) -> BackendKind {
        self.kind
    }
    /// Stored elements, including expired ones not reaped yet.
    pub fn len(&self) -> usize {
        typed!(&self.inner, t => t.backend.len())
    }
    /// Whether no element is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The effective maximum number of elements.
    pub fn maxelem(&self) -> usize {
        self.desc.max_elements()
    }
    /// Approximate heap memory in bytes.
    pub fn memory_bytes(&self) -> usize {
        typed!(&self.inner, t => t.backend.mem_bytes() + t.extras.capacity() * (2 * std::mem::size_of_val(&t.layout.total) + 48))
    }
    /// Why this backend.
    pub fn explain(&self) -> Explain {
        let mut flags = Vec::new();
        if self.desc.interval {
            flags.push("interval");
        }
        if self.desc.timeouts {
            flags.push("timeout");
        }
        let mut reasons = self.reasons.clone();
        let w = match &self.inner {
            Inner::W16(_) => 16,
            Inner::W32(_) => 32,
            Inner::W64(_) => 64,
            Inner::W128(_) => 128,
            Inner::Wide(_) => 512,
        };
        reasons.push(format!(
            "key packed into a {w}-bit word ({} bits used)",
            self.desc.key_bits()
        ));
        if let Some(s) = typed!(&self.inner, t => if let Backend::Tss(x) = &t.backend { Some(x.shapes()) } else { None })
        {
            reasons.push(format!("currently {s} shapes (hash probes per lookup)"));
        }
        Explain {
            set: self.name.clone(),
            key: self.desc.type_name(),
            flags: if flags.is_empty() {
                String::new()
            } else {
                format!("; flags {}", flags.join(","))
            },
            policy: self.desc.policy,
            backend: self.kind,
            complexity: self.kind.complexity(),
            reasons,
            elements: self.len(),
            maxelem: self.maxelem(),
            memory_bytes: self.memory_bytes(),
        }
    }

    fn check_elem(&self, el: &Element) -> Result<(), SetError> {
        if el.dims as usize != self.desc.dims.len() {
            return Err(SetError::TypeMismatch {
                set: self.name.clone(),
                message: format!(
                    "element has {} dimensions, type {} has {}",
                    el.dims,
                    self.desc.type_name(),
                    self.desc.dims.len()
                ),
            });
        }
        for (i, &(l, h)) in el.ranges().iter().enumerate() {
            if l > h || h > self.desc.dims[i].max() {
                return Err(SetError::TypeMismatch {
                    set: self.name.clone(),
                    message: format!("value out of range for {}", self.desc.dims[i]),
                });
            }
        }
        if (el.timeout.is_some_and(|t| t != 0) || el.expires.is_some()) && !self.desc.timeouts {
            return Err(SetError::TimeoutNotSupported {
                set: self.name.clone(),
            });
        }
        Ok(())
    }

    fn custom_timeout(&self, el: &Element) -> Option<u64> {
        match el.timeout {
            // ipset text carries remaining time, not the element's timeout: not kept
            Some(t)
                if self.desc.timeouts
                    && t != self.desc.default_timeout
                    && self.desc.ipset.is_none() =>
            {
                Some(t)
            }
            _ => None,
        }
    }

    fn stamp(&self, el: &Element, now: u64) -> u64 {
        if !self.desc.timeouts {
            return NEVER;
        }
        let t = el
            .expires
            .or(el.timeout)
            .unwrap_or(self.desc.default_timeout);
        if t == 0 {
            NEVER
        } else {
            now.saturating_add(t)
        }
    }

    fn map_err(&self, e: BErr, el: &Element) -> SetError {
        match e {
            BErr::Full => SetError::Full {
                set: self.name.clone(),
                maxelem: self.maxelem(),
            },
            BErr::OutOfRange => SetError::OutOfRange {
                set: self.name.clone(),
                element: el.key_text(&self.desc.dims),
            },
            BErr::TooComplex(n) if self.kind == BackendKind::TupleSpace => SetError::TooComplex {
                set: self.name.clone(),
                element: el.key_text(&self.desc.dims),
                boxes: n,
            },
            BErr::TooComplex(_) => SetError::RangeTooLarge {
                set: self.name.clone(),
                element: el.key_text(&self.desc.dims),
            },
        }
    }

    /// Adds (or refreshes: timeout, comment, counters — like `ipset -exist`)
    /// one element at time `now` (ms). Returns the number of new elements
    /// (0 when it only refreshed). A full set is an error, never a silent drop.
    pub fn add(&mut self, el: &Element, now: u64) -> Result<usize, SetError> {
        self.check_elem(el)?;
        if self.kind != BackendKind::Interval
            && self.kind != BackendKind::TupleSpace
            && el.ranges().iter().any(|&(l, h)| l != h)
        {
            // a range expands to many points: all or nothing
            return self.add_many(std::slice::from_ref(el), now);
        }
        let exp = self.stamp(el, now);
        let custom = self.custom_timeout(el);
        let maxe = self.maxelem();
        let extra = self.desc.counters || self.desc.comment;
        let timeouts = self.desc.timeouts;
        let r = typed!(&mut self.inner, t => {
            if timeouts {
                t.reap(now, 2);
            }
            t.insert(el, exp, maxe, now, extra, custom, None)
        });
        r.map_err(|(e, _)| self.map_err(e, el))
    }

    /// Adds many elements in one call; idempotent (re-adding refreshes).
    /// All-or-nothing: on error (e.g. the set fills up) the set is left as before.
    /// The same state as [`Set::add`] of each element in turn when that
    /// succeeds (`tests/prop.rs` checks it).
    pub fn add_many(&mut self, els: &[Element], now: u64) -> Result<usize, SetError> {
        for el in els {
            self.check_elem(el)?;
        }
        if self.cannot_fail(els) {
            return Ok(self.add_points(els, now));
        }
        let maxe = self.maxelem();
        let extra = self.desc.counters || self.desc.comment;
        let timeouts = self.desc.timeouts;
        let bulk = els.len() >= 64 && els.len() * 4 >= self.len();
        let stamps: Vec<u64> = els.iter().map(|e| self.stamp(e, now)).collect();
        let customs: Vec<Option<u64>> = els.iter().map(|e| self.custom_timeout(e)).collect();
        let mut failed: Option<(BErr, usize)> = None;
        let mut added = 0;
        typed!(&mut self.inner, t => {
            if timeouts {
                t.reap(now, 2 * els.len().min(1 << 16));
            }
            if bulk {
                t.backend.begin_bulk();
            }
            let mut undo = Vec::new();
            for (i, el) in els.iter().enumerate() {
                match t.insert(el, stamps[i], maxe, now, extra, customs[i], Some(&mut undo)) {
                    Ok(n) => added += n,
                    Err((e, _)) => {
                        failed = Some((e, i));
                        break;
                    }
                }
            }
            if failed.is_some() {
                t.undo(undo);
            }
            if bulk {
                t.backend.end_bulk();
            }
        });
        match failed {
            Some((e, i)) => Err(self.map_err(e, &els[i])),
            None => Ok(added),
        }
    }

    /// Whether adding `els` (already checked) cannot fail: a growable hash
    /// (a fixed one may refuse before `maxelem`; intervals and tuple
    /// spaces may split entries), single values (one stored entry each),
    /// and room for all of them even if every one is new. Such a batch
    /// needs no undo log, which costs a second hash probe per element.
    fn cannot_fail(&self, els: &[Element]) -> bool {
        self.kind == BackendKind::HashGrowable
            && self.len().saturating_add(els.len()) <= self.maxelem()
            && els.iter().all(|e| e.ranges().iter().all(|(l, h)| l == h))
    }

    /// The batch of [`Set::cannot_fail`]: one reap and one pass, no undo log.
    fn add_points(&mut self, els: &[Element], now: u64) -> usize {
        let maxe = self.maxelem();
        let extra = self.desc.counters || self.desc.comment;
        let timeouts = self.desc.timeouts;
        let bulk = els.len() >= 64 && els.len() * 4 >= self.len();
        let mut added = 0;
        let stamped: Vec<(u64, Option<u64>)> = els
            .iter()
            .map(|e| (self.stamp(e, now), self.custom_timeout(e)))
            .collect();
        typed!(&mut self.inner, t => {
            if timeouts {
                t.reap(now, 2 * els.len().min(1 << 16));
            }
            if bulk {
                t.backend.begin_bulk();
            }
            for (el, &(exp, custom)) in els.iter().zip(&stamped) {
                // cannot fail: checked, one entry each, room for all
                let r = t.insert(el, exp, maxe, now, extra, custom, None);
                debug_assert!(r.is_ok(), "a batch that cannot fail failed");
                added += r.unwrap_or(0);
            }
            if bulk {
                t.backend.end_bulk();
            }
        });
        added
    }

    /// Adds in bulk mode without an undo log (used by loaders on staged sets).
    pub(crate) fn add_staged(&mut self, el: &Element, now: u64) -> Result<usize, SetError> {
        self.check_elem(el)?;
        let exp = self.stamp(el, now);
        let maxe = self.maxelem();
        let extra = self.desc.counters || self.desc.comment;
        let custom = self.custom_timeout(el);
        let r = typed!(&mut self.inner, t => t.insert(el, exp, maxe, now, extra, custom, None));
        r.map_err(|(e, _)| self.map_err(e, el))
    }

    pub(crate) fn begin_bulk(&mut self) {
        typed!(&mut self.inner, t => t.backend.begin_bulk())
    }
    pub(crate) fn end_bulk(&mut self) {
        typed!(&mut self.inner, t => t.backend.end_bulk())
    }

    /// Deletes one element (exactly as added: same prefix/range). Returns
    /// how many stored elements were removed (0 if absent — not an error).
    pub fn del(&mut self, el: &Element) -> Result<usize, SetError> {
        self.check_elem(el)?;
        let r = typed!(&mut self.inner, t => t.remove(el));
        r.map_err(|_| SetError::RangeTooLarge {
            set: self.name.clone(),
            element: el.key_text(&self.desc.dims),
        })
    }

    /// Deletes many elements; idempotent.
    pub fn del_many(&mut self, els: &[Element]) -> Result<usize, SetError> {
        for el in els {
            self.check_elem(el)?;
        }
        let bulk = els.len() >= 64 && els.len() * 4 >= self.len();
        if bulk {
            self.begin_bulk();
        }
        let mut n = 0;
        let mut err = None;
        for el in els {
            match self.del(el) {
                Ok(k) => n += k,
                Err(e) => {
                    err = Some(e);
                    break;
                }
            }
        }
        if bulk {
            self.end_bulk();
        }
        match err {
            Some(e) => Err(e),
            None => Ok(n),
        }
    }

    /// Removes every element.
    pub fn flush(&mut self) {
        typed!(&mut self.inner, t => {
            t.backend.clear();
            t.extras.clear();
        })
    }

    /// Whether the packet key is a (live) member at time `now`. A key of the
    /// wrong shape or address family is not a member.
    #[inline]
    pub fn contains(&self, key: &LookupKey, now: u64) -> bool {
        typed!(&self.inner, t => t.lookup(key, now))
    }

    /// Reaps up to `budget` expired elements (bounded work). Returns how many were removed.
    pub fn reap(&mut self, now: u64, budget: usize) -> usize {
        typed!(&mut self.inner, t => t.reap(now, budget))
    }

    /// Live elements at `now`, in key order.
    pub fn elements(&self, now: u64) -> Vec<StoredElement> {
        let to = self.desc.timeouts;
        let c = self.desc.counters;
        typed!(&self.inner, t => t.elements(now, to, c))
    }

    /// Calls `f` on each live element at `now`, in key order, without
    /// materialising them all.
    pub fn for_each_element(&self, now: u64, f: &mut dyn FnMut(StoredElement)) {
        let to = self.desc.timeouts;
        let c = self.desc.counters;
        typed!(&self.inner, t => t.each_element(now, to, c, f))
    }

    /// Whether an element equal to `el` is stored and live.
    pub fn has_element(&self, el: &Element, now: u64) -> bool {
        if self.check_elem(el).is_err() {
            return false;
        }
        typed!(&self.inner, t => {
            let mut ok = true;
            let r = t.for_each_key(el, &mut |v| {
                for &(lo, hi) in v.iter() {
                    if !t.backend.get(lo, hi).is_some_and(|e| e > now) {
                        ok = false;
                    }
                }
            });
            r.is_ok() && ok
        })
    }
}
