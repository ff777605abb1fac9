//! The kernel as the oracle for nft `quota`: the same ruleset goes into a
//! network namespace this test creates (`nft -f`), UDP datagrams of known
//! sizes go to 127.0.0.1, and which of them arrive must equal, datagram by
//! datagram, what the linear engine decides for the same sequence with
//! its state (`StatefulState`) — the count is in bytes of the IP packet,
//! so the fates do not depend on timing. Also: the listing reads back
//! equal.

mod common;
#[path = "common/raw_out.rs"]
mod raw_out;

use common::udp_lo;
use parapet_model::*;
use parapet_parse::*;
use parapet_testbed::Netns;
use std::net::UdpSocket;
use std::time::Duration;

/// 9999: accepted while 500 bytes last; 9998: dropped once 300 bytes
/// (and a `used` start of 100) are counted.
const QUOTA: &str = "table inet t {
\tchain input {
\t\ttype filter hook input priority 0; policy accept;
\t\tiifname \"lo\" udp dport 9999 quota 500 bytes accept
\t\tiifname \"lo\" udp dport 9999 drop
\t\tiifname \"lo\" udp dport 9998 quota over 300 bytes used 100 bytes drop
\t}
}
";

/// (port, payload bytes) of each datagram.
fn sequence() -> Vec<(u16, usize)> {
    (0..14)
        .map(|i| ([9999, 9998][i % 2], [100, 40, 1, 200][i % 4]))
        .collect()
}

fn arrivals(ns: &Netns, seq: &[(u16, usize)]) -> Vec<bool> {
    ns.run_in(|| {
        let rx: Vec<(u16, UdpSocket)> = [9998u16, 9999]
            .iter()
            .map(|p| {
                let s = UdpSocket::bind(("127.0.0.1", *p)).unwrap();
                s.set_read_timeout(Some(Duration::from_millis(100)))
                    .unwrap();
                (*p, s)
            })
            .collect();
        let tx = UdpSocket::bind("127.0.0.2:0").unwrap();
        seq.iter()
            .enumerate()
            .map(|(i, (port, size))| {
                let mut payload = vec![0u8; *size];
                payload[0] = i as u8;
                tx.send_to(&payload, ("127.0.0.1", *port)).unwrap();
                let s = &rx.iter().find(|(p, _)| p == port).unwrap().1;
                let mut buf = [0u8; 512];
                // Bounded: one datagram or the timeout.
                matches!(s.recv_from(&mut buf), Ok((n, _)) if n == *size && buf[0] == i as u8)
            })
            .collect()
    })
}

fn engine_fates(rs: &Ruleset, seq: &[(u16, usize)]) -> Vec<bool> {
    let engine = LinearEngine::new(rs, rs.select_chain(None).unwrap()).unwrap();
    let mut state = StatefulState::new(Clock {
        ns: 1_000_000,
        hz: 250,
    });
    seq.iter()
        .map(|(port, size)| {
            let mut pkt = Packet::v4(0x7f00_0002, 0x7f00_0001, 17, 40000, *port);
            pkt.iif = IfName::new("lo").unwrap();
            // skb->len at the input hook: the IP packet.
            pkt.len = 20 + 8 + *size as u32;
            let d = engine.classify_with(&pkt, &NoSets, &mut state).unwrap();
            d.verdict == Verdict::Accept
        })
        .collect()
}

#[test]
fn quota_listing_reads_back_equal() {
    let rs = parse(QUOTA, "quota.nft", Format::Nft).unwrap().ruleset;
    let listed = render::nft(&rs).unwrap();
    assert!(
        listed.contains("quota over 300 bytes used 100 bytes drop"),
        "{listed}"
    );
    let back = parse(&listed, "listed.nft", Format::Nft).unwrap().ruleset;
    let quotas =
        |rs: &Ruleset| -> Vec<Option<Quota>> { rs.rules().map(|r| r.quota.clone()).collect() };
    assert_eq!(quotas(&rs), quotas(&back));
    let mb = parse(
        "table ip t {\n chain c {\n  quota 25 mbytes accept\n }\n}\n",
        "mb.nft",
        Format::Nft,
    )
    .unwrap()
    .ruleset;
    assert_eq!(
        mb.rules().next().unwrap().quota.as_ref().unwrap().bytes,
        25 << 20
    );
    assert!(render::nft(&mb).unwrap().contains("quota 25 mbytes accept"));
}

#[test]
#[ignore = "needs root"]
fn quota_agrees_with_nft() {
    parapet_testbed::require_root();
    let ns = Netns::create("quota-nft").unwrap();
    raw_out::load_nft(&ns, QUOTA);
    let rs = parse(QUOTA, "quota.nft", Format::Nft).unwrap().ruleset;
    let seq = sequence();
    let kernel = arrivals(&ns, &seq);
    let parapet = engine_fates(&rs, &seq);
    udp_lo::assert_fates("quota (nft)", &kernel, &parapet);
}

/// `-m quota` (xt_quota): 9999 accepted while 500 bytes are left for the
/// datagram — the fourth takes the last 116 bytes exactly, where nft's
/// `quota 500 bytes` would already be over —; 9998 dropped once 300 are
/// not left (`!`).
const XT_QUOTA: &str = "*filter
:INPUT ACCEPT [0:0]
-A INPUT -i lo -p udp -m udp --dport 9999 -m quota --quota 500 -j ACCEPT
-A INPUT -i lo -p udp -m udp --dport 9999 -j DROP
-A INPUT -i lo -p udp -m udp --dport 9998 -m quota ! --quota 300 -j DROP
COMMIT
";

