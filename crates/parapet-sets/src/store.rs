//! `SetStore`: named sets, the clock, loading and saving.

use crate::desc::{Explain, SetDesc};
use crate::element::Element;
use crate::key::{KeyPart, LookupKey};
use crate::list_set::ListSet;
use crate::set::Set;
use crate::set_error::SetError;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A source of "now" in milliseconds. Timeouts are absolute stamps in this clock.
pub trait Clock: Send + Sync {
    /// Current time in ms.
    fn now_ms(&self) -> u64;
}

/// Wall clock (ms since the Unix epoch).
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0)
    }
}

/// A clock moved by hand, for tests.
///
/// ```
/// use parapet_sets::{ManualClock, Clock};
/// let c = ManualClock::new(1000);
/// c.advance(500);
/// assert_eq!(c.now_ms(), 1500);
/// ```
#[derive(Debug, Default)]
pub struct ManualClock(AtomicU64);

impl ManualClock {
    /// A clock reading `ms`.
    pub fn new(ms: u64) -> ManualClock {
        ManualClock(AtomicU64::new(ms))
    }
    /// Sets the time.
    pub fn set(&self, ms: u64) {
        self.0.store(ms, Ordering::Relaxed)
    }
    /// Moves the time forward.
    pub fn advance(&self, ms: u64) {
        self.0.fetch_add(ms, Ordering::Relaxed);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

impl<C: Clock + ?Sized> Clock for Arc<C> {
    fn now_ms(&self) -> u64 {
        (**self).now_ms()
    }
}

/// Counts of a successful load.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoadStats {
    /// Sets created.
    pub sets_created: usize,
    /// Elements newly added.
    pub elements_added: usize,
    /// Elements deleted.
    pub elements_deleted: usize,
}

/// Named sets. The membership API the classifier uses is [`SetStore::lookup`]
/// and [`SetStore::key_dims`].
///
/// ```
/// use parapet_sets::{SetStore, LookupKey, Family, KeyPart};
/// let mut store = SetStore::new();
/// store.load_ipset("create ban hash:ip,port family inet\nadd ban 192.0.2.1,tcp:22\n").unwrap();
/// // `-m set --match-set ban src,dst`: the key takes src address, the packet's protocol, dst port
/// assert_eq!(store.key_dims("ban"), &[KeyPart::Ipv4Addr, KeyPart::InetProto, KeyPart::InetService]);
/// let k = LookupKey::new().addr(Family::V4, 0xc000_0201).proto(6).port(22);
/// assert_eq!(store.lookup("ban", &k), Some(true));
/// assert_eq!(store.lookup("ban", &LookupKey::new().addr(Family::V4, 1).proto(6).port(22)), Some(false));
/// assert_eq!(store.lookup("nope", &k), None);
/// ```
pub struct SetStore {
    sets: HashMap<String, Set>,
    /// The `list:set`s, by name (names are unique across sets and lists).
    pub(crate) lists: HashMap<String, ListSet>,
    clock: Arc<dyn Clock>,
}

impl Default for SetStore {
    fn default() -> Self {
        SetStore::new()
    }
}

impl Clone for SetStore {
    fn clone(&self) -> Self {
        SetStore {
            sets: self.sets.clone(),
            lists: self.lists.clone(),
            clock: self.clock.clone(),
        }
    }
}

impl std::fmt::Debug for SetStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SetStore")
            .field("sets", &self.sets)
            .field("lists", &self.lists)
            .finish()
    }
}

impl SetStore {
    /// An empty store on the system clock.
    pub fn new() -> SetStore {
        SetStore::with_clock(Arc::new(SystemClock))
    }
    /// An empty store on the given clock.
    pub fn with_clock(clock: Arc<dyn Clock>) -> SetStore {
        SetStore {
            sets: HashMap::new(),
            lists: HashMap::new(),
            clock,
        }
    }
    /// Current time of the store's clock (ms).
    pub fn now(&self) -> u64 {
        self.clock.now_ms()
    }

    // ---- the stable membership API -------------------------------------

