//! The kernel as the oracle for `-m statistic` (xt_statistic): the same
//! ruleset goes into a network namespace this test creates
//! (`iptables-legacy-restore`), UDP datagrams go to 127.0.0.1, and which
//! of them arrive must equal, datagram by datagram, what the linear engine
//! decides for the same sequence with its state (`StatefulState`). nth
//! counts packets, so the fates do not depend on timing; random with
//! probability 0 and 1 is exact, 0.5 is checked on the kernel's counters
//! and the engine's answers within a binomial bound. Also: listings read
//! back equal, and iptables' refusals are refused with their position.

mod common;
#[path = "common/raw_out.rs"]
mod raw_out;
#[path = "common/save_text.rs"]
mod save_text;

use common::udp_lo;
use parapet_model::*;
use parapet_parse::*;
use parapet_testbed::Netns;
use raw_out::{legacy_counters, load_nft};
use save_text::{listed_back, refused, refused_at};
use std::net::Ipv4Addr;

/// 9001: every third datagram from packet 1 dropped; 9002: the others
/// (`!`); 9003: the counter of rule 3 moves for every UDP datagram from
/// 127.0.0.2 that reaches it (any port: the `-m udp --dport` after the
/// statistic match runs after it, as the kernel runs matches in order),
/// and datagrams from 127.0.0.3 never move it (`-s` fails first); 9004
/// and 9005: probability 0 and 1.
const NTH: &str = "*filter
:INPUT ACCEPT [0:0]
-A INPUT -i lo -p udp -m udp --dport 9001 -m statistic --mode nth --every 3 --packet 1 -j DROP
-A INPUT -i lo -p udp -m udp --dport 9002 -m statistic --mode nth ! --every 3 --packet 1 -j DROP
-A INPUT -s 127.0.0.2/32 -i lo -p udp -m statistic --mode nth --every 2 --packet 0 -m udp --dport 9003 -j DROP
-A INPUT -i lo -p udp -m udp --dport 9004 -m statistic --mode random --probability 0.00000000000 -j DROP
-A INPUT -i lo -p udp -m udp --dport 9005 -m statistic --mode random --probability 1.00000000000 -j DROP
COMMIT
";

/// Sources and ports in a pattern that visits every rule with both
/// sources, in an order that is not periodic in 2 or 3.
fn sequence() -> Vec<udp_lo::Send> {
    let ports = [
        9001, 9003, 9002, 9001, 9003, 9004, 9003, 9005, 9001, 9002, 9003,
    ];
    (0..66)
        .map(|i| {
            let src = Ipv4Addr::new(127, 0, 0, if (i / 5) % 3 == 2 { 3 } else { 2 });
            (src, ports[i % ports.len()], 0)
        })
        .collect()
}

fn engine_fates(rs: &Ruleset, seq: &[udp_lo::Send]) -> Vec<bool> {
    let engine = LinearEngine::new(rs, rs.select_chain(None).unwrap()).unwrap();
    let mut state = StatefulState::new(Clock {
        ns: 1_000_000,
        hz: 250,
    });
    seq.iter()
        .map(|(src, port, _)| {
            let mut pkt = Packet::v4(u32::from(*src), 0x7f00_0001, 17, 40000, *port);
            pkt.iif = IfName::new("lo").unwrap();
            let d = engine.classify_with(&pkt, &NoSets, &mut state).unwrap();
            d.verdict == Verdict::Accept
        })
        .collect()
}

