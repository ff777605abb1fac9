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

use parapet_model::{Family, Field, IntervalSet, LinearEngine, NoSets, Packet};
use parapet_parse::{parse, render, Format};
use parapet_testbed::{require_root, Netns};
use raw_out::{agree, first_moved, legacy_counters, load_legacy, send_wire, Sender};

/// Rule 1: MSS (2); 2: kind 30 written as hex; 3: 7 present and 8 absent
/// (two -m tcp); 4: no NOP; 5: kind 77; 6: the rest of the probes.
const RULES: &str = "*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A OUTPUT -p tcp -m tcp --sport 40000 --tcp-option 2 -j ACCEPT
-A OUTPUT -p tcp -m tcp --sport 40000 --tcp-option 30 -j ACCEPT
-A OUTPUT -p tcp -m tcp --sport 40000 --tcp-option 7 -m tcp ! --tcp-option 8 -j ACCEPT
-A OUTPUT -p tcp -m tcp --sport 40000 ! --tcp-option 1 -j ACCEPT
-A OUTPUT -p tcp -m tcp --sport 40000 --tcp-option 77 -j ACCEPT
-A OUTPUT -p tcp -m tcp --sport 40000 -j ACCEPT
COMMIT
";

/// The option areas probed: (area, where nft's walk answers otherwise).
fn areas() -> Vec<(Vec<u8>, bool)> {
    let mut last_kind = vec![1u8; 39];
    last_kind.push(2);
    vec![
        (vec![], false),
        // MSS 1460, NOP, NOP, SACK permitted
        (vec![2, 4, 5, 0xb4, 1, 1, 4, 2], false),
        // NOP, NOP, timestamps
        (vec![1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0], false),
        // a kind after End of Option List is found (in the last byte,
        // which nft never reads)
        (vec![0, 0, 0, 7], true),
        (vec![7, 2, 8, 2], false),
        // a length of 0 moves one byte on: the 0 is End of List, then 2
        (vec![5, 0, 2, 0], false),
        // a length of 1: the length byte is read as the next kind (NOP)
        (vec![9, 1, 2, 0], false),
        // window scale's value byte 30 is not a kind
        (vec![3, 3, 30, 0], false),
        // a length past the area ends the walk: 2 is not found (nor by
        // nft, which misses option 6 as well)
        (vec![6, 200, 2, 1], false),
        // kind 30 running past the area: xt finds it, nft does not
        (vec![1, 1, 30, 9], true),
        (vec![77, 2, 1, 1], false),
        // option 77 running past the area: xt finds it, nft does not
        (vec![1, 77, 4, 0], true),
        // a kind in the last byte: xt finds it, nft never reads it
        (last_kind, true),
        (vec![0, 0, 0, 30], true),
    ]
}

fn probes(family: Family) -> Vec<Packet> {
    let lo = match family {
        Family::V4 => 0x7f00_0001,
        Family::V6 => 1,
    };
    areas()
        .into_iter()
        .map(|(area, _)| {
            let mut p = Packet::new(family, lo, lo, 6, 40000, 9999);
            p.tcp_options = (!area.is_empty()).then(|| area.into_boxed_slice());
            p
        })
        .collect()
}

/// The probe as raw bytes from the IP header on: a TCP segment whose data
/// offset covers `p.tcp_options` (or, with `doff`, says that many words).
fn segment(p: &Packet, doff: Option<u8>) -> Vec<u8> {
    let opts = p.tcp_options.as_deref().unwrap_or(&[]);
    let mut tcp = Vec::new();
    tcp.extend(p.sport.to_be_bytes());
    tcp.extend(p.dport.to_be_bytes());
    tcp.extend([0, 0, 0, 1, 0, 0, 0, 0]);
    tcp.push(doff.unwrap_or(5 + opts.len() as u8 / 4) << 4);
    tcp.push(p.tcp_flags);
    tcp.extend([0xff, 0xff, 0, 0, 0, 0]);
    tcp.extend(opts);
    let mut ip = match p.family {
        Family::V4 => {
            let mut h = vec![0x45, 0, 0, 0, 0, 1, 0, 0, 64, 6, 0, 0];
            h.extend((p.src as u32).to_be_bytes());
            h.extend((p.dst as u32).to_be_bytes());
            h[2..4].copy_from_slice(&(20 + tcp.len() as u16).to_be_bytes());
            let c = raw_out::checksum(&h);
            h[10..12].copy_from_slice(&c.to_be_bytes());
            h
        }
        Family::V6 => {
            let mut h = vec![0x60, 0, 0, 0, 0, 0, 6, 64];
            h[4..6].copy_from_slice(&(tcp.len() as u16).to_be_bytes());
            h.extend(p.src.to_be_bytes());
            h.extend(p.dst.to_be_bytes());
            h
        }
    };
    ip.extend(tcp);
    ip
}

