//! The kernel as the oracle for `-m tcp [!] --tcp-option N` (xt_tcpudp's
//! `tcp_find_option`): the same rules go into iptables-legacy and
//! ip6tables-legacy in a network namespace this test creates, TCP segments
//! with chosen option areas (well-formed ones, and the malformed ones
//! whose answer depends on the walk: a kind after End of Option List, a
//! length of 0 or 1, a length past the area, a kind in the last byte, a
//! value byte equal to the kind) leave through OUTPUT on loopback, and the
//! rule whose counter moved is compared with the linear engine's decision,
//! segment by segment. nft's own `tcp option N exists` walks otherwise:
//! checked on the segments where it must differ (why `list` writes no nft
//! spelling). Also: listings read
//! back equal, iptables' refusals are refused with their position, and a
//! segment whose data offset runs past the packet is dropped by the
//! kernel without a counter (the hotdrop the model does not describe).

#[path = "common/raw_out.rs"]
mod raw_out;
#[path = "common/save_text.rs"]
mod save_text;

use parapet_model::{Family, Field, IntervalSet, LinearEngine, NoSets, Packet};
use parapet_parse::{parse, render, Format};
use parapet_testbed::{require_root, Netns};
use raw_out::{
    agree, counted_decisions, legacy_counters, load_legacy, send_wire, tcp_option_areas as areas,
    tcp_option_packets, tcp_option_rules, tcp_segment as segment, Sender,
};
use save_text::{input_rule_file, linted, listed_back, refused, refused_at};

/// Which rule counted each probe, sent as its segment: the first whose
/// counter (`counters`, the chain's rules in order) grew while it passed.
fn decisions(ns: &Netns, packets: &[Packet], counters: impl Fn() -> Vec<u64>) -> Vec<u32> {
    counted_decisions(ns, packets, counters, |p| {
        send_wire(p, &segment(p, None), Sender::Loopback).unwrap_or_else(|e| panic!("{p}: {e}"))
    })
}

/// [`tcp_option_rules`] in nft's own words.
const NFT: &str = "table inet t {
\tchain output {
\t\ttype filter hook output priority 0; policy accept;
\t\ttcp sport 40000 tcp option 2 exists counter accept
\t\ttcp sport 40000 tcp option 30 exists counter accept
\t\ttcp sport 40000 tcp option 7 exists tcp option 8 missing counter accept
\t\ttcp sport 40000 tcp option 1 missing counter accept
\t\ttcp sport 40000 tcp option 77 exists counter accept
\t\ttcp sport 40000 counter accept
\t}
}
";

#[test]
#[ignore = "needs root"]
fn tcp_options_agree_with_iptables_legacy() {
    require_root();
    let ns = Netns::create("k13str-tcpopt").unwrap();
    for family in [Family::V4, Family::V6] {
        let rules = tcp_option_rules(family);
        load_legacy(&ns, &rules, family);
        let packets = tcp_option_packets(family);
        let kernel = decisions(&ns, &packets, || legacy_counters(&ns, family, "OUTPUT"));
        agree(&rules, "tcpopt", "filter/OUTPUT", &packets, &kernel, 6);
    }
}

/// A data offset of 15 words on a 20-byte header: the option area is not
/// in the packet, and xt_tcpudp drops the segment ("hotdrop") at the first
/// rule whose earlier matches hold, counting no rule.
#[test]
#[ignore = "needs root"]
fn a_truncated_option_area_is_dropped_by_the_kernel() {
    require_root();
    let ns = Netns::create("k13str-tcpopt-drop").unwrap();
    load_legacy(&ns, &tcp_option_rules(Family::V4), Family::V4);
    let p = tcp_option_packets(Family::V4).remove(0);
    let sent = ns.run_in(|| send_wire(&p, &segment(&p, Some(15)), Sender::Loopback));
    assert_eq!(
        sent.map_err(|e| e.raw_os_error()),
        Err(Some(libc::EPERM)),
        "the kernel should have dropped it"
    );
    assert_eq!(legacy_counters(&ns, Family::V4, "OUTPUT"), [0; 6]);
}

