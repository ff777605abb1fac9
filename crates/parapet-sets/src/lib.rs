//! Typed sets for parapet: ipset / nft sets of addresses, networks, ports,
//! protocols, interface names and their concatenations.
//!
//! * A set is described by a [`SetDesc`] (key type, `interval`/`timeout`
//!   flags, expected `size`, `maxelem`, [`Policy`]); the description picks
//!   the backend ([`BackendKind`]) as nftables does, and
//!   [`Set::explain`] says which and why.
//! * Timeouts are absolute expiry stamps (ms) checked on lookup; expired
//!   elements are reaped in bounded steps, never by a full sweep on the hot
//!   path. Time comes from a [`Clock`] (or an explicit `now`).
//! * [`SetStore`] holds named sets and offers the small, stable membership
//!   API the classifier uses: [`SetStore::lookup`] and [`SetStore::key_dims`].
//! * Formats: `ipset save`/`restore` text and nft set syntax, in and out;
//!   loads are all or nothing; parse errors are [`Error`]`{ line, column, message }`.
//!   One type or element as a line of text (what the daemon's clients
//!   send): [`parse_type`], [`parse_element`].
//! * A rule's set reference picks a packet field per key dimension
//!   ([`ref_fields`]); [`packet_key`] builds a packet's [`LookupKey`] from it.
//!
//! ```
//! use parapet_sets::{SetStore, LookupKey, Family};
//! let mut store = SetStore::new();
//! store.load_nft("set ban { type ipv4_addr; flags interval; elements = { 10.0.0.0/8, 192.0.2.7 } }").unwrap();
//! assert_eq!(store.lookup("ban", &LookupKey::new().addr(Family::V4, 0x0a01_0101)), Some(true));
//! assert_eq!(store.lookup("ban", &LookupKey::new().ipv4("192.0.2.8".parse().unwrap())), Some(false));
//! println!("{}", store.explain("ban").unwrap());
//! ```

#![allow(clippy::type_complexity)]

mod backend;
mod desc;
mod element;
mod ipset;
mod ipset_legacy;
mod key;
mod limits;
mod list_set;
mod nft;
mod reference;
mod set;
mod set_error;
mod store;
mod text;
mod typed;
mod word;

pub use backend::{Seeded, SeededHasher};
pub use desc::{
    choose_backend, BackendKind, Complexity, Explain, IpsetInfo, SetDesc, DEFAULT_MAXELEM,
    FIXED_HASH_LIMIT, MAX_EXPAND,
};
pub use element::{Element, StoredElement};
pub use key::{KeyPart, KeyValue, LookupKey, MAX_DIMS};
pub use list_set::{kernel_dimension, ListMember, ListSet, Placement, DEFAULT_LIST_SIZE};
pub use nft::{format_duration, parse_duration};
/// The rule model's address family and performance|memory policy.
pub use parapet_model::{Family, Policy};
pub use reference::{packet_key, ref_fields, unreferenceable};
pub use set::Set;
pub use set_error::SetError;
pub use store::{Clock, LoadStats, ManualClock, SetStore, SystemClock};
pub use text::{address_family, element_key, parse_element, parse_type};

/// A parse or load error at a position of the input (1-based line and
/// column). The caller prefixes the file name: `FILE:LINE:COL: message`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    /// 1-based line.
    pub line: usize,
    /// 1-based column (in characters).
    pub column: usize,
    /// What was expected / what went wrong.
    pub message: String,
}

impl Error {
    pub(crate) fn new(line: usize, column: usize, message: impl Into<String>) -> Error {
        Error {
            line,
            column,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}: {}", self.line, self.column, self.message)
    }
}

impl std::error::Error for Error {}