/// IP lengths 128, 128, 128, 116 (= 500), then 29s on 9999; 128s then
/// 29s on 9998.
fn xt_sequence() -> Vec<(u16, usize)> {
    let mut seq = Vec::new();
    for (i, size) in [100, 100, 100, 88, 1, 1].into_iter().enumerate() {
        seq.push((9999, size));
        seq.push((9998, if i < 3 { 100 } else { 1 }));
    }
    seq
}

#[test]
fn xt_quota_reads_as_nfts_quota_plus_one_and_lists_back() {
    let rs = parse(XT_QUOTA, "quota.v4", Format::IptablesSave)
        .unwrap()
        .ruleset;
    let quotas: Vec<Option<Quota>> = rs.rules().map(|r| r.quota.clone()).collect();
    let q = |bytes, over| {
        Some(Quota {
            bytes,
            over,
            used: 0,
        })
    };
    assert_eq!(quotas, [q(501, false), None, q(301, true)]);
    let listed = render::iptables_save(&rs).unwrap();
    assert!(
        listed.contains("-m quota --quota 500 -j ACCEPT"),
        "{listed}"
    );
    assert!(
        listed.contains("-m quota ! --quota 300 -j DROP"),
        "{listed}"
    );
    let back = parse(&listed, "listed.v4", Format::IptablesSave)
        .unwrap()
        .ruleset;
    assert_eq!(
        back.rules().map(|r| r.quota.clone()).collect::<Vec<_>>(),
        quotas
    );
    // nft's quota in iptables' spelling: `used` counts as taken.
    let nft = parse(
        "table ip filter {\n chain INPUT {\n  type filter hook input priority 0; policy accept;\n  udp dport 9 quota 500 bytes accept\n  udp dport 8 quota over 300 bytes used 100 bytes drop\n }\n}\n",
        "quota.nft",
        Format::Nft,
    )
    .unwrap()
    .ruleset;
    let listed = render::iptables_save(&nft).unwrap_or_else(|e| panic!("{e:?}"));
    assert!(
        listed.contains("-m quota --quota 499 -j ACCEPT"),
        "{listed}"
    );
    assert!(
        listed.contains("-m quota ! --quota 199 -j DROP"),
        "{listed}"
    );
    for bad in [
        "-m quota --quota x",
        "-m quota --quota 18446744073709551615",
    ] {
        let text = format!("*filter\n:INPUT ACCEPT [0:0]\n-A INPUT {bad} -j DROP\nCOMMIT\n");
        let e = parse(&text, "bad.v4", Format::IptablesSave).unwrap_err();
        assert!(format!("{e:?}").contains("after --quota"), "{bad}: {e:?}");
    }
}

#[test]
#[ignore = "needs root"]
fn xt_quota_agrees_with_iptables_legacy() {
    parapet_testbed::require_root();
    let ns = Netns::create("quota-xt").unwrap();
    udp_lo::load(&ns, "quota-xt", XT_QUOTA);
    let rs = parse(XT_QUOTA, "quota.v4", Format::IptablesSave)
        .unwrap()
        .ruleset;
    let seq = xt_sequence();
    let kernel = arrivals(&ns, &seq);
    let parapet = engine_fates(&rs, &seq);
    // The fourth 9999 datagram (index 6) fits exactly: it arrives.
    assert!(kernel[6], "the kernel's fates {kernel:?}");
    assert!(
        !kernel[8] && kernel[1] && !kernel[5],
        "the kernel's fates {kernel:?} do not tell anything"
    );
    assert_eq!(
        parapet, kernel,
        "parapet vs the kernel, datagram by datagram"
    );
}

/// A named quota object is read and checked (as a rule's quota), and
/// decides nothing by itself; a rule counting against one is refused at
/// its position (the count shared by every rule naming it is not kept).
#[test]
fn quota_objects_are_checked_and_rules_naming_them_refused() {
    let table = |body: &str, rule: &str| {
        format!(
            "table inet t {{\n\tquota q {{\n\t\t{body}\n\t}}\n\tchain c {{\n\t\ttype filter hook input priority 0; policy accept;\n\t\t{rule}\n\t}}\n}}\n"
        )
    };
    for body in ["over 25 mbytes", "2000 bytes used 10 bytes", "25mbytes"] {
        let text = table(body, "udp dport 53 drop");
        let rs = parse(&text, "q.nft", Format::Nft)
            .unwrap_or_else(|e| panic!("{body}: {e:?}"))
            .ruleset;
        assert_eq!(rs.rules().count(), 1, "{body}");
    }
    for (body, rule, want) in [
        (
            "over 25 furlongs",
            "accept",
            "q.nft:3:11: expected the end of quota object",
        ),
        (
            "25 mbytes extra",
            "accept",
            "q.nft:3:13: expected the end of quota object 'q'",
        ),
        (
            "25 mbytes",
            "quota name \"q\" drop",
            "q.nft:7:9: a rule using a named quota object",
        ),
    ] {
        let e = parse(&table(body, rule), "q.nft", Format::Nft).unwrap_err()[0].to_string();
        assert!(e.starts_with(want), "{body} / {rule}: {e}");
    }
}