    /// Is `key` a live member of set `name`? `None` when there is no such set.
    /// A key whose parts do not fit the set's [`key_dims`](Self::key_dims)
    /// (wrong count, kind, or address family) is not a member: `Some(false)`.
    #[inline]
    pub fn lookup(&self, name: &str, key: &LookupKey) -> Option<bool> {
        let s = self.sets.get(name)?;
        Some(s.contains(key, self.clock.now_ms()))
    }

    /// As [`lookup`](Self::lookup) at an explicit time `now` (ms), for batch
    /// classification with one clock read.
    #[inline]
    pub fn lookup_at(&self, name: &str, key: &LookupKey, now: u64) -> Option<bool> {
        self.sets.get(name).map(|s| s.contains(key, now))
    }

    /// Which packet parts the key of set `name` takes, in key order; empty
    /// when there is no such set. For ipset `--match-set NAME f1,f2,…` the
    /// flags map in order onto the address/port/interface dimensions;
    /// [`KeyPart::InetProto`] takes no flag (it is the packet's protocol).
    pub fn key_dims(&self, name: &str) -> &[KeyPart] {
        self.sets.get(name).map(|s| s.key_dims()).unwrap_or(&[])
    }

    // ---- management -----------------------------------------------------

    /// Creates an empty set.
    pub fn create(&mut self, name: &str, desc: SetDesc) -> Result<(), SetError> {
        if self.sets.contains_key(name) {
            return Err(SetError::Exists(name.to_string()));
        }
        let s = Set::new(name, desc)?;
        self.sets.insert(name.to_string(), s);
        Ok(())
    }
    /// Removes a set; returns it.
    pub fn destroy(&mut self, name: &str) -> Option<Set> {
        self.sets.remove(name)
    }
    /// A set by name.
    pub fn get(&self, name: &str) -> Option<&Set> {
        self.sets.get(name)
    }
    /// A set by name, mutable.
    pub fn get_mut(&mut self, name: &str) -> Option<&mut Set> {
        self.sets.get_mut(name)
    }
    /// Set names, sorted.
    pub fn names(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self.sets.keys().map(|s| s.as_str()).collect();
        v.sort_unstable();
        v
    }
    /// Number of sets.
    pub fn len(&self) -> usize {
        self.sets.len()
    }
    /// Whether there are no sets.
    pub fn is_empty(&self) -> bool {
        self.sets.is_empty()
    }
    fn set_mut(&mut self, name: &str) -> Result<&mut Set, SetError> {
        self.sets
            .get_mut(name)
            .ok_or_else(|| SetError::NoSuchSet(name.to_string()))
    }
    /// Adds one element (refreshes it if present).
    pub fn add(&mut self, name: &str, el: &Element) -> Result<usize, SetError> {
        let now = self.now();
        self.set_mut(name)?.add(el, now)
    }
    /// Adds many elements, all or nothing.
    pub fn add_many(&mut self, name: &str, els: &[Element]) -> Result<usize, SetError> {
        let now = self.now();
        self.set_mut(name)?.add_many(els, now)
    }
    /// Deletes one element.
    pub fn del(&mut self, name: &str, el: &Element) -> Result<usize, SetError> {
        self.set_mut(name)?.del(el)
    }
    /// Deletes many elements.
    pub fn del_many(&mut self, name: &str, els: &[Element]) -> Result<usize, SetError> {
        self.set_mut(name)?.del_many(els)
    }
    /// Removes all elements of a set.
    pub fn flush(&mut self, name: &str) -> Result<(), SetError> {
        self.set_mut(name)?.flush();
        Ok(())
    }
    /// Atomically replaces the contents (and type) of set `name` with a set
    /// built aside; returns the old set. `name` must exist. Lookups see
    /// either the old or the new set, never a mix.
    pub fn swap(&mut self, name: &str, mut new: Set) -> Result<Set, SetError> {
        let slot = self.set_mut(name)?;
        new.set_name(name);
        Ok(std::mem::replace(slot, new))
    }
    /// Exchanges two sets' contents (ipset `swap A B`).
    pub fn swap_names(&mut self, a: &str, b: &str) -> Result<(), SetError> {
        let mut sa = self
            .sets
            .remove(a)
            .ok_or_else(|| SetError::NoSuchSet(a.to_string()))?;
        let Some(mut sb) = self.sets.remove(b) else {
            self.sets.insert(a.to_string(), sa);
            return Err(SetError::NoSuchSet(b.to_string()));
        };
        sa.set_name(b);
        sb.set_name(a);
        self.sets.insert(a.to_string(), sb);
        self.sets.insert(b.to_string(), sa);
        Ok(())
    }
    /// Inserts or replaces a whole set under its own name.
    pub fn insert_set(&mut self, set: Set) -> Option<Set> {
        self.sets.insert(set.name().to_string(), set)
    }
    /// Reaps up to `budget` expired elements per set (bounded; call periodically).
    pub fn tick(&mut self, budget: usize) -> usize {
        let now = self.now();
        self.sets.values_mut().map(|s| s.reap(now, budget)).sum()
    }
    /// Explains the backend choice of a set (`parapet set explain NAME`).
    pub fn explain(&self, name: &str) -> Option<Explain> {
        self.sets.get(name).map(|s| s.explain())
    }

