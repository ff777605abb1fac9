//! The kernel as the oracle for verdict maps (a verdict after one applies
//! to its `continue` elements; anonymous set elements with their own
//! `counter`): the same nft script is loaded
//! with `nft -f` into a network namespace this test creates, UDP datagrams
//! go to 127.0.0.1 on each port, and whether one arrives (accepted) or not
//! (dropped) must equal the linear engine's verdict for that packet.

use parapet_model::*;
use parapet_parse::*;
use parapet_testbed::Netns;
use std::net::UdpSocket;
use std::time::Duration;

const RULES: &str = "define web = 1005
table inet t {
\tmap m {
\t\ttype inet_service : verdict
\t\telements = { 1000 : jump j, 1001 : drop, $web : accept, 1006 : continue, 1007 : return }
\t}
\tchain j {
\t\tudp sport 40000 drop
\t}
\tchain input {
\t\ttype filter hook input priority 0; policy accept;
\t\tiifname \"lo\" udp dport vmap @m
\t\tiifname \"lo\" udp dport vmap { 1008 : drop, 1009 : goto j, 1002-1004 : accept }
\t\tiifname \"lo\" udp dport 1006-1007 drop
\t\tiifname \"lo\" udp dport { 999 counter, 1010 counter packets 0 bytes 0 } drop
\t\tiifname \"lo\" udp dport vmap { 1011 : continue, 1012 : accept } drop
\t}
}
";

/// One datagram 127.0.0.1:40000 → 127.0.0.1:`port` (in the namespace the
/// caller entered): did it arrive within 200 ms?
fn udp_arrives(port: u16) -> bool {
    let rx = UdpSocket::bind(("127.0.0.1", port)).unwrap();
    rx.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let tx = UdpSocket::bind("127.0.0.1:40000").unwrap();
    tx.send_to(b"x", ("127.0.0.1", port)).unwrap();
    let mut buf = [0u8; 8];
    rx.recv_from(&mut buf).is_ok()
}

#[test]
#[ignore = "needs root"]
fn verdict_maps_agree_with_the_kernel() {
    parapet_testbed::require_root();
    let rs = parse(RULES, "vmap.nft", Format::Nft).unwrap().ruleset;
    let engine = LinearEngine::new(&rs, rs.select_chain(None).unwrap()).unwrap();
    let dir = std::env::temp_dir().join(format!("parapet-vmap-{}.nft", std::process::id()));
    std::fs::write(&dir, RULES).unwrap();
    let ns = Netns::create("vmap").unwrap();
    ns.exec(&["nft", "-f", dir.to_str().unwrap()]).unwrap();
    let ports: Vec<u16> = (999..=1013).collect();
    let arrived: Vec<bool> = ns.run_in(|| ports.iter().map(|&p| udp_arrives(p)).collect());
    let _ = std::fs::remove_file(&dir);
    for (p, kernel) in ports.iter().zip(arrived) {
        let mut pkt = Packet::v4(0x7f00_0001, 0x7f00_0001, 17, 40000, *p);
        pkt.iif = IfName::new("lo").unwrap();
        let d = engine.classify(&pkt, &NoSets).unwrap();
        assert_eq!(
            d.verdict == Verdict::Accept,
            kernel,
            "port {p}: parapet says {:?} (rule {}), the kernel {}",
            d.verdict,
            d.rule_id,
            if kernel { "accepted" } else { "dropped" }
        );
    }
}

