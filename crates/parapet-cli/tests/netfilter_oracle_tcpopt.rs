//! `-m tcp --tcp-option` through parapetd against the kernel: in network
//! namespaces this test creates, TCP segments with chosen option areas
//! (well formed, and the malformed ones whose answer depends on xt_tcpudp's
//! walk: a kind after End of Option List, lengths of 0 and 1, a length past
//! the area, a kind in the last byte, a value byte equal to the kind) and
//! one whose data offset runs past the segment leave through OUTPUT on
//! loopback, once under iptables-legacy (ip6tables-legacy) and once under
//! parapetd, which `apply` gave the same rules, at the netfilter hooks; the
//! rule that counted each segment and whether sendto saw it dropped are
//! compared segment by segment, and with the linear engine. Needs root.

mod common;
#[path = "../../parapet-parse/tests/common/raw_out.rs"]
mod raw_out;

use common::router::{applied_and_attached, rule_counts};
use parapet_model::{Family, LinearEngine, NoSets};
use parapet_parse::{parse, Format};
use parapet_testbed::{require_root, Netns};
use raw_out::{
    legacy_counters, load_legacy, raw_decisions, tcp_option_packets as packets, tcp_option_rules,
    tcp_segment,
};

/// The rules of [`tcp_option_rules`].
const N_RULES: u32 = 6;

/// Every probe's bytes: the packets' segments, then one whose data offset
/// (15 words) runs past its 20-byte header.
fn probes(family: Family) -> Vec<Vec<u8>> {
    let packets = packets(family);
    let mut out: Vec<Vec<u8>> = packets.iter().map(|p| tcp_segment(p, None)).collect();
    out.push(tcp_segment(&packets[0], Some(15)));
    out
}

/// (sendto's errno, the rule that counted: 0 none) of every probe.
fn decisions(ns: &Netns, family: Family, counts: impl Fn() -> Vec<u64>) -> Vec<(Option<i32>, u32)> {
    raw_decisions(ns, &packets(family)[0], &probes(family), counts)
}

#[test]
#[ignore = "needs root"]
fn tcp_options_at_the_netfilter_hooks_as_the_kernel() {
    require_root();
    for family in [Family::V4, Family::V6] {
        let text = tcp_option_rules(family);
        let ns = Netns::create("k13opt-nf-ipt").unwrap();
        load_legacy(&ns, &text, family);
        let kernel = decisions(&ns, family, || legacy_counters(&ns, family, "OUTPUT"));
        drop(ns);
        let n = packets(family).len();
        // the data offset past the segment is hot-dropped, no rule counted
        assert_eq!(kernel[n], (Some(libc::EPERM), 0), "{family:?} kernel twin");
        let distinct: std::collections::BTreeSet<u32> = kernel.iter().map(|k| k.1).collect();
        assert!(distinct.len() >= 6, "the kernel decided only {distinct:?}");
        let rs = parse(&text, "tcpopt", Format::IptablesSave)
            .unwrap()
            .ruleset;
        let e = LinearEngine::new(&rs, rs.select_chain(Some("OUTPUT")).unwrap()).unwrap();
        let linear: Vec<(Option<i32>, u32)> = packets(family)
            .iter()
            .map(|p| (None, e.classify(p, &NoSets).unwrap().rule_id))
            .collect();
        assert_eq!(kernel[..n], linear, "{family:?}: the linear engine");

        let ns = Netns::create("k13opt-nf-pd").unwrap();
        let d = applied_and_attached(&ns, &text, None, &[]);
        let parapetd = decisions(&ns, family, || rule_counts(&d.sock, N_RULES));
        assert_eq!(
            parapetd, kernel,
            "{family:?}: parapetd at the netfilter hooks"
        );
    }
}
