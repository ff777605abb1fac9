//! Sets in BPF maps: the types of the set API of [`crate::Dataplane`] and
//! the user-space half of it — splitting elements into map entries and
//! keeping, per entry, which elements produced it (so overlapping elements,
//! deletes and expiries stay exact). See `docs/dataplane.md`, "Sets".
//!
//! A **set** (id `0..MAX_SETS`) holds elements: one closed range per key
//! dimension, and an expiry. A **set reference** (index `0..64`, bit n of
//! the image key) says how a packet's key is built for one set: which packet
//! part feeds each dimension. Two references (e.g. `src` and `dst`) can
//! share one set.

use std::collections::hash_map::Entry;
use std::collections::HashMap as StdHashMap;
use std::sync::Arc;

use parapet_model::range_to_prefixes;

/// The mirror's maps: keyed by addresses others choose, hashed with a
/// random seed, and fast (std's SipHash was a tenth of a fleet node's
/// catch-up, benchmarks.md §6x).
type HashMap<K, V> = StdHashMap<K, V, parapet_sets::Seeded>;

use crate::abi::{
    RawSetDesc, RawSetRef, SetExact4Key, SetExact6Key, SetLpmKey, SetTupleKey, SetVal,
    SET_KEY_BYTES, SET_LPM, SET_MAX_DIMS, SET_MAX_SHAPES, SET_TUPLE,
};

mod api_types;
pub use api_types::{
    monotonic_ns, PacketPart, SetDim, SetElement, SetError, SetSizing, MAX_ENTRIES_PER_ELEMENT,
    SMALL_RANGE_POINTS,
};

/// A map entry's key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum EntryKey {
    Lpm(SetLpmKey),
    Tuple(SetTupleKey),
    /// A single address of an address set, in the exact hash (a /32 or
    /// /128 the trie would otherwise hold: see [`SetState::place`]).
    Exact4(SetExact4Key),
    Exact6(SetExact6Key),
}

impl EntryKey {
    /// Which kernel map holds the entry.
    pub fn map(&self) -> EntryMap {
        match self {
            EntryKey::Lpm(_) => EntryMap::Lpm,
            EntryKey::Tuple(_) => EntryMap::Tuple,
            EntryKey::Exact4(_) => EntryMap::Exact4,
            EntryKey::Exact6(_) => EntryMap::Exact6,
        }
    }

    /// The trie's entry for the same single address (a full-length prefix).
    fn lpm_twin(&self) -> Option<EntryKey> {
        let (set_id, addr, bits): (u16, &[u8], u32) = match self {
            EntryKey::Exact4(k) => (k.set_id, &k.addr, 32),
            EntryKey::Exact6(k) => (k.set_id, &k.addr, 128),
            _ => return None,
        };
        let mut k = SetLpmKey {
            prefixlen: 16 + bits,
            set_id: set_id.to_be_bytes(),
            ..SetLpmKey::default()
        };
        k.addr[..addr.len()].copy_from_slice(addr);
        Some(EntryKey::Lpm(k))
    }
}

/// The kernel maps set entries live in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EntryMap {
    Lpm,
    Tuple,
    Exact4,
    Exact6,
}

/// Room left in the exact hashes (IPv4, IPv6) for new single addresses,
/// over all sets; a new one without room goes to the trie.
pub(crate) type ExactRoom = [usize; 2];

/// The expiries of the elements behind one map entry (a multiset: the
/// entry's value is the latest). Almost always one: kept inline.
#[derive(Clone, Debug)]
pub(crate) enum Contrib {
    One(u64),
    Many(Box<[u64]>),
}