/// `th`, `meta protocol`, anonymous concatenated sets, a verdict map on a
/// concatenation, a mark change no rule reads, and parts left to the
/// kernel (an arp table, a notrack statement) in one script.
const EXPRESSIONS: &str = "table arp a {
\tchain c {
\t\ttype filter hook input priority 0; policy accept;
\t\tcounter
\t}
}
table inet t {
\tchain input {
\t\ttype filter hook input priority 0; policy accept;
\t\tiifname \"lo\" meta mark set 0x1
\t\tiifname \"lo\" meta l4proto { tcp, udp } th dport 2001 drop
\t\tiifname \"lo\" meta protocol ip udp dport 2002 drop
\t\tiifname \"lo\" meta protocol ip6 udp dport 2003 drop
\t\tiifname \"lo\" meta l4proto . th dport { udp . 2004, tcp . 2005 } drop
\t\tiifname \"lo\" ip protocol . th dport vmap { udp . 2006 : drop, udp . 2007 : accept, tcp . 2006 : accept }
\t\tiifname \"lo\" meta l4proto { tcp, udp } th dport 2007-2008 drop
\t}
\tchain out {
\t\ttype filter hook output priority raw; policy accept;
\t\tudp dport 2009 notrack
\t}
}
";

#[test]
#[ignore = "needs root"]
fn concatenations_th_and_kernel_parts_agree_with_the_kernel() {
    parapet_testbed::require_root();
    let rs = parse(EXPRESSIONS, "expr.nft", Format::Nft).unwrap().ruleset;
    // the arp table and the notrack statement; the mark change is
    // parapet's own (a counter-only rule with `set_mark`, no rule reads it)
    assert_eq!(rs.left_to_kernel.len(), 2, "{:?}", rs.left_to_kernel);
    assert_eq!(
        rs.rules().filter(|r| r.set_mark.is_some()).count(),
        1,
        "the mark change"
    );
    let engine = LinearEngine::new(&rs, rs.select_chain(Some("input")).unwrap()).unwrap();
    let file = std::env::temp_dir().join(format!("parapet-expr-{}.nft", std::process::id()));
    std::fs::write(&file, EXPRESSIONS).unwrap();
    let ns = Netns::create("nftexpr").unwrap();
    ns.exec(&["nft", "-f", file.to_str().unwrap()]).unwrap();
    let _ = std::fs::remove_file(&file);
    let ports: Vec<u16> = (2000..=2010).collect();
    // (port, udp arrived, tcp connected)
    let arrived: Vec<(u16, bool, bool)> = ns.run_in(|| {
        ports
            .iter()
            .map(|&p| {
                let udp = udp_arrives(p);
                let l = std::net::TcpListener::bind(("127.0.0.1", p)).unwrap();
                let tcp = std::net::TcpStream::connect_timeout(
                    &std::net::SocketAddr::from(([127, 0, 0, 1], p)),
                    Duration::from_millis(300),
                )
                .is_ok();
                drop(l);
                (p, udp, tcp)
            })
            .collect()
    });
    let mut dropped = 0;
    for (p, udp, tcp) in arrived {
        for (proto, kernel) in [(17u8, udp), (6u8, tcp)] {
            let mut pkt = Packet::v4(0x7f00_0001, 0x7f00_0001, proto, 40000, p);
            pkt.iif = IfName::new("lo").unwrap();
            if proto == 6 {
                pkt.tcp_flags = 0x02;
            }
            let d = engine.classify(&pkt, &NoSets).unwrap();
            dropped += usize::from(!kernel);
            assert_eq!(
                d.verdict == Verdict::Accept,
                kernel,
                "proto {proto} port {p}: parapet says {:?} (rule {}), the kernel {}",
                d.verdict,
                d.rule_id,
                if kernel { "accepted" } else { "dropped" }
            );
        }
    }
    // The test can fail: the kernel dropped what the rules say (2001 both,
    // 2002 udp, 2004 udp, 2005 tcp, 2006 udp, 2007 tcp, 2008 both).
    assert_eq!(dropped, 9);
}