    pub(crate) fn commit(
        &mut self,
        staged: HashMap<String, Set>,
        removed: Vec<String>,
        lists: HashMap<String, ListSet>,
    ) {
        self.lists = lists;
        for r in removed {
            self.sets.remove(&r);
        }
        for (n, mut s) in staged {
            s.end_bulk();
            self.sets.insert(n, s);
        }
    }
}

/// What a text load produces before it is committed: the staged sets, the
/// names removed, the counts, and the lists as they are after the load.
pub(crate) type Loaded = (
    HashMap<String, Set>,
    Vec<String>,
    LoadStats,
    HashMap<String, ListSet>,
);

/// Copy-on-touch staging of sets for all-or-nothing loads.
pub(crate) struct Staging<'a> {
    pub store: &'a SetStore,
    pub staged: HashMap<String, Set>,
    pub removed: Vec<String>,
}

impl<'a> Staging<'a> {
    pub fn new(store: &'a SetStore) -> Self {
        Staging {
            store,
            staged: HashMap::new(),
            removed: Vec::new(),
        }
    }
    pub fn exists(&self, name: &str) -> bool {
        self.staged.contains_key(name)
            || (self.store.sets.contains_key(name) && !self.removed.iter().any(|r| r == name))
    }
    pub fn get(&self, name: &str) -> Option<&Set> {
        if let Some(s) = self.staged.get(name) {
            return Some(s);
        }
        if self.removed.iter().any(|r| r == name) {
            return None;
        }
        self.store.sets.get(name)
    }
    pub fn get_mut(&mut self, name: &str) -> Option<&mut Set> {
        if !self.staged.contains_key(name) {
            if self.removed.iter().any(|r| r == name) {
                return None;
            }
            let mut s = self.store.sets.get(name)?.clone();
            s.begin_bulk();
            self.staged.insert(name.to_string(), s);
        }
        self.staged.get_mut(name)
    }
    pub fn create(&mut self, set: Set) {
        let name = set.name().to_string();
        self.removed.retain(|r| *r != name);
        let mut set = set;
        set.begin_bulk();
        self.staged.insert(name, set);
    }
    pub fn destroy(&mut self, name: &str) -> bool {
        let had = self.exists(name);
        self.staged.remove(name);
        if self.store.sets.contains_key(name) && !self.removed.iter().any(|r| r == name) {
            self.removed.push(name.to_string());
        }
        had
    }
    /// Destroys every set, stored or staged (`flush ruleset`, `ipset destroy`).
    pub fn destroy_all(&mut self) {
        let names: Vec<String> = self
            .store
            .names()
            .iter()
            .map(|s| s.to_string())
            .chain(self.staged.keys().cloned())
            .collect();
        for n in names {
            self.destroy(&n);
        }
    }
    pub fn finish(self) -> (HashMap<String, Set>, Vec<String>) {
        (self.staged, self.removed)
    }
}