#[test]
fn statistic_lists_back_as_iptables_save_writes_it() {
    let (rs, _, back) = listed_back(NTH, "nth.v4");
    let stats: Vec<Option<Statistic>> = rs.rules().map(|r| r.statistic.clone()).collect();
    let nth = |every, packet, invert| {
        Some(Statistic {
            mode: StatisticMode::Nth { every, packet },
            invert,
        })
    };
    let random = |threshold| {
        Some(Statistic {
            mode: StatisticMode::Random { threshold },
            invert: false,
        })
    };
    assert_eq!(
        stats,
        [
            nth(3, 1, false),
            nth(3, 1, true),
            nth(2, 0, false),
            random(0),
            random(1 << 31)
        ]
    );
    assert_eq!(
        back.rules()
            .map(|r| r.statistic.clone())
            .collect::<Vec<_>>(),
        stats
    );
    // iptables' rounding: 0.3 is stored as lround(0.3 × 2^31) and printed
    // from it; that reads back to the same threshold.
    let p = parse(
        "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -m statistic --mode random ! --probability 0.3 -j DROP\nCOMMIT\n",
        "p.v4",
        Format::IptablesSave,
    )
    .unwrap()
    .ruleset;
    let listed = render::iptables_save(&p).unwrap();
    assert!(
        listed.contains("-m statistic --mode random ! --probability 0.29999999981 -j DROP"),
        "{listed}"
    );
    let back = parse(&listed, "p2.v4", Format::IptablesSave)
        .unwrap()
        .ruleset;
    assert_eq!(
        back.rules().next().unwrap().statistic,
        p.rules().next().unwrap().statistic
    );
    // nft: nth as numgen; random has no spelling parapet writes.
    let nft = render::nft(&parse(
        "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -m statistic --mode nth ! --every 4 --packet 2 -j DROP\nCOMMIT\n",
        "n.v4",
        Format::IptablesSave,
    )
    .unwrap()
    .ruleset)
    .unwrap();
    assert!(nft.contains("numgen inc mod 4 != 2 drop"), "{nft}");
    let err = render::nft(&p).unwrap_err();
    assert!(format!("{err:?}").contains("meta random"), "{err:?}");
}

#[test]
fn statistic_refusals_are_iptables_and_carry_a_position() {
    for (opts, col, says) in [
        (
            "-m statistic --mode nth --every 0 --packet 0",
            42,
            "out of range",
        ),
        (
            "-m statistic --mode nth --every 3 --packet 3",
            53,
            "0 <= p <= n-1",
        ),
        (
            "-m statistic --mode nth --every 3",
            13,
            "also requires \"--packet\"",
        ),
        (
            "-m statistic --mode random --probability 1.5",
            51,
            "out of range (0-1)",
        ),
        (
            "-m statistic --mode random --probability -0.1",
            51,
            "out of range (0-1)",
        ),
        ("-m statistic --every 3 --packet 0", 13, "--mode"),
        (
            "-m statistic --mode random",
            13,
            "--probability must be specified",
        ),
        ("-m statistic --mode nth", 13, "--every and --packet"),
        (
            "-m statistic ! --mode nth --every 2 --packet 0",
            23,
            "cannot be inverted",
        ),
        ("-m statistic --mode odd", 30, "bad mode"),
        (
            "-m statistic --mode nth --mode nth --every 2 --packet 0",
            34,
            "only be used once",
        ),
        (
            "-m statistic --mode random --probability 0.5 --every 2",
            55,
            "cannot be used with",
        ),
    ] {
        refused_at(&format!("-A INPUT {opts} -j DROP"), col, says);
    }
}

#[test]
#[ignore = "needs root"]
fn nth_and_random_extremes_agree_with_iptables_legacy() {
    parapet_testbed::require_root();
    let ns = Netns::create("k13stat-nth").unwrap();
    udp_lo::load(&ns, "k13stat-nth", NTH);
    let rs = parse(NTH, "nth.v4", Format::IptablesSave).unwrap().ruleset;
    let seq = sequence();
    let (kernel, _) = udp_lo::arrivals(&ns, &seq);
    let parapet = engine_fates(&rs, &seq);
    let dropped = kernel.iter().filter(|a| !**a).count();
    assert!(
        dropped > 10 && dropped < seq.len() - 10,
        "the kernel's fates {kernel:?} do not tell anything"
    );
    assert_eq!(
        parapet, kernel,
        "parapet vs the kernel, datagram by datagram"
    );
}