impl Contrib {
    fn insert(&mut self, exp: u64) {
        match self {
            Contrib::One(x) => *self = Contrib::Many(Box::new([*x, exp])),
            Contrib::Many(b) => {
                let mut v = std::mem::take(b).into_vec();
                v.push(exp);
                *b = v.into_boxed_slice();
            }
        }
    }
    fn replace(&mut self, old: u64, new: u64) {
        match self {
            Contrib::One(x) => *x = new,
            Contrib::Many(v) => {
                if let Some(x) = v.iter_mut().find(|x| **x == old) {
                    *x = new;
                }
            }
        }
    }
    /// Remove one `exp`; false when nothing is left.
    fn remove(&mut self, exp: u64) -> bool {
        match self {
            Contrib::One(_) => false,
            Contrib::Many(b) => {
                let mut v = std::mem::take(b).into_vec();
                if let Some(i) = v.iter().position(|x| *x == exp) {
                    v.swap_remove(i);
                }
                *self = if v.len() == 1 {
                    Contrib::One(v[0])
                } else {
                    Contrib::Many(v.into_boxed_slice())
                };
                true
            }
        }
    }
    /// Effective expiry of the entry: the latest of its elements' (0 = never).
    fn max_expiry(&self) -> u64 {
        let all: &[u64] = match self {
            Contrib::One(x) => std::slice::from_ref(x),
            Contrib::Many(v) => v,
        };
        let mut m = 1u64;
        for &e in all {
            if e == 0 {
                return 0;
            }
            m = m.max(e);
        }
        m
    }
}

/// The entries of one element: almost always one (a single address).
enum Split {
    One(EntryKey),
    Many(Vec<EntryKey>),
}

impl Split {
    fn as_slice(&self) -> &[EntryKey] {
        match self {
            Split::One(k) => std::slice::from_ref(k),
            Split::Many(v) => v,
        }
    }
}

/// User-space mirror of one set.
pub(crate) struct SetState {
    pub dims: Vec<SetDim>,
    pub kind: u8,
    /// element key bytes -> expiry
    elements: HashMap<Arc<[u8]>, u64>,
    /// The elements with an expiry, by expiry (`set_expiry.rs`).
    expiry: crate::set_expiry::ExpiryIndex,
    pub entries: HashMap<EntryKey, Contrib>,
    /// tuple sets: per-dimension prefix lengths of each shape
    pub shapes: Vec<[u8; SET_MAX_DIMS]>,
    /// Entries of this set in the exact hashes (IPv4, IPv6).
    pub exact: [usize; 2],
    /// A write to the kernel's maps failed after the mirror changed: the
    /// kernel may lack what the mirror holds, so every entry an add
    /// touches is written again, even one the mirror says is there with
    /// that expiry.
    pub kernel_behind: bool,
    /// A single address went to the trie (the exact hash was full): until
    /// a flush, a single address may be held there ([`SetState::place`]
    /// looks for it only then).
    singles_in_trie: bool,
}

/// One entry of a set in the kernel's maps, read back
/// ([`crate::Dataplane::set_kernel_entries`]).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct KernelSetEntry {
    /// The tuple hash's shape index (0 in the LPM trie).
    pub shape: u8,
    /// LPM trie: the key's prefix length (16 + the address bits); tuple
    /// hash: the value's prefix length field.
    pub prefixlen: u32,
    /// LPM trie: the 16 address bytes; tuple hash: the masked key bytes.
    pub key: Vec<u8>,
    /// The entry's expiry (`CLOCK_MONOTONIC` ns, 0 = permanent).
    pub expires_ns: u64,
}

/// What to write to the maps after a mirror update.
#[derive(Default)]
pub(crate) struct Writes {
    pub put: Vec<(EntryKey, SetVal)>,
    pub del: Vec<EntryKey>,
    /// The tuple set's shapes changed: write the descriptor first.
    pub desc: Option<RawSetDesc>,
}

