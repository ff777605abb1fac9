//! A set's description (key type, flags, sizes, policy) and the backend it
//! picks, with the reasons (`parapet set explain`).

use crate::key::KeyPart;
use crate::set_error::SetError;
use parapet_model::Policy;
use std::fmt;

pub use crate::limits::{DEFAULT_MAXELEM, FIXED_HASH_LIMIT, MAX_EXPAND};

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
    /// `netmask N` (`hash:ip`, `bitmap:ip`): every element, and every
    /// packet address looked up, is its /N network; the set is then an
    /// interval set of /N prefixes.
    pub netmask: Option<u32>,
    /// `range` of a bitmap type whose key is not the range's dimension
    /// alone (`bitmap:ip,mac`, `bitmap:ip` with `netmask`): checked when
    /// elements are added, not a bitmap domain.
    pub range: Option<(u128, u128)>,
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
    pub(crate) fn domain(&self) -> Option<(u128, u128)> {
        if let Some(r) = self.range {
            return Some(r);
        }
        if self.dims.len() == 1 && self.key_bits() <= 16 {
            return Some((0, self.dims[0].max()));
        }
        None
    }
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
