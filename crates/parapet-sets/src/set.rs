//! A typed set: description, backend choice, elements, timeouts.

use crate::backend::{
    bitmap::Bitmap, hash::HashTable, interval::IntervalSet, tss::Tss, BErr, Backend, Ins, Seeded,
    NEVER,
};
use crate::key::{fmt_range, KeyPart, Layout, LookupKey, MAX_DIMS};
use crate::word::{Wide, Word};
use parapet_model::Policy;
use std::collections::HashMap;
use std::fmt;

/// Default `maxelem` when none is given: 16,777,216 (not ipset's 65,536).
pub const DEFAULT_MAXELEM: usize = 1 << 24;

/// Largest `size`/`maxelem` for which the performance policy preallocates a
/// fixed hash table.
pub const FIXED_HASH_LIMIT: usize = 1 << 22;

/// Maximum points an exact (non-interval) set expands one range element into.
pub const MAX_EXPAND: u128 = 1 << 16;

/// The data structures a set can live in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BackendKind {
    /// One bit per possible key (domain ≤ 65,536 keys).
    Bitmap,
    /// Open-addressing hash table preallocated for `size` elements; never rehashes.
    HashFixed,
    /// Open-addressing hash table that doubles when its load limit is reached.
    HashGrowable,
    /// Flattened disjoint segments with max-expiry (one dimension, ranges/prefixes).
    Interval,
    /// Tuple space: per-shape hash tables of prefix boxes (concatenations with ranges).
    TupleSpace,
}

/// Stated complexity of a backend (n elements).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Complexity {
    pub lookup: &'static str,
    pub insert: &'static str,
    pub delete: &'static str,
    pub space: &'static str,
}

impl BackendKind {
    /// Short name (`bitmap`, `hash-fixed`, `hash`, `interval`, `tuple-space`).
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Bitmap => "bitmap",
            BackendKind::HashFixed => "hash-fixed",
            BackendKind::HashGrowable => "hash",
            BackendKind::Interval => "interval",
            BackendKind::TupleSpace => "tuple-space",
        }
    }
    /// Lookup, insert, delete and space complexity.
    pub fn complexity(self) -> Complexity {
        match self {
            BackendKind::Bitmap => Complexity {
                lookup: "O(1): one bit test (+ one expiry compare)",
                insert: "O(1)",
                delete: "O(1)",
                space: "O(U): U/8 B for a domain of U ≤ 65536 keys (+8 B per key with timeouts)",
            },
            BackendKind::HashFixed => Complexity {
                lookup: "O(1) expected (linear probing, load ≤ 50 %)",
                insert: "O(1) expected; preallocated, never rehashes",
                delete: "O(1) expected (backward-shift, no tombstones)",
                space: "O(size): 2·size rounded up to a power of two slots × (1 B tag + key [+ 8 B expiry])",
            },
            BackendKind::HashGrowable => Complexity {
                lookup: "O(1) expected (linear probing)",
                insert: "O(1) amortized (doubling rehash)",
                delete: "O(1) expected (backward-shift, no tombstones)",
                space: "O(n): slots = power of two ≥ n / load, load ≤ 50 % (performance) or ≤ 87.5 % (memory); 1 B tag + key (+ 8 B expiry) per slot",
            },
            BackendKind::Interval => Complexity {
                lookup: "O(log n): B-tree search of disjoint segments + one expiry compare",
                insert: "O(log n + k), k segments overlapped; bulk loads O(n log n) once",
                delete: "O(C·log n + k·log k), C non-empty span classes, k elements overlapping",
                space: "O(n): elements + ≤ 2n+1 segments (B-trees)",
            },
            BackendKind::TupleSpace => Complexity {
                lookup: "O(S) hash probes, S distinct prefix shapes",
                insert: "O(P), P prefix boxes of the element (≤ Π (2·w_d − 2))",
                delete: "O(P)",
                space: "O(Σ P) table entries + one element record per element",
            },
        }
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// ipset-specific creation details, kept for `ipset save`.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct IpsetInfo {
    /// The ipset type name, e.g. `hash:net,port`.
    pub typ: String,
    /// `hashsize` as given (a sizing hint only).
    pub hashsize: Option<usize>,
}