impl SetState {
    pub fn new(set: u32, dims: &[SetDim]) -> Result<Self, SetError> {
        if dims.is_empty() || dims.len() > SET_MAX_DIMS {
            return Err(SetError::BadKey(format!(
                "set {set}: {} dimensions (1..=4)",
                dims.len()
            )));
        }
        let bytes: usize = dims.iter().map(|d| d.bytes()).sum();
        if bytes > SET_KEY_BYTES {
            return Err(SetError::BadKey(format!(
                "set {set}: key of {bytes} bytes (max {SET_KEY_BYTES})"
            )));
        }
        // One dimension (address, port, protocol or name): prefixes in the
        // LPM trie, one lookup whatever their lengths.
        let kind = if dims.len() == 1 { SET_LPM } else { SET_TUPLE };
        Ok(SetState {
            dims: dims.to_vec(),
            kind,
            elements: HashMap::default(),
            expiry: Default::default(),
            entries: HashMap::default(),
            shapes: Vec::new(),
            exact: [0, 0],
            kernel_behind: false,
            singles_in_trie: false,
        })
    }

    pub fn len(&self) -> usize {
        self.elements.len()
    }

    fn element_key(&self, el: &SetElement) -> Result<Box<[u8]>, SetError> {
        let mut k = Vec::new();
        self.element_key_into(el, &mut k)?;
        Ok(k.into_boxed_slice())
    }

    /// [`SetState::element_key`] into `k` (cleared first).
    fn element_key_into(&self, el: &SetElement, k: &mut Vec<u8>) -> Result<(), SetError> {
        k.clear();
        if el.ranges.len() != self.dims.len() {
            return Err(SetError::BadElement(format!(
                "{} ranges for a key of {} dimensions",
                el.ranges.len(),
                self.dims.len()
            )));
        }
        for (&(lo, hi), d) in el.ranges.iter().zip(&self.dims) {
            if lo > hi || hi > d.max() {
                return Err(SetError::BadElement(format!(
                    "range {lo:#x}-{hi:#x} does not fit {d:?}"
                )));
            }
            let n = d.bytes();
            k.extend_from_slice(&lo.to_be_bytes()[16 - n..]);
            k.extend_from_slice(&hi.to_be_bytes()[16 - n..]);
        }
        Ok(())
    }

    /// The one entry of a single address in an address set (what
    /// [`SetState::split`] returns for it, without its allocations);
    /// `None` for anything else. The element's ranges are checked
    /// ([`SetState::element_key_into`]) before.
    fn single_entry(&self, set: u32, el: &SetElement) -> Option<EntryKey> {
        let &[(lo, hi)] = &el.ranges[..] else {
            return None;
        };
        if lo != hi || self.kind != SET_LPM {
            return None;
        }
        match self.dims[0] {
            SetDim::Ipv4Addr => Some(EntryKey::Exact4(SetExact4Key {
                set_id: set as u16,
                _pad: 0,
                addr: (lo as u32).to_be_bytes(),
            })),
            SetDim::Ipv6Addr => Some(EntryKey::Exact6(SetExact6Key {
                set_id: set as u16,
                _pad: 0,
                addr: lo.to_be_bytes(),
            })),
            _ => None,
        }
    }

