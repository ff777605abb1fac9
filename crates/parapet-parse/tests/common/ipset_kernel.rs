//! The ipset oracles' shared pieces (`list_set_kernel.rs`,
//! `ipset_legacy_kernel.rs`): sets loaded into a namespace's ipset, the
//! loopback packets they probe, and a [`SetStore`] as the linear engine's
//! set lookup.

#![allow(dead_code)]

use parapet_model::{Family, Packet, SetLookup, SetRef};
use parapet_sets::SetStore;
use parapet_testbed::Netns;
use std::io::Write;
use std::process::Stdio;

/// One protocol-253 packet from each of 127.0.0.1 … 127.0.0.`n` to
/// 127.0.0.1.
pub fn loopback_packets(n: u32) -> Vec<Packet> {
    (1..=n)
        .map(|k| {
            let mut p = Packet::new(Family::V4, 0x7f00_0000 | k as u128, 0x7f00_0001, 253, 0, 0);
            p.len = 60;
            p
        })
        .collect()
}

/// A [`SetStore`] as the linear engine's set lookup; every set a rule
/// references must be loaded.
pub struct Store(pub SetStore);

impl SetLookup for Store {
    fn contains(&self, r: &SetRef, pkt: &Packet) -> bool {
        self.0
            .ref_matches(r, pkt)
            .expect("every referenced set is loaded")
    }
}

/// `text` into `ns`'s ipset with `ipset restore`, which must accept it.
pub fn ipset_restore(ns: &Netns, text: &str) {
    let mut restore = ns
        .command("ipset")
        .arg("restore")
        .stdin(Stdio::piped())
        .spawn()
        .expect("ipset");
    restore
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    assert!(
        restore.wait().unwrap().success(),
        "ipset restore refused the sets"
    );
}