/// What a set is: key type, flags, sizing and policy. Picks the backend.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetDesc {
    /// Key dimensions (one, or a concatenation of up to [`MAX_DIMS`]).
    pub dims: Vec<KeyPart>,
    /// Elements may be ranges/prefixes (nft `flags interval`, ipset `hash:net*`).
    pub interval: bool,
    /// Elements may carry timeouts (nft `flags timeout`, ipset `timeout N` on create).
    pub timeouts: bool,
    /// Default element timeout in ms; 0 = permanent.
    pub default_timeout: u64,
    /// Expected number of elements (nft `size`, ipset `hashsize` hint).
    pub size: Option<usize>,
    /// Maximum number of elements (nft `size`, ipset `maxelem`); None = [`DEFAULT_MAXELEM`].
    pub maxelem: Option<usize>,
    /// Per-element packet/byte counters.
    pub counters: bool,
    /// Per-element comments.
    pub comment: bool,
    /// Backend policy.
    pub policy: Policy,
    /// Key domain for bitmap types (`ipset bitmap:ip|port range A-B`).
    pub range: Option<(u128, u128)>,
    /// Forces a backend (must be compatible with the key type).
    pub backend: Option<BackendKind>,
    /// Set-level comment (nft `comment "…"`).
    pub set_comment: Option<String>,
    /// ipset details, when created from ipset text.
    pub ipset: Option<IpsetInfo>,
}

impl SetDesc {
    /// A description with the given key dimensions and defaults elsewhere.
    ///
    /// ```
    /// use parapet_sets::{SetDesc, KeyPart};
    /// let d = SetDesc::new(&[KeyPart::Ipv4Addr]).interval().timeouts(3_600_000).size(100_000);
    /// assert!(d.interval && d.timeouts);
    /// ```
    pub fn new(dims: &[KeyPart]) -> SetDesc {
        SetDesc {
            dims: dims.to_vec(),
            interval: false,
            timeouts: false,
            default_timeout: 0,
            size: None,
            maxelem: None,
            counters: false,
            comment: false,
            policy: Policy::Performance,
            range: None,
            backend: None,
            set_comment: None,
            ipset: None,
        }
    }
    /// Sets `flags interval`.
    pub fn interval(mut self) -> Self {
        self.interval = true;
        self
    }
    /// Enables timeouts with a default timeout in ms (0 = permanent).
    pub fn timeouts(mut self, default_ms: u64) -> Self {
        self.timeouts = true;
        self.default_timeout = default_ms;
        self
    }
    /// Expected size.
    pub fn size(mut self, n: usize) -> Self {
        self.size = Some(n);
        self
    }
    /// Maximum elements.
    pub fn maxelem(mut self, n: usize) -> Self {
        self.maxelem = Some(n);
        self
    }
    /// Policy.
    pub fn policy(mut self, p: Policy) -> Self {
        self.policy = p;
        self
    }
    /// Enables counters.
    pub fn counters(mut self) -> Self {
        self.counters = true;
        self
    }
    /// Enables comments.
    pub fn comments(mut self) -> Self {
        self.comment = true;
        self
    }
    /// The effective maximum number of elements.
    pub fn max_elements(&self) -> usize {
        self.maxelem.unwrap_or(DEFAULT_MAXELEM)
    }
    /// Total key width in bits.
    pub fn key_bits(&self) -> u32 {
        self.dims.iter().map(|d| d.width()).sum()
    }
    /// The nft type text, e.g. `ipv4_addr . inet_service`.
    pub fn type_name(&self) -> String {
        self.dims
            .iter()
            .map(|d| d.nft_name())
            .collect::<Vec<_>>()
            .join(" . ")
    }
    fn domain(&self) -> Option<(u128, u128)> {
        if let Some(r) = self.range {
            return Some(r);
        }
        if self.dims.len() == 1 && self.key_bits() <= 16 {
            return Some((0, self.dims[0].max()));
        }
        None
    }
}