    /// The map entries of an element; may add shapes (tuple sets).
    fn split(
        &self,
        set: u32,
        el: &SetElement,
        shapes: &mut Vec<[u8; SET_MAX_DIMS]>,
    ) -> Result<Vec<EntryKey>, SetError> {
        let per_dim: Vec<Vec<(u128, u32)>> = el
            .ranges
            .iter()
            .zip(&self.dims)
            .map(|(&(lo, hi), &d)| {
                // In a concatenation every combination of prefix lengths
                // is one more probe per packet: short port and protocol
                // ranges become points, so they add entries, not shapes.
                let small = self.dims.len() > 1
                    && matches!(d, SetDim::Port | SetDim::Proto)
                    && hi - lo < SMALL_RANGE_POINTS;
                if small {
                    (lo..=hi).map(|v| (v, d.bits())).collect()
                } else {
                    let mut prefixes = Vec::new();
                    range_to_prefixes(lo, hi, d.bits(), &mut prefixes);
                    prefixes
                }
            })
            .collect();
        let total = per_dim
            .iter()
            .try_fold(1usize, |a, p| a.checked_mul(p.len()))
            .unwrap_or(usize::MAX);
        if total > MAX_ENTRIES_PER_ELEMENT {
            return Err(SetError::TooManyEntries(MAX_ENTRIES_PER_ELEMENT));
        }
        let mut out = Vec::with_capacity(total);
        if self.kind == SET_LPM {
            let n = self.dims[0].bytes();
            for &(v, len) in &per_dim[0] {
                // a single address: the exact hash's key (where it lives
                // is [`SetState::place`]'s choice)
                if len == 32 && self.dims[0] == SetDim::Ipv4Addr {
                    let addr = (v as u32).to_be_bytes();
                    out.push(EntryKey::Exact4(SetExact4Key {
                        set_id: set as u16,
                        _pad: 0,
                        addr,
                    }));
                    continue;
                }
                if len == 128 && self.dims[0] == SetDim::Ipv6Addr {
                    out.push(EntryKey::Exact6(SetExact6Key {
                        set_id: set as u16,
                        _pad: 0,
                        addr: v.to_be_bytes(),
                    }));
                    continue;
                }
                let mut k = SetLpmKey {
                    prefixlen: 16 + len,
                    set_id: (set as u16).to_be_bytes(),
                    ..SetLpmKey::default()
                };
                k.addr[..n].copy_from_slice(&v.to_be_bytes()[16 - n..]);
                out.push(EntryKey::Lpm(k));
            }
            return Ok(out);
        }
        let mut idx = vec![0usize; per_dim.len()];
        loop {
            let mut shape = [0u8; SET_MAX_DIMS];
            let mut k = SetTupleKey {
                set_id: set as u16,
                ..SetTupleKey::default()
            };
            let mut off = 0;
            for (d, dim) in self.dims.iter().enumerate() {
                let (v, len) = per_dim[d][idx[d]];
                shape[d] = len as u8;
                let n = dim.bytes();
                k.data[off..off + n].copy_from_slice(&v.to_be_bytes()[16 - n..]);
                off += n;
            }
            let s = match shapes.iter().position(|x| *x == shape) {
                Some(s) => s,
                None => {
                    if shapes.len() >= SET_MAX_SHAPES {
                        return Err(SetError::TooManyShapes { set });
                    }
                    shapes.push(shape);
                    shapes.len() - 1
                }
            };
            k.shape = s as u8;
            out.push(EntryKey::Tuple(k));
            // next combination
            let mut d = per_dim.len();
            loop {
                if d == 0 {
                    return Ok(out);
                }
                d -= 1;
                idx[d] += 1;
                if idx[d] < per_dim[d].len() {
                    break;
                }
                idx[d] = 0;
            }
        }
    }

    pub fn desc(&self) -> RawSetDesc {
        let mut desc = RawSetDesc {
            n_shapes: self.shapes.len() as u32,
            ..RawSetDesc::default()
        };
        for (s, shape) in self.shapes.iter().enumerate() {
            let mut bytes = [0u8; SET_KEY_BYTES];
            let mut off = 0;
            for (d, dim) in self.dims.iter().enumerate() {
                let n = dim.bytes();
                let len = u32::from(shape[d]);
                let m: u128 = if len == 0 {
                    0
                } else {
                    (u128::MAX << (128 - len)) >> (128 - dim.bits())
                };
                bytes[off..off + n].copy_from_slice(&m.to_be_bytes()[16 - n..]);
                off += n;
            }
            for (w, c) in desc.mask[s].iter_mut().zip(bytes.chunks(4)) {
                *w = u32::from_ne_bytes([c[0], c[1], c[2], c[3]]);
            }
        }
        desc
    }

