//! The end-to-end tests' bed: two fresh namespaces joined by a veth pair
//! (the shared [`parapet_testbed::Pair`]), removed again on drop.

#![allow(dead_code)]

use std::net::Ipv4Addr;

// Not every test file that uses this module needs these.
#[allow(unused_imports)]
pub use parapet_testbed::{in_netns, require_root};
use parapet_testbed::{Pair, Veth};

pub mod daemon;
pub mod host;
pub mod nf_twins;
pub mod offline;
pub mod prometheus;
pub mod router;
pub mod router_case4;
pub mod tc_bed;

/// The peer side's first address (more may be added per test).
pub const A_ADDR: [u8; 4] = [10, 203, 0, 1];
/// The filtered side's address.
pub const B_ADDR: [u8; 4] = [10, 203, 0, 2];

/// A test bed: namespace `a` (the peer, sending from `va`) and namespace
/// `b` (the filter, receiving on `vb`).
pub struct Bed {
    /// Removes both namespaces (and with them the veth pair).
    pub guard: Pair,
    /// The peer namespace.
    pub a: String,
    /// The filtered namespace.
    pub b: String,
    /// The peer's veth.
    pub va: String,
    /// The filtered veth.
    pub vb: String,
}

/// Two namespaces joined by a veth pair; IPv6 off so no neighbour
/// discovery noise reaches the counters; static neighbours so nothing but
/// the test's packets cross the wire. `extra` are more peer addresses in
/// 10.203.0.0/24 (each gets a static neighbour entry on the filtered side
/// too, so TCP answers need no ARP either). Names carry `tag` and the pid.
/// Panics when the bed cannot be built.
pub fn testbed(tag: &str, extra: &[[u8; 4]]) -> Bed {
    let pid = std::process::id();
    let (va, vb) = (
        format!("pr{tag}va{}", pid % 10000),
        format!("pr{tag}vb{}", pid % 10000),
    );
    let extra: Vec<Ipv4Addr> = extra.iter().map(|a| Ipv4Addr::from(*a)).collect();
    let veth = Veth {
        a_dev: &va,
        b_dev: &vb,
        a_addr: Ipv4Addr::from(A_ADDR),
        b_addr: Ipv4Addr::from(B_ADDR),
        prefix_len: 24,
        a_extra: &extra,
        disable_ipv6: true,
        ..Veth::default()
    };
    let guard =
        Pair::create(tag, &veth).unwrap_or_else(|e| panic!("cannot build the netns test bed: {e}"));
    Bed {
        a: guard.a.name().to_string(),
        b: guard.b.name().to_string(),
        guard,
        va,
        vb,
    }
}
