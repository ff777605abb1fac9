//! `-m string` through parapetd against the kernel: in network namespaces
//! this test creates, the UDP datagrams of `string_kernel.rs` (both
//! algorithms, `--icase` ASCII and Latin-1, a pattern at and across
//! `--from`/`--to`, in the UDP header, `!`, two strings in one rule, at
//! the very end of a 1,400-byte datagram and cut by it) leave through
//! OUTPUT on loopback, once under iptables-legacy and once under
//! parapetd, which `apply` gave the same rules, at the netfilter hooks
//! (the BPF search of bpf/lib/patterns.h); the rule that counted each
//! datagram is compared datagram by datagram, and with the linear engine.
//! Needs root.

mod common;
#[path = "../../parapet-parse/tests/common/raw_out.rs"]
mod raw_out;
#[path = "../../parapet-parse/tests/common/string_probes.rs"]
mod string_probes;

use common::router::{applied_and_attached, rule_counts};
use parapet_model::{Family, LinearEngine, NoSets};
use parapet_parse::{parse, Format};
use parapet_testbed::{require_root, Netns};
use raw_out::{legacy_counters, load_legacy, send_wire, Sender};
use std::time::{Duration, Instant};
use string_probes::{probes, RULES};

const N_RULES: u32 = 9;

/// The rule that counted each probe (0: none), as `counts` reads them.
fn decisions(ns: &Netns, counts: &dyn Fn() -> Vec<u64>) -> Vec<u32> {
    let mut before = counts();
    probes()
        .iter()
        .map(|p| {
            ns.run_in(|| send_wire(p, p.datagram.as_deref().unwrap(), Sender::Loopback))
                .unwrap_or_else(|e| panic!("{p}: {e}"));
            // parapetd's counters reach its stats a moment later
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                let after = counts();
                let moved = after.iter().zip(&before).position(|(a, b)| a > b);
                if moved.is_some() || Instant::now() > deadline {
                    before = after;
                    return moved.map_or(0, |i| i as u32 + 1);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        })
        .collect()
}

fn netns(tag: &str) -> Netns {
    let ns = Netns::create(tag).unwrap();
    ns.ip(&["link", "set", "lo", "up"]).unwrap();
    ns
}

#[test]
#[ignore = "needs root"]
fn strings_at_the_netfilter_hooks_as_the_kernel() {
    require_root();
    let ns = netns("k13bpf-str-ipt");
    load_legacy(&ns, RULES, Family::V4);
    let kernel = decisions(&ns, &|| legacy_counters(&ns, Family::V4, "OUTPUT"));
    drop(ns);
    let distinct: std::collections::BTreeSet<u32> = kernel.iter().copied().collect();
    assert_eq!(
        distinct.len(),
        N_RULES as usize,
        "the kernel decided {kernel:?}"
    );
    let rs = parse(RULES, "string", Format::IptablesSave)
        .unwrap()
        .ruleset;
    let e = LinearEngine::new(&rs, rs.select_chain(Some("OUTPUT")).unwrap()).unwrap();
    let linear: Vec<u32> = probes()
        .iter()
        .map(|p| e.classify(p, &NoSets).unwrap().rule_id)
        .collect();
    assert_eq!(kernel, linear, "the linear engine");

    let ns = netns("k13bpf-str-pd");
    let d = applied_and_attached(&ns, RULES, None, &[]);
    let parapetd = decisions(&ns, &|| rule_counts(&d.sock, N_RULES));
    assert_eq!(parapetd, kernel, "parapetd at the netfilter hooks");
}