    /// Where the entry `ek` (as [`SetState::split`] names it) lives: a
    /// single address held already stays where it is (the exact hash or,
    /// added when the hash was full, the trie); a new one goes to the
    /// exact hash while `room` has space for it (taking it), else to the
    /// trie. `None` room: only look (a delete).
    fn place(&mut self, ek: EntryKey, room: Option<&mut ExactRoom>) -> EntryKey {
        let Some(twin) = ek.lpm_twin() else {
            return ek;
        };
        if self.entries.contains_key(&ek) {
            return ek;
        }
        if self.singles_in_trie && self.entries.contains_key(&twin) {
            return twin;
        }
        let fam = usize::from(matches!(ek, EntryKey::Exact6(_)));
        match room {
            Some(room) if room[fam] > 0 => {
                room[fam] -= 1;
                ek
            }
            Some(_) => {
                self.singles_in_trie = true;
                twin
            }
            None => ek,
        }
    }

    /// Count an entry of the exact hashes in (`1`) or out (`-1`).
    fn count_exact(&mut self, ek: &EntryKey, d: isize) {
        let fam = match ek {
            EntryKey::Exact4(_) => 0,
            EntryKey::Exact6(_) => 1,
            _ => return,
        };
        self.exact[fam] = self.exact[fam].saturating_add_signed(d);
    }

    /// Add (or refresh) elements in the mirror; returns the map writes.
    /// All or nothing: an element that does not fit changes nothing.
    /// `room`: what the exact hashes have left (taken from as they fill).
    pub fn add(
        &mut self,
        set: u32,
        els: &[SetElement],
        room: &mut ExactRoom,
    ) -> Result<Writes, SetError> {
        let mut shapes = self.shapes.clone();
        let mut staged = Vec::with_capacity(els.len());
        let mut buf = Vec::with_capacity(2 * SET_KEY_BYTES);
        for el in els {
            self.element_key_into(el, &mut buf)?;
            // a single address (a ban): its one entry without the
            // general split's allocations
            let entries = match self.single_entry(set, el) {
                Some(ek) => Split::One(ek),
                None => Split::Many(self.split(set, el, &mut shapes)?),
            };
            staged.push((Arc::<[u8]>::from(&buf[..]), entries, el.expires_ns));
        }
        let mut w = Writes::default();
        if shapes.len() != self.shapes.len() {
            self.shapes = shapes;
            w.desc = Some(self.desc());
        }
        // each entry touched: the expiry the kernel holds for it before
        // this call (None: not in the kernel yet), and the entry's expiry
        // after its last touch
        let mut touched: HashMap<EntryKey, (Option<u64>, u64)> =
            HashMap::with_capacity_and_hasher(staged.len(), Default::default());
        for (key, entries, exp) in staged {
            // (one lookup: a held element keeps its key, shared with the
            // expiry index; the new copy is dropped)
            let (key, old) = match self.elements.entry(key) {
                Entry::Occupied(mut o) => (Arc::clone(o.key()), Some(o.insert(exp))),
                Entry::Vacant(v) => {
                    let key = Arc::clone(v.key());
                    v.insert(exp);
                    (key, None)
                }
            };
            self.expiry.moved(&key, old, exp);
            for &ek in entries.as_slice() {
                // Where the entry lives ([`SetState::place`]). While no
                // single address went to the trie, a held one is where the
                // lookup below finds it, and a new one takes room in the
                // exact hash in the vacant arm: one lookup, not two.
                let placed = self.singles_in_trie;
                let mut ek = if placed {
                    self.place(ek, Some(room))
                } else {
                    ek
                };
                let fam = match ek {
                    EntryKey::Exact4(_) => Some(0),
                    EntryKey::Exact6(_) => Some(1),
                    _ => None,
                };
                let mut fresh = false;
                let mut full = false;
                let (held, now) = match (self.entries.entry(ek), old) {
                    (Entry::Occupied(mut o), Some(old)) => {
                        let c = o.get_mut();
                        let held = c.max_expiry();
                        c.replace(old, exp);
                        (Some(held), c.max_expiry())
                    }
                    (Entry::Occupied(mut o), None) => {
                        let c = o.get_mut();
                        let held = c.max_expiry();
                        c.insert(exp);
                        (Some(held), c.max_expiry())
                    }
                    (Entry::Vacant(v), _) => {
                        match fam.filter(|_| !placed) {
                            Some(f) if room[f] == 0 => full = true,
                            Some(f) => room[f] -= 1,
                            None => {}
                        }
                        if !full {
                            v.insert(Contrib::One(exp));
                        }
                        fresh = true;
                        (None, Contrib::One(exp).max_expiry())
                    }
                };
                if full {
                    // the exact hash is full: the trie holds it
                    self.singles_in_trie = true;
                    ek = ek.lpm_twin().expect("a single address");
                    self.entries.insert(ek, Contrib::One(exp));
                }
                if fresh {
                    self.count_exact(&ek, 1);
                }
                touched
                    .entry(ek)
                    .and_modify(|t| t.1 = now)
                    .or_insert((held, now));
            }
        }
        for (ek, (held, now)) in touched {
            // an entry the kernel holds with this expiry already (a ban
            // refreshed as it was, a replicated ban this node has) costs
            // no write
            if self.kernel_behind || held != Some(now) {
                w.put.push((ek, entry_val(&ek, now)));
            }
        }
        Ok(w)
    }