/// A named set keyed on the protocol and `th` (the rule keeps to port
/// protocols), masked comparisons (a port mask with three holes: eight
/// ranges; an address mask), and nft's `mark set` short form (left to the
/// kernel).
const MASKS_AND_SETS: &str = "table inet t {
\tset s {
\t\ttype inet_proto . inet_service
\t\telements = { udp . 3002, tcp . 3004 }
\t}
\tchain input {
\t\ttype filter hook input priority 0; policy accept;
\t\tiifname \"lo\" mark set 0x1
\t\tiifname \"lo\" meta l4proto . th dport @s drop
\t\tiifname \"lo\" udp dport & 0xfff1 == 3009 drop
\t\tiifname \"lo\" ip daddr & 255.0.255.0 != 127.0.0.0 drop
\t}
}
";

/// The file's set blocks, answering the rules' references.
struct Blocks(parapet_sets::SetStore);

impl SetLookup for Blocks {
    fn contains(&self, r: &SetRef, pkt: &Packet) -> bool {
        parapet_sets::packet_key(r, self.0.key_dims(&r.name), pkt)
            .and_then(|k| self.0.lookup(&r.name, &k))
            .unwrap_or(false)
    }
}

#[test]
#[ignore = "needs root"]
fn masked_comparisons_and_th_sets_agree_with_the_kernel() {
    parapet_testbed::require_root();
    let checked = check::check(MASKS_AND_SETS, "masks.nft", Format::Nft).unwrap();
    let rs = checked.parsed.unwrap().ruleset;
    let sets = Blocks(checked.sets);
    let engine = LinearEngine::new(&rs, rs.select_chain(Some("input")).unwrap()).unwrap();
    let file = std::env::temp_dir().join(format!("parapet-masks-{}.nft", std::process::id()));
    std::fs::write(&file, MASKS_AND_SETS).unwrap();
    let ns = Netns::create("nftmask").unwrap();
    ns.exec(&["nft", "-f", file.to_str().unwrap()]).unwrap();
    let _ = std::fs::remove_file(&file);
    let ports: Vec<u16> = (3000..=3024).collect();
    let arrived: Vec<(u16, bool, bool)> = ns.run_in(|| {
        ports
            .iter()
            .map(|&p| {
                let udp = udp_arrives(p);
                let l = std::net::TcpListener::bind(("127.0.0.1", p)).unwrap();
                let tcp = std::net::TcpStream::connect_timeout(
                    &std::net::SocketAddr::from(([127, 0, 0, 1], p)),
                    Duration::from_millis(300),
                )
                .is_ok();
                drop(l);
                (p, udp, tcp)
            })
            .collect()
    });
    let mut dropped = 0;
    for (p, udp, tcp) in arrived {
        for (proto, kernel) in [(17u8, udp), (6u8, tcp)] {
            let mut pkt = Packet::v4(0x7f00_0001, 0x7f00_0001, proto, 40000, p);
            pkt.iif = IfName::new("lo").unwrap();
            if proto == 6 {
                pkt.tcp_flags = 0x02;
            }
            let d = engine.classify(&pkt, &sets).unwrap();
            dropped += usize::from(!kernel);
            assert_eq!(
                d.verdict == Verdict::Accept,
                kernel,
                "proto {proto} port {p}: parapet says {:?} (rule {}), the kernel {}",
                d.verdict,
                d.rule_id,
                if kernel { "accepted" } else { "dropped" }
            );
        }
    }
    // udp 3002 and tcp 3004 (the set), udp 3009, 3011, …, 3023 (the mask).
    assert_eq!(dropped, 10);
}

/// Anonymous chains (`jump { … }`, `goto { … }`, with `return` and a
/// jump from one; nft refuses one inside another): each body is a chain
/// of its own, as nft makes it.
const BINDINGS: &str = "table inet t {
\tchain named {
\t\tudp dport 3001 accept
\t\tudp dport 3002 return
\t\tudp dport 3003 drop
\t}
\tchain input {
\t\ttype filter hook input priority 0; policy accept;
\t\tiifname \"lo\" udp dport 3000-3009 jump {
\t\t\tudp dport 3000 drop
\t\t\tudp dport 3001-3003 jump named
\t\t\tudp dport 3002 drop
\t\t\tudp dport 3004 return
\t\t}
\t\tiifname \"lo\" udp dport 3004-3005 drop
\t\tiifname \"lo\" udp dport 3006-3007 goto {
\t\t\tudp dport 3006 drop
\t\t}
\t\tiifname \"lo\" udp dport 3007 drop
\t}
}
";