/// Errors of set operations (not of parsing).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SetError {
    /// No set of that name.
    NoSuchSet(String),
    /// A set of that name already exists.
    Exists(String),
    /// `maxelem` reached: the element was not added.
    Full { set: String, maxelem: usize },
    /// A timeout on an element of a set created without timeout support.
    TimeoutNotSupported { set: String },
    /// A key outside a bitmap set's range.
    OutOfRange { set: String, element: String },
    /// A range in a non-interval set that expands into too many elements.
    RangeTooLarge { set: String, element: String },
    /// A concatenation element whose ranges decompose into too many boxes.
    TooComplex {
        set: String,
        element: String,
        boxes: usize,
    },
    /// Element/key shape does not fit the set's type.
    TypeMismatch { set: String, message: String },
    /// The description cannot be realised.
    InvalidDesc(String),
}

impl fmt::Display for SetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SetError::NoSuchSet(s) => write!(f, "set `{s}` does not exist"),
            SetError::Exists(s) => write!(f, "set `{s}` already exists"),
            SetError::Full { set, maxelem } => write!(
                f,
                "set `{set}` is full (maxelem {maxelem}): element not added"
            ),
            SetError::TimeoutNotSupported { set } => {
                write!(f, "set `{set}` was created without timeout support")
            }
            SetError::OutOfRange { set, element } => {
                write!(f, "element {element} is outside the range of set `{set}`")
            }
            SetError::RangeTooLarge { set, element } => {
                write!(f, "range {element} expands to more than {MAX_EXPAND} elements in set `{set}` (not an interval set)")
            }
            SetError::TooComplex {
                set,
                element,
                boxes,
            } => {
                write!(f, "element {element} of set `{set}` decomposes into {boxes} prefix boxes (limit {})", crate::backend::tss::MAX_BOXES)
            }
            SetError::TypeMismatch { set, message } => write!(f, "set `{set}`: {message}"),
            SetError::InvalidDesc(m) => write!(f, "invalid set description: {m}"),
        }
    }
}

impl std::error::Error for SetError {}

/// One element: a range per dimension (`lo == hi` for exact values) and
/// optional per-element timeout, comment and counters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Element {
    /// `[lo, hi]` per dimension; only the first `dims` entries are used.
    pub ranges: [(u128, u128); MAX_DIMS],
    /// Number of dimensions.
    pub dims: u8,
    /// Timeout in ms; `Some(0)` = permanent; `None` = the set's default.
    pub timeout: Option<u64>,
    /// Remaining lifetime in ms (nft `expires`); overrides `timeout` for the expiry stamp.
    pub expires: Option<u64>,
    /// Comment.
    pub comment: Option<String>,
    /// (packets, bytes).
    pub counters: Option<(u64, u64)>,
}

impl Element {
    /// An element from per-dimension ranges.
    pub fn new(ranges: &[(u128, u128)]) -> Element {
        assert!(ranges.len() <= MAX_DIMS);
        let mut r = [(0, 0); MAX_DIMS];
        r[..ranges.len()].copy_from_slice(ranges);
        Element {
            ranges: r,
            dims: ranges.len() as u8,
            timeout: None,
            expires: None,
            comment: None,
            counters: None,
        }
    }
    /// An element with one exact value per dimension.
    pub fn exact(values: &[u128]) -> Element {
        let v: Vec<(u128, u128)> = values.iter().map(|&x| (x, x)).collect();
        Element::new(&v)
    }
    /// The element equal to a packet key (dimension values in key order).
    pub fn from_key(dims: &[KeyPart], key: &LookupKey) -> Option<Element> {
        let parts = key.parts();
        if parts.len() != dims.len() {
            return None;
        }
        let mut v = Vec::with_capacity(dims.len());
        for (d, p) in dims.iter().zip(parts) {
            v.push(crate::key::dim_value(*d, p)?);
        }
        Some(Element::exact(&v))
    }
    /// With a timeout in ms.
    pub fn with_timeout(mut self, ms: u64) -> Self {
        self.timeout = Some(ms);
        self
    }
    /// With a comment.
    pub fn with_comment(mut self, c: &str) -> Self {
        self.comment = Some(c.to_string());
        self
    }
    /// The used ranges.
    pub fn ranges(&self) -> &[(u128, u128)] {
        &self.ranges[..self.dims as usize]
    }
    /// nft-style text of the key, e.g. `10.0.0.0/8 . 80`.
    pub fn key_text(&self, dims: &[KeyPart]) -> String {
        self.ranges()
            .iter()
            .zip(dims)
            .map(|(&(l, h), &d)| fmt_range(d, l, h))
            .collect::<Vec<_>>()
            .join(" . ")
    }
}

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