/// Which rule counted each probe: the first whose counter (`counters`,
/// the chain's rules in order) grew while it passed.
fn decisions(ns: &Netns, packets: &[Packet], counters: &dyn Fn() -> Vec<u64>) -> Vec<u32> {
    let mut before = counters();
    packets
        .iter()
        .map(|p| {
            ns.run_in(|| send_wire(p, &segment(p, None), Sender::Loopback))
                .unwrap_or_else(|e| panic!("{p}: {e}"));
            let after = counters();
            let moved: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
            before = after;
            first_moved(&moved)
        })
        .collect()
}

/// `RULES` in nft's own words.
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

fn v6_rules() -> String {
    format!("# Generated by ip6tables-save\n{RULES}")
}

#[test]
#[ignore = "needs root"]
fn tcp_options_agree_with_iptables_legacy() {
    require_root();
    let ns = Netns::create("k13str-tcpopt").unwrap();
    ns.ip(&["link", "set", "lo", "up"]).unwrap();
    for (family, rules) in [(Family::V4, RULES.to_string()), (Family::V6, v6_rules())] {
        load_legacy(&ns, &rules, family);
        let packets = probes(family);
        let kernel = decisions(&ns, &packets, &|| legacy_counters(&ns, family, "OUTPUT"));
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
    ns.ip(&["link", "set", "lo", "up"]).unwrap();
    load_legacy(&ns, RULES, Family::V4);
    let p = probes(Family::V4).remove(0);
    let sent = ns.run_in(|| send_wire(&p, &segment(&p, Some(15)), Sender::Loopback));
    assert_eq!(
        sent.map_err(|e| e.raw_os_error()),
        Err(Some(libc::EPERM)),
        "the kernel should have dropped it"
    );
    assert_eq!(legacy_counters(&ns, Family::V4, "OUTPUT"), [0; 6]);
}

/// nft's own `tcp option N exists|missing` (nft_exthdr), the rules of
/// `RULES` written in it: it agrees with the linear engine (xt_tcpudp's
/// walk) on every probe but those where nft's walk answers otherwise, and
/// differs on each of those, which is why `list` writes no nft spelling.
/// (iptables-nft keeps xt_tcpudp: it loads `--tcp-option` as the xt
/// match, whatever `nft list` prints for it.)
#[test]
#[ignore = "needs root"]
fn nfts_own_walk_differs_exactly_where_expected() {
    require_root();
    let ns = Netns::create("k13str-tcpopt-nft").unwrap();
    ns.ip(&["link", "set", "lo", "up"]).unwrap();
    raw_out::load_nft(&ns, NFT);
    let packets = probes(Family::V4);
    let kernel = decisions(&ns, &packets, &|| {
        raw_out::nft_counters(&ns, "inet", "t", "output")
    });
    let rs = parse(RULES, "tcpopt", Format::Auto).unwrap().ruleset;
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
    let rs = parse(RULES, "tcpopt.v4", Format::IptablesSave)
        .unwrap()
        .ruleset;
    let third = rs.rules().nth(2).unwrap();
    assert_eq!(
        third.matches.get(Field::TcpOption(7)),
        Some(&IntervalSet::point(1))
    );
    assert_eq!(
        third.matches.get(Field::TcpOption(8)),
        Some(&IntervalSet::point(0))
    );
    let listed = render::iptables_save(&rs).unwrap();
    for line in RULES.lines().filter(|l| l.starts_with("-A")) {
        assert!(listed.contains(line), "{line} not in\n{listed}");
    }
    let back = parse(&listed, "listed.v4", Format::IptablesSave)
        .unwrap()
        .ruleset;
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
        let text = format!("*filter\n:INPUT ACCEPT [0:0]\n{rule}\nCOMMIT\n");
        let e = match parse(&text, "bad.v4", Format::IptablesSave) {
            Ok(_) => panic!("{rule}: accepted"),
            Err(e) => e
                .iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join("\n"),
        };
        if col > 0 {
            assert!(
                e.contains(&format!("bad.v4:3:{col}:")) && e.contains(what),
                "{rule}: {e}"
            );
        }
    }
}

/// lint reads `--tcp-option` as the one-bit field it is: a rule testing
/// an option behind a rule dropping every segment with it is unreachable,
/// one behind a `!` test of another option is not, and the witness packet
/// carries the option (the linear engine sends it to the shadowing rule).
#[test]
fn lint_sees_tcp_options_and_its_witness_carries_them() {
    use parapet_model::{flatten_unpruned, lint, Budget};
    let text = "*filter
:INPUT DROP [0:0]
-A INPUT -p tcp -m tcp --tcp-option 30 -j DROP
-A INPUT -p tcp -m tcp ! --tcp-option 2 -j ACCEPT
-A INPUT -p tcp -m tcp --tcp-option 30 -j ACCEPT
-A INPUT -p tcp -m tcp --tcp-option 2 -j ACCEPT
COMMIT
";
    let rs = parse(text, "l.v4", Format::IptablesSave).unwrap().ruleset;
    let list = flatten_unpruned(&rs, rs.select_chain(None).unwrap(), 1000).unwrap();
    let report = lint(&rs, std::slice::from_ref(&list), Budget::default()).unwrap();
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