#[test]
fn anonymous_chains_are_chains_of_their_own() {
    let rs = parse(BINDINGS, "bind.nft", Format::Nft).unwrap().ruleset;
    let names: Vec<&str> = rs.tables[0]
        .chains
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(names, ["named", "input", "__chain0", "__chain1"]);
    let engine = LinearEngine::new(&rs, rs.select_chain(None).unwrap()).unwrap();
    let accepted: Vec<bool> = (3000..=3009)
        .map(|p| {
            let mut pkt = Packet::v4(0x7f00_0001, 0x7f00_0001, 17, 40000, p);
            pkt.iif = IfName::new("lo").unwrap();
            engine.classify(&pkt, &NoSets).unwrap().verdict == Verdict::Accept
        })
        .collect();
    // 3002: the named chain's return lands in the anonymous body, which
    // drops it;
    // 3007: the goto's body decides nothing, so the rest of input is
    // skipped and the policy accepts.
    assert_eq!(
        accepted,
        [false, true, false, false, false, false, false, true, true, true]
    );
    // nft's own refusal, at the inner '{'.
    let nested = "table inet t {\n\tchain c {\n\t\tjump {\n\t\t\tjump {\n\t\t\t\taccept\n\t\t\t}\n\t\t}\n\t}\n}\n";
    let e = parse(nested, "n.nft", Format::Nft).unwrap_err()[0].to_string();
    assert!(
        e.starts_with("n.nft:4:9: an anonymous chain inside another"),
        "{e}"
    );
    // Listed as named chains, read back the same.
    let listing = render::nft(&rs).unwrap();
    let again = parse(&listing, "again.nft", Format::Nft).unwrap().ruleset;
    let engine2 = LinearEngine::new(&again, again.select_chain(None).unwrap()).unwrap();
    for p in 3000..=3009 {
        let mut pkt = Packet::v4(0x7f00_0001, 0x7f00_0001, 17, 40000, p);
        pkt.iif = IfName::new("lo").unwrap();
        assert_eq!(
            engine2.classify(&pkt, &NoSets).unwrap().verdict,
            engine.classify(&pkt, &NoSets).unwrap().verdict,
            "{listing}"
        );
    }
}

#[test]
#[ignore = "needs root"]
fn anonymous_chains_agree_with_the_kernel() {
    parapet_testbed::require_root();
    let rs = parse(BINDINGS, "bind.nft", Format::Nft).unwrap().ruleset;
    let engine = LinearEngine::new(&rs, rs.select_chain(None).unwrap()).unwrap();
    let file = std::env::temp_dir().join(format!("parapet-bind-{}.nft", std::process::id()));
    std::fs::write(&file, BINDINGS).unwrap();
    let ns = Netns::create("bind").unwrap();
    let loaded = ns.exec(&["nft", "-f", file.to_str().unwrap()]);
    let _ = std::fs::remove_file(&file);
    loaded.unwrap();
    let ports: Vec<u16> = (3000..=3009).collect();
    let arrived: Vec<bool> = ns.run_in(|| ports.iter().map(|&p| udp_arrives(p)).collect());
    for (p, kernel) in ports.iter().zip(arrived) {
        let mut pkt = Packet::v4(0x7f00_0001, 0x7f00_0001, 17, 40000, *p);
        pkt.iif = IfName::new("lo").unwrap();
        let d = engine.classify(&pkt, &NoSets).unwrap();
        assert_eq!(
            d.verdict == Verdict::Accept,
            kernel,
            "port {p}: parapet says {:?} (rule {}), the kernel {}",
            d.verdict,
            d.rule_id,
            if kernel { "accepted" } else { "dropped" }
        );
    }
}