/// An element as stored, with its remaining lifetime.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredElement {
    /// The element; `timeout` is set only when the element's own timeout
    /// differs from the set default; `expires` is unset.
    pub element: Element,
    /// Remaining ms until expiry; None = permanent.
    pub remaining: Option<u64>,
}

/// Why a set lives in the backend it does (the CLI's `parapet set explain NAME`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Explain {
    pub set: String,
    pub key: String,
    pub flags: String,
    pub policy: Policy,
    pub backend: BackendKind,
    pub complexity: Complexity,
    /// Why this backend, and why not the others.
    pub reasons: Vec<String>,
    pub elements: usize,
    pub maxelem: usize,
    pub memory_bytes: usize,
}

impl fmt::Display for Explain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "set {}: type {}{}; policy {}",
            self.set, self.key, self.flags, self.policy
        )?;
        writeln!(f, "backend: {}", self.backend)?;
        writeln!(f, "  lookup: {}", self.complexity.lookup)?;
        writeln!(f, "  insert: {}", self.complexity.insert)?;
        writeln!(f, "  delete: {}", self.complexity.delete)?;
        writeln!(f, "  space:  {}", self.complexity.space)?;
        writeln!(
            f,
            "elements: {} of maxelem {}; memory: {} bytes",
            self.elements, self.maxelem, self.memory_bytes
        )?;
        writeln!(f, "why:")?;
        for r in &self.reasons {
            writeln!(f, "  - {r}")?;
        }
        Ok(())
    }
}