#[test]
#[ignore = "needs root"]
fn random_half_agrees_with_iptables_legacy_within_five_sigma() {
    const N: u64 = 2000;
    // 5 sigma of Binomial(2000, 1/2): 5 × sqrt(500) ≈ 112. A walker that
    // always or never matches is 1000 away.
    const BOUND: u64 = 112;
    const HALF: &str = "*filter
:INPUT ACCEPT [0:0]
-A INPUT -i lo -p udp -m udp --dport 9010 -m statistic --mode random --probability 0.5 -j ACCEPT
-A INPUT -i lo -p udp -m udp --dport 9010 -j ACCEPT
COMMIT
";
    parapet_testbed::require_root();
    let ns = Netns::create("k13stat-random").unwrap();
    udp_lo::load(&ns, "k13stat-random", HALF);
    ns.run_in(|| {
        let tx = std::net::UdpSocket::bind("127.0.0.2:0").unwrap();
        for i in 0..N {
            // No socket listens: the datagram is counted at INPUT, then
            // answered with a port unreachable the test ignores.
            tx.send_to(&[i as u8], ("127.0.0.1", 9010)).unwrap();
        }
    });
    let counts = legacy_counters(&ns, Family::V4, "INPUT");
    assert_eq!(counts.iter().sum::<u64>(), N, "{counts:?}");
    assert!(
        counts[0].abs_diff(N / 2) <= BOUND,
        "the kernel matched {} of {N}",
        counts[0]
    );
    let rs = parse(HALF, "half.v4", Format::IptablesSave)
        .unwrap()
        .ruleset;
    let engine = LinearEngine::new(&rs, rs.select_chain(None).unwrap()).unwrap();
    let mut state = StatefulState::new(Clock { ns: 1, hz: 250 });
    let mut pkt = Packet::v4(0x7f00_0002, 0x7f00_0001, 17, 40000, 9010);
    pkt.iif = IfName::new("lo").unwrap();
    let first = (0..N)
        .filter(|_| {
            let d = engine.classify_with(&pkt, &NoSets, &mut state).unwrap();
            d.rule_id == rs.rules().next().unwrap().id
        })
        .count() as u64;
    assert!(
        first.abs_diff(N / 2) <= BOUND,
        "the linear engine matched {first} of {N}"
    );
}

/// nft's `numgen inc mod N [offset O] [!=] V`: the same counter as
/// `--mode nth --every N --packet V-O`.
const NUMGEN: &str = "table inet k13stat {
\tchain input {
\t\ttype filter hook input priority 0; policy accept;
\t\tiifname \"lo\" udp dport 9001 numgen inc mod 3 1 drop
\t\tiifname \"lo\" udp dport 9002 numgen inc mod 4 offset 5 != 7 drop
\t}
}
";

#[test]
fn numgen_inc_reads_as_nth_and_lists_back() {
    let rs = parse(NUMGEN, "numgen.nft", Format::Nft).unwrap().ruleset;
    let stats: Vec<Option<Statistic>> = rs.rules().map(|r| r.statistic.clone()).collect();
    let nth = |every, packet, invert| {
        Some(Statistic {
            mode: StatisticMode::Nth { every, packet },
            invert,
        })
    };
    assert_eq!(stats, [nth(3, 1, false), nth(4, 2, true)]);
    let listed = render::nft(&rs).unwrap();
    assert!(listed.contains("numgen inc mod 4 != 2 drop"), "{listed}");
    let back = parse(&listed, "listed.nft", Format::Nft).unwrap().ruleset;
    assert_eq!(
        back.rules()
            .map(|r| r.statistic.clone())
            .collect::<Vec<_>>(),
        stats
    );
    for (expr, says) in [
        ("numgen random mod 2 0", "numgen random"),
        (
            "numgen inc mod 2 vmap { 0 : accept, 1 : drop }",
            "verdict map",
        ),
        ("numgen inc mod 2 { 0, 1 }", "set"),
        ("numgen inc mod 2 offset 3 1", "never 1"),
        ("numgen inc mod 2 0 udp dport 9", "after 'numgen'"),
    ] {
        let text = format!("table ip t {{\n chain c {{\n  {expr} accept\n }}\n}}\n");
        let err = refused(&text, "bad.nft", Format::Nft);
        assert!(
            err.contains("bad.nft:3:") && err.contains(says),
            "{expr}: {err}"
        );
    }
}

#[test]
#[ignore = "needs root"]
fn numgen_inc_agrees_with_nft() {
    parapet_testbed::require_root();
    let ns = Netns::create("k13stat-numgen").unwrap();
    load_nft(&ns, NUMGEN);
    let rs = parse(NUMGEN, "numgen.nft", Format::Nft).unwrap().ruleset;
    let seq: Vec<udp_lo::Send> = sequence()
        .into_iter()
        .filter(|s| s.1 == 9001 || s.1 == 9002)
        .collect();
    let (kernel, _) = udp_lo::arrivals(&ns, &seq);
    let parapet = engine_fates(&rs, &seq);
    udp_lo::assert_fates("numgen (nft)", &kernel, &parapet);
}