    /// Delete elements (named by their ranges; absent ones are ignored).
    pub fn del(&mut self, set: u32, els: &[SetElement]) -> Result<Writes, SetError> {
        let mut w = Writes::default();
        let mut touched: HashMap<EntryKey, ()> = HashMap::default();
        for el in els {
            let key = self.element_key(el)?;
            let Some((key, exp)) = self.elements.remove_entry(&key[..]) else {
                continue;
            };
            self.expiry.removed(&key, exp);
            // shapes of an existing element already exist
            let mut shapes = self.shapes.clone();
            for ek in self.split(set, el, &mut shapes)? {
                let ek = self.place(ek, None);
                if let Some(c) = self.entries.get_mut(&ek) {
                    if !c.remove(exp) {
                        self.entries.remove(&ek);
                        self.count_exact(&ek, -1);
                    }
                    touched.insert(ek, ());
                }
            }
        }
        for ek in touched.into_keys() {
            match self.entries.get(&ek) {
                Some(c) => w.put.push((ek, entry_val(&ek, c.max_expiry()))),
                None => w.del.push(ek),
            }
        }
        Ok(w)
    }

    /// The elements (ranges only) whose keys are not in `keep`.
    fn others(&self, keep: &std::collections::HashSet<Box<[u8]>>) -> Vec<SetElement> {
        self.elements
            .keys()
            .filter(|k| !keep.contains(&k[..]))
            .map(|k| self.decode(k))
            .collect()
    }

    /// The element (ranges only) an element key stands for.
    fn decode(&self, k: &[u8]) -> SetElement {
        let mut ranges = Vec::with_capacity(self.dims.len());
        let mut at = 0;
        for d in &self.dims {
            let n = d.bytes();
            let num = |b: &[u8]| b.iter().fold(0u128, |a, &x| a << 8 | u128::from(x));
            ranges.push((num(&k[at..at + n]), num(&k[at + n..at + 2 * n])));
            at += 2 * n;
        }
        SetElement::new(&ranges)
    }

    /// Up to `budget` elements whose expiry is at or before `now_ns`,
    /// earliest first: read from the expiry index, so the work is
    /// proportional to what is returned, not to the set's size.
    pub fn expired(&self, now_ns: u64, budget: usize) -> Vec<SetElement> {
        self.expiry
            .due(now_ns, budget)
            .map(|k| self.decode(k))
            .collect()
    }