/// Picks the backend for a description, with the reasons.
pub fn choose_backend(desc: &SetDesc) -> Result<(BackendKind, Vec<String>), SetError> {
    let mut why = Vec::new();
    let bits = desc.key_bits();
    let domain = desc.domain();
    let dsize = domain.map(|(a, b)| b - a + 1);
    let exact_ok = !desc.interval;
    if let Some(k) = desc.backend {
        let ok = match k {
            BackendKind::Bitmap => dsize.is_some_and(|n| n <= 65536),
            BackendKind::HashFixed | BackendKind::HashGrowable => exact_ok,
            BackendKind::Interval => desc.dims.len() == 1,
            BackendKind::TupleSpace => true,
        };
        if !ok {
            return Err(SetError::InvalidDesc(format!(
                "backend {k} cannot hold keys of type {}{}",
                desc.type_name(),
                if desc.interval {
                    " with flags interval"
                } else {
                    ""
                }
            )));
        }
        why.push(format!("{k} was requested explicitly"));
        return Ok((k, why));
    }
    let entry = |kbits: u32| -> u128 {
        let kb = if kbits <= 16 {
            2
        } else if kbits <= 32 {
            4
        } else if kbits <= 64 {
            8
        } else if kbits <= 128 {
            16
        } else {
            64
        };
        (kb + 1 + if desc.timeouts { 8 } else { 0 }) as u128
    };
    if let Some(n) = dsize.filter(|&n| n <= 65536) {
        let bm_bytes = n.div_ceil(8) + if desc.timeouts { n * 8 } else { 0 };
        let hash_bytes = desc.size.map(|s| s as u128 * 2 * entry(bits));
        match (desc.policy, hash_bytes) {
            (Policy::Memory, Some(hb)) if hb < bm_bytes && !desc.interval => {
                why.push(format!(
                    "key domain is {n} values, but a hash table for the expected size {} (~{hb} B) is smaller than a bitmap ({bm_bytes} B) and the policy is memory",
                    desc.size.unwrap()
                ));
                return Ok((BackendKind::HashGrowable, why));
            }
            _ => {
                why.push(format!("key domain is {n} values (≤ 65536): a bitmap indexes it directly, O(1), {bm_bytes} B"));
                if desc.interval {
                    why.push(
                        "ranges are stored as their member points (a range delete clears them all)"
                            .into(),
                    );
                }
                return Ok((BackendKind::Bitmap, why));
            }
        }
    }
    if dsize.is_some() {
        why.push("key domain exceeds 65536 values: no bitmap".into());
    } else {
        why.push(format!("key is {bits} bits (> 16): no bitmap"));
    }
    if !desc.interval {
        why.push("exact keys (no interval flag): hash table".into());
        match (desc.policy, desc.size.or(desc.maxelem)) {
            (Policy::Performance, Some(s)) if s <= FIXED_HASH_LIMIT => {
                why.push(format!("size {s} is known and ≤ {FIXED_HASH_LIMIT}: preallocated fixed table (load ≤ 50 %), never rehashes, no insert stalls"));
                Ok((BackendKind::HashFixed, why))
            }
            (Policy::Performance, _) => {
                why.push("size unknown or large: growable table, load ≤ 50 %".into());
                Ok((BackendKind::HashGrowable, why))
            }
            (Policy::Memory, _) => {
                why.push("policy memory: growable table, load ≤ 87.5 %".into());
                Ok((BackendKind::HashGrowable, why))
            }
        }
    } else if desc.dims.len() == 1 {
        why.push("one dimension with ranges/prefixes: flattened interval segments, binary search; nested and overlapping elements allowed".into());
        if desc.policy == Policy::Memory {
            why.push("policy memory: the interval set is also the smallest ranged structure (tuple space would store elements twice)".into());
        }
        Ok((BackendKind::Interval, why))
    } else {
        why.push(format!("concatenation of {} dimensions with ranges: tuple space of prefix boxes (one hash probe per shape)", desc.dims.len()));
        Ok((BackendKind::TupleSpace, why))
    }
}

fn make_typed<K: Word>(desc: &SetDesc, kind: BackendKind) -> Typed<K> {
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

/// Undo record for all-or-nothing batches.
type Undo<K> = Vec<(K, K, Option<u64>)>;

impl<K: Word> Typed<K> {
    /// Inserts one element (expanding ranges for exact backends).
    #[allow(clippy::too_many_arguments)]
    #[allow(clippy::too_many_arguments)]
    fn insert(
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
                u.push((lo, hi, t.backend.get(lo, hi)));
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

    fn for_each_key(&self, el: &Element, f: &mut dyn FnMut(&mut Vec<(K, K)>)) -> Result<(), ()> {
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

    fn remove(&mut self, el: &Element) -> Result<usize, ()> {
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

    fn reap(&mut self, now: u64, budget: usize) -> usize {
        let extras = &mut self.extras;
        let has = !extras.is_empty();
        self.backend.reap(now, budget, &mut |lo, hi| {
            if has {
                extras.remove(&(lo, hi));
            }
        })
    }

    fn undo(&mut self, u: Undo<K>) {
        for (lo, hi, old) in u.into_iter().rev() {
            match old {
                None => {
                    self.backend.remove(lo, hi);
                    self.extras.remove(&(lo, hi));
                }
                Some(e) => {
                    let _ = self.backend.insert(lo, hi, e, usize::MAX);
                }
            }
        }
    }

    fn elements(&self, now: u64, timeouts: bool, extra_counters: bool) -> Vec<StoredElement> {
        let mut out = Vec::with_capacity(self.backend.len());
        self.each_element(now, timeouts, extra_counters, &mut |e| out.push(e));
        out
    }

    fn each_element(
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
    fn lookup(&self, key: &LookupKey, now: u64) -> bool {
        match self.layout.pack_key::<K>(key) {
            Some(k) => self.backend.contains(k, now),
            None => false,
        }
    }
}

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
    pub fn add_many(&mut self, els: &[Element], now: u64) -> Result<usize, SetError> {
        for el in els {
            self.check_elem(el)?;
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
