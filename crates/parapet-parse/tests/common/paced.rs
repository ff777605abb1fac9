//! One sequence of loopback datagrams (source 127.0.0.H, destination
//! port) through the specification and the flattened list, 1 ms apart on a
//! test clock, and through the kernel (`udp_lo`): the oracles of a limit on
//! a jump, of matches after a stateful one, of two stateful matches in
//! one rule and of nft's dynamic sets. Not in `common/mod.rs`: only those
//! files use it (`#[path]`).

// Each test binary uses some of these.
#![allow(dead_code)]

use crate::common::udp_lo;
use parapet_model::*;
use parapet_testbed::Netns;
use std::net::Ipv4Addr;

/// The linear engine's and the flattened list's fates (accepted or not).
pub fn engine_fates(rs: &Ruleset, seq: &[(u8, u16)]) -> (Vec<bool>, Vec<bool>) {
    let start = rs.select_chain(None).unwrap();
    let engine = LinearEngine::new(rs, start).unwrap();
    let list = flatten(rs, start).unwrap();
    let clock = Clock {
        ns: 1_000_000,
        hz: 250,
    };
    let (mut spec_state, mut list_state) = (StatefulState::new(clock), StatefulState::new(clock));
    seq.iter()
        .enumerate()
        .map(|(i, (h, port))| {
            let src = u32::from(Ipv4Addr::new(127, 0, 0, *h));
            let mut pkt = Packet::v4(src, 0x7f00_0001, 17, 40000, *port);
            pkt.iif = IfName::new("lo").unwrap();
            let ns = 1_000_000 * (i as u64 + 1);
            spec_state.set_ns(ns);
            list_state.set_ns(ns);
            let spec = engine
                .classify_with(&pkt, &NoSets, &mut spec_state)
                .unwrap();
            let flat = list.classify_stateful(&pkt, &[], &mut list_state);
            (
                spec.verdict == Verdict::Accept,
                flat.verdict == Verdict::Accept,
            )
        })
        .unzip()
}

/// Which datagrams arrive with `rules` (iptables-save) loaded by
/// iptables-legacy into a namespace of the test's own named `name`.
pub fn kernel_fates(name: &str, rules: &str, seq: &[(u8, u16)]) -> Vec<bool> {
    let ns = Netns::create(name).unwrap();
    udp_lo::load(&ns, name, rules);
    arrivals(&ns, seq)
}

/// Which datagrams of the sequence arrive in `ns`, sent back to back
/// ([`udp_lo::arrivals`]).
pub fn arrivals(ns: &Netns, seq: &[(u8, u16)]) -> Vec<bool> {
    let seq: Vec<udp_lo::Send> = seq
        .iter()
        .map(|(h, p)| (Ipv4Addr::new(127, 0, 0, *h), *p, 0))
        .collect();
    udp_lo::arrivals(ns, &seq).0
}