    /// [`SetState::expired`] by a scan of every element (any `budget` of
    /// them): what the index replaced, kept as the reference its tests
    /// compare with and the baseline of its benchmark.
    pub fn expired_by_scan(&self, now_ns: u64, budget: usize) -> Vec<SetElement> {
        self.elements
            .iter()
            .filter(|(_, &exp)| exp != 0 && exp <= now_ns)
            .take(budget)
            .map(|(k, _)| self.decode(k))
            .collect()
    }

    /// Elements in the expiry index (those with an expiry).
    #[cfg(test)]
    pub fn expiring(&self) -> usize {
        self.expiry.len()
    }

    /// Make the set hold exactly `els`: add (or refresh) them, then delete
    /// the others. Returns the two batches of writes in that order, so an
    /// element in both the old and the new contents never disappears.
    pub fn replace(
        &mut self,
        set: u32,
        els: &[SetElement],
        room: &mut ExactRoom,
    ) -> Result<(Writes, Writes), SetError> {
        let mut keep = std::collections::HashSet::with_capacity(els.len());
        for el in els {
            keep.insert(self.element_key(el)?);
        }
        let add = self.add(set, els, room)?;
        let stale = self.others(&keep);
        let del = self.del(set, &stale)?;
        Ok((add, del))
    }

    /// Forget everything; returns the entries to delete.
    pub fn flush(&mut self) -> Writes {
        let del = self.entries.drain().map(|(k, _)| k).collect();
        self.elements.clear();
        self.expiry.clear();
        self.shapes.clear();
        self.exact = [0, 0];
        self.singles_in_trie = false;
        Writes {
            put: Vec::new(),
            del,
            desc: (self.kind == SET_TUPLE).then(RawSetDesc::default),
        }
    }

    /// The descriptor of a reference to this set.
    pub fn ref_desc(&self, set: u32, parts: &[PacketPart]) -> Result<RawSetRef, SetError> {
        if parts.len() != self.dims.len() {
            return Err(SetError::BadKey(format!(
                "{} packet parts for a set of {} dimensions",
                parts.len(),
                self.dims.len()
            )));
        }
        let mut r = RawSetRef {
            set_id: set as u16,
            kind: self.kind,
            n_dims: parts.len() as u8,
            ..RawSetRef::default()
        };
        for (i, (&p, &d)) in parts.iter().zip(&self.dims).enumerate() {
            use PacketPart as P;
            let ok = match d {
                SetDim::Ipv4Addr | SetDim::Ipv6Addr => matches!(p, P::SrcAddr | P::DstAddr),
                SetDim::Port => matches!(p, P::SrcPort | P::DstPort),
                SetDim::Proto => p == P::Proto,
                SetDim::IfName => matches!(p, P::InIface | P::OutIface),
            };
            if !ok {
                return Err(SetError::BadKey(format!(
                    "dimension {i} is {d:?}: the packet's {p:?} cannot fill it"
                )));
            }
            let fam = match d {
                SetDim::Ipv4Addr => 4,
                SetDim::Ipv6Addr => 6,
                _ => 0,
            };
            if fam != 0 {
                if r.family != 0 && r.family != fam {
                    return Err(SetError::BadKey("IPv4 and IPv6 in one key".into()));
                }
                r.family = fam;
            }
            r.part[i] = p as u8;
            r.width[i] = d.bytes() as u8;
        }
        Ok(r)
    }
}

fn entry_val(k: &EntryKey, expires_ns: u64) -> SetVal {
    SetVal {
        expires_ns,
        prefixlen: match k {
            EntryKey::Lpm(l) => l.prefixlen,
            EntryKey::Tuple(_) => 0,
            EntryKey::Exact4(_) => 16 + 32,
            EntryKey::Exact6(_) => 16 + 128,
        },
        _pad: 0,
    }
}

#[cfg(test)]
mod tests;