/// nft's own `tcp option N exists|missing` (nft_exthdr), the rules of
/// [`tcp_option_rules`] written in it: it agrees with the linear engine (xt_tcpudp's
/// walk) on every probe but those where nft's walk answers otherwise, and
/// differs on each of those, which is why `list` writes no nft spelling.
/// (iptables-nft keeps xt_tcpudp: it loads `--tcp-option` as the xt
/// match, whatever `nft list` prints for it.)
#[test]
#[ignore = "needs root"]
fn nfts_own_walk_differs_exactly_where_expected() {
    require_root();
    let ns = Netns::create("k13str-tcpopt-nft").unwrap();
    raw_out::load_nft(&ns, NFT);
    let packets = tcp_option_packets(Family::V4);
    let kernel = decisions(&ns, &packets, || {
        raw_out::nft_counters(&ns, "inet", "t", "output")
    });
    let rs = parse(&tcp_option_rules(Family::V4), "tcpopt", Format::Auto)
        .unwrap()
        .ruleset;
    let engine = LinearEngine::new(&rs, rs.select_chain(Some("filter/OUTPUT")).unwrap()).unwrap();
    for ((p, k), (_, nft_differs)) in packets.iter().zip(&kernel).zip(areas()) {
        let ours = engine.classify(p, &NoSets).unwrap().rule_id;
        assert_eq!(
            *k != ours,
            nft_differs,
            "{p}: nft rule {k}, parapet (xt) rule {ours}"
        );
    }
}

#[test]
fn tcp_options_list_back_as_iptables_save_writes_them() {
    let (rs, _, back) = listed_back(&tcp_option_rules(Family::V4), "tcpopt.v4");
    let third = rs.rules().nth(2).unwrap();
    assert_eq!(
        third.matches.get(Field::TcpOption(7)),
        Some(&IntervalSet::point(1))
    );
    assert_eq!(
        third.matches.get(Field::TcpOption(8)),
        Some(&IntervalSet::point(0))
    );
    assert!(rs
        .rules()
        .map(|r| &r.matches)
        .eq(back.rules().map(|r| &r.matches)));
    // iptables-save's order: ports, the option, the flags
    let one = "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -p tcp -m tcp --sport 5 --dport 22 --tcp-option 0x2 --tcp-flags SYN SYN -m tcp ! --tcp-option 010 -j DROP\nCOMMIT\n";
    let listed =
        render::iptables_save(&parse(one, "o.v4", Format::IptablesSave).unwrap().ruleset).unwrap();
    assert!(
        listed.contains("-A INPUT -p tcp -m tcp --sport 5 --dport 22 --tcp-option 2 --tcp-flags SYN SYN -m tcp ! --tcp-option 8 -j DROP"),
        "{listed}"
    );
    let nft = render::nft(&rs).unwrap_err().to_string();
    assert!(nft.contains("--tcp-option has no nft spelling"), "{nft}");
}

#[test]
fn iptables_refusals_are_refused_with_their_position() {
    for (rule, col, what) in [
        ("-A INPUT -p tcp -m tcp --tcp-option 0 -j DROP", 37, "1-255"),
        (
            "-A INPUT -p tcp -m tcp --tcp-option 256 -j DROP",
            37,
            "1-255",
        ),
        (
            "-A INPUT -p tcp -m tcp --tcp-option 08 -j DROP",
            37,
            "1-255",
        ),
        (
            "-A INPUT -p tcp -m tcp --tcp-option 3 --tcp-option 4 -j DROP",
            39,
            "only one --tcp-option",
        ),
        ("-A INPUT -p udp -m tcp --tcp-option 3 -j DROP", 0, ""),
        ("-A INPUT -p tcp -m udp --tcp-option 3 -j DROP", 0, ""),
    ] {
        if col > 0 {
            refused_at(rule, col, what);
        } else {
            refused(&input_rule_file(rule), "bad.v4", Format::IptablesSave);
        }
    }
}

/// lint reads `--tcp-option` as the one-bit field it is: a rule testing
/// an option behind a rule dropping every segment with it is unreachable,
/// one behind a `!` test of another option is not, and the witness packet
/// carries the option (the linear engine sends it to the shadowing rule).
#[test]
fn lint_sees_tcp_options_and_its_witness_carries_them() {
    let text = "*filter
:INPUT DROP [0:0]
-A INPUT -p tcp -m tcp --tcp-option 30 -j DROP
-A INPUT -p tcp -m tcp ! --tcp-option 2 -j ACCEPT
-A INPUT -p tcp -m tcp --tcp-option 30 -j ACCEPT
-A INPUT -p tcp -m tcp --tcp-option 2 -j ACCEPT
COMMIT
";
    let (rs, _, report) = linted(text, "l.v4", Format::IptablesSave);
    let flagged: Vec<u32> = report.findings.iter().map(|f| f.rule).collect();
    assert_eq!(flagged, [3], "{:?}", report.findings);
    let witness = report.findings[0]
        .explain
        .witness
        .clone()
        .expect("a witness");
    assert!(witness.tcp_options.is_some(), "{witness}");
    let engine = LinearEngine::new(&rs, rs.select_chain(None).unwrap()).unwrap();
    assert_eq!(
        engine.classify(&witness, &NoSets).unwrap().rule_id,
        1,
        "{witness}"
    );
}
