//! Set elements: a range per key dimension, with timeout, comment and
//! counters, as given and as stored.

use crate::key::{fmt_range, KeyPart, LookupKey, MAX_DIMS};

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

/// An element as stored, with its remaining lifetime.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredElement {
    /// The element; `timeout` is set only when the element's own timeout
    /// differs from the set default; `expires` is unset.
    pub element: Element,
    /// Remaining ms until expiry; None = permanent.
    pub remaining: Option<u64>,
}
