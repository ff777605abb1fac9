//! The kernel as the oracle for nft dynamic sets: the same ruleset goes
//! into a network namespace this test creates (`nft -f`), UDP datagrams
//! from several loopback addresses (127.0.0.2, .3, .4) go to 127.0.0.1,
//! and which of them arrive must equal, datagram by datagram, what the
//! linear engine decides for the same sequence with its state
//! (`StatefulState`). Limits are 1/hour and timeouts an hour, so no token
//! comes back and no element expires within the test: the fates do not
//! depend on timing. Also: each ruleset's nft listing reads back equal.

use parapet_model::*;
use parapet_parse::*;
use parapet_testbed::Netns;
use std::net::UdpSocket;
use std::time::Duration;

/// The SSH brute-force pattern: per source address, a bucket of 3; the
/// fourth datagram and later are dropped.
const METER: &str = "table inet t {
\tset m {
\t\ttype ipv4_addr
\t\tsize 16
\t\tflags dynamic
\t}

\tchain input {
\t\ttype filter hook input priority 0; policy accept;
\t\tiifname \"lo\" udp dport 9999 add @m { ip saddr limit rate over 1/hour burst 3 packets } drop
\t}
}
";

/// Port knocking: a datagram to 9998 adds the source; 9999 accepts
/// members and drops the rest; 9997 removes the source again.
const KNOCK: &str = "table ip t {
\tset knocked {
\t\ttype ipv4_addr
\t\tsize 16
\t\tflags dynamic,timeout
\t\ttimeout 1h
\t}

\tchain input {
\t\ttype filter hook input priority 0; policy accept;
\t\tiifname \"lo\" udp dport 9998 update @knocked { ip saddr timeout 2h }
\t\tiifname \"lo\" udp dport 9997 delete @knocked { ip saddr }
\t\tiifname \"lo\" udp dport 9999 ip saddr @knocked accept
\t\tiifname \"lo\" udp dport 9999 drop
\t}
}
";

/// A full set refuses a new key (the kernel's `NFT_BREAK`): the third
/// address is never added, so the `!=` lookup drops its datagrams while
/// the members' get through.
const FULL: &str = "table inet t {
\tset two {
\t\ttype ipv4_addr
\t\tsize 2
\t\tflags dynamic
\t}

\tchain input {
\t\ttype filter hook input priority 0; policy accept;
\t\tiifname \"lo\" udp dport 9998 add @two { ip saddr }
\t\tiifname \"lo\" udp dport 9999 ip saddr != @two drop
\t}
}
";

/// A meter, the older spelling (per source, a bucket of 2).
const OLD_METER: &str = "table ip t {
\tchain input {
\t\ttype filter hook input priority 0; policy accept;
\t\tiifname \"lo\" udp dport 9999 meter flood size 128 { ip saddr limit rate over 1/hour burst 2 packets } drop
\t}
}
";

/// Counters in a set and in its elements count, and decide nothing: the
/// set declares `counter` (each element counts); the limit's element also
/// counts, after its limit (nft_dynset runs the element's expressions in
/// order, the counter never fails).
const COUNTED: &str = "table ip t {
\tset seen {
\t\ttype ipv4_addr
\t\tsize 16
\t\tflags dynamic
\t\tcounter
\t}

\tset flood {
\t\ttype ipv4_addr
\t\tsize 16
\t\tflags dynamic,timeout
\t\ttimeout 1h
\t}

\tchain input {
\t\ttype filter hook input priority 0; policy accept;
\t\tiifname \"lo\" udp dport 9998 update @seen { ip saddr }
\t\tiifname \"lo\" udp dport 9999 ip saddr != @seen drop
\t\tiifname \"lo\" udp dport 9999 update @flood { ip saddr limit rate over 1/hour burst 2 packets counter } drop
\t}
}
";

/// Keys of an address and a service: a knock on 9001 admits the source
/// to 9101 (a constant port), a first datagram to 9102 admits its source
/// to 9102 (the packet's port) and is dropped, a knock on 9003 takes the
/// 9101 admission away again.
const PAIRS: &str = "table inet t {
\tset pairs {
\t\ttype ipv4_addr . inet_service
\t\tsize 16
\t\tflags dynamic,timeout
\t\ttimeout 1h
\t}

\tchain input {
\t\ttype filter hook input priority 0; policy accept;
\t\tiifname \"lo\" udp dport 9001 add @pairs { ip saddr . 9101 }
\t\tiifname \"lo\" udp dport 9003 delete @pairs { ip saddr . 9101 }
\t\tiifname \"lo\" udp dport 9101-9102 ip saddr . udp dport @pairs accept
\t\tiifname \"lo\" udp dport 9102 add @pairs { ip saddr . udp dport } drop
\t\tiifname \"lo\" udp dport 9101 drop
\t}
}
";

/// Port knocking in three steps as nft's own test writes it: each knock
/// is a lookup of the previous one and, in the same rule, an `add` of the
/// next (the lookup decides first: a knock out of turn adds nothing).
const KNOCK_STEPS: &str = "table inet t {
\tset cand {
\t\ttype ipv4_addr . inet_service
\t\tsize 16
\t\tflags dynamic,timeout
\t\ttimeout 1h
\t}

\tset clients {
\t\ttype ipv4_addr
\t\tsize 16
\t\tflags dynamic,timeout
\t\ttimeout 1h
\t}

\tchain input {
\t\ttype filter hook input priority 0; policy accept;
\t\tiifname \"lo\" udp dport 9001 add @cand { ip saddr . 9002 timeout 1h }
\t\tiifname \"lo\" udp dport 9002 ip saddr . udp dport @cand add @cand { ip saddr . 9003 timeout 1h }
\t\tiifname \"lo\" udp dport 9003 ip saddr . udp dport @cand add @clients { ip saddr timeout 2h }
\t\tiifname \"lo\" udp dport 9999 ip saddr @clients accept
\t\tiifname \"lo\" udp dport 9999 drop
\t}
}
";

/// (source host byte, port) of each datagram.
type Sequence = Vec<(u8, u16)>;

/// Which datagrams arrive: each is sent from 127.0.0.`src` to 127.0.0.1.
fn arrivals(ns: &Netns, seq: &Sequence) -> Vec<bool> {
    ns.run_in(|| {
        let mut ports: Vec<u16> = seq.iter().map(|(_, p)| *p).collect();
        ports.sort();
        ports.dedup();
        let rx: Vec<(u16, UdpSocket)> = ports
            .iter()
            .map(|p| {
                let s = UdpSocket::bind(("127.0.0.1", *p)).unwrap();
                s.set_read_timeout(Some(Duration::from_millis(100)))
                    .unwrap();
                (*p, s)
            })
            .collect();
        let tx: Vec<UdpSocket> = (2..=4u8)
            .map(|h| UdpSocket::bind(("127.0.0.".to_string() + &h.to_string(), 0)).unwrap())
            .collect();
        seq.iter()
            .enumerate()
            .map(|(i, (src, port))| {
                tx[(*src - 2) as usize]
                    .send_to(&[i as u8], ("127.0.0.1", *port))
                    .unwrap();
                let s = &rx.iter().find(|(p, _)| p == port).unwrap().1;
                let mut buf = [0u8; 4];
                // Bounded: one datagram or the timeout.
                matches!(s.recv_from(&mut buf), Ok((1, _)) if buf[0] == i as u8)
            })
            .collect()
    })
}

/// The linear engine's fates for the same sequence, 1 ms apart.
fn engine_fates(rs: &Ruleset, seq: &Sequence) -> Vec<bool> {
    let engine = LinearEngine::new(rs, rs.select_chain(None).unwrap()).unwrap();
    let mut state = StatefulState::new(Clock {
        ns: 1_000_000,
        hz: 250,
    });
    seq.iter()
        .enumerate()
        .map(|(i, (src, port))| {
            let mut pkt = Packet::v4(
                0x7f00_0000 | *src as u128 as u32,
                0x7f00_0001,
                17,
                40000,
                *port,
            );
            pkt.iif = IfName::new("lo").unwrap();
            state.set_ns(1_000_000 * (i as u64 + 1));
            let d = engine.classify_with(&pkt, &NoSets, &mut state).unwrap();
            d.verdict == Verdict::Accept
        })
        .collect()
}

fn load(ns: &Netns, text: &str) {
    let file = std::env::temp_dir().join(format!("parapet-dynset-{}.nft", std::process::id()));
    std::fs::write(&file, text).unwrap();
    let loaded = ns.exec(&["nft", "-f", file.to_str().unwrap()]);
    let _ = std::fs::remove_file(&file);
    loaded.unwrap_or_else(|e| panic!("nft -f: {e}"));
}

fn cases() -> Vec<(&'static str, &'static str, Sequence)> {
    let meter: Sequence = (0..12).map(|i| ([2, 3, 2, 4][i % 4], 9999)).collect();
    let knock = vec![
        (2, 9999),
        (2, 9998),
        (2, 9999),
        (3, 9999),
        (3, 9998),
        (3, 9999),
        (2, 9997),
        (2, 9999),
        (3, 9999),
        (2, 9998),
        (2, 9999),
    ];
    let full = vec![
        (2, 9999),
        (2, 9998),
        (3, 9998),
        (4, 9998),
        (2, 9999),
        (3, 9999),
        (4, 9999),
    ];
    let old: Sequence = (0..8).map(|i| ([2, 3][i % 2], 9999)).collect();
    let pairs = vec![
        (2, 9101),
        (2, 9001),
        (2, 9101),
        (3, 9101),
        (3, 9102),
        (3, 9102),
        (2, 9102),
        (2, 9102),
        (3, 9101),
        (2, 9003),
        (2, 9101),
        (2, 9102),
        (4, 9102),
        (4, 9102),
        (4, 9101),
    ];
    let knock_steps = vec![
        (2, 9999),
        (2, 9002),
        (2, 9003),
        (2, 9999),
        (2, 9001),
        (2, 9003),
        (2, 9999),
        (2, 9002),
        (2, 9003),
        (2, 9999),
        (3, 9002),
        (3, 9999),
        (3, 9001),
        (3, 9002),
        (3, 9003),
        (3, 9999),
        (4, 9999),
    ];
    let counted = vec![
        (2, 9999),
        (2, 9998),
        (3, 9998),
        (2, 9999),
        (2, 9999),
        (3, 9999),
        (2, 9999),
        (4, 9999),
        (3, 9999),
        (3, 9999),
    ];
    vec![
        ("meter-like add with a limit", METER, meter),
        ("port knocking", KNOCK, knock),
        ("a full set", FULL, full),
        ("meter", OLD_METER, old),
        ("counters in a set and in an element", COUNTED, counted),
        ("keys of an address and a service", PAIRS, pairs),
        (
            "knocks: a lookup and an add in one rule",
            KNOCK_STEPS,
            knock_steps,
        ),
    ]
}

#[test]
fn listings_read_back_equal() {
    for (name, text, _) in cases() {
        let rs = parse(text, "dynset.nft", Format::Nft).unwrap().ruleset;
        let listed = render::nft(&rs).unwrap_or_else(|e| panic!("{name}: {e}"));
        let back = parse(&listed, "listed.nft", Format::Nft)
            .unwrap_or_else(|e| panic!("{name}: {e:?}\n{listed}"))
            .ruleset;
        let rules = |rs: &Ruleset| -> Vec<Rule> {
            rs.tables
                .iter()
                .flat_map(|t| &t.chains)
                .flat_map(|c| c.rules.iter().cloned())
                .map(|mut r| {
                    r.origin = Origin::default();
                    r.counters = Counters::default();
                    r
                })
                .collect()
        };
        assert_eq!(rules(&rs), rules(&back), "{name}:\n{listed}");
    }
}

#[test]
fn clear_refusals() {
    for (text, want) in [
        (
            "table ip t {\n set s { type ipv4_addr . ipv4_addr; flags dynamic; }\n chain c { add @s { ip saddr . ip daddr } }\n}\n",
            "2:",
        ),
        (
            "table ip t {\n set s { type ipv4_addr; flags dynamic; }\n chain c { add @s { ip saddr quota 10 bytes } }\n}\n",
            "3:",
        ),
        (
            "table ip t {\n set s { type ipv4_addr; flags dynamic; }\n chain c { add @s { ip saddr } tcp dport 22 drop }\n}\n",
            "3:",
        ),
        (
            "table ip t {\n chain c {\n  tcp dport 22 ct count over 2 drop\n }\n}\n",
            "3:",
        ),
        (
            "table ip t {\n map m { type ipv4_addr : ipv4_addr; }\n chain c { update @m { ip saddr : ip daddr } }\n}\n",
            "3:",
        ),
    ] {
        let e = parse(text, "bad.nft", Format::Nft).unwrap_err();
        let shown = format!("{}", e[0]);
        assert!(shown.contains(&format!("bad.nft:{want}")), "{shown}");
    }
}

#[test]
#[ignore = "needs root"]
fn dynamic_sets_agree_with_nft() {
    parapet_testbed::require_root();
    for (name, text, seq) in cases() {
        let ns = Netns::create("dynset-nft").unwrap();
        load(&ns, text);
        let rs = parse(text, "dynset.nft", Format::Nft).unwrap().ruleset;
        let kernel = arrivals(&ns, &seq);
        let parapet = engine_fates(&rs, &seq);
        assert!(
            kernel.iter().any(|a| *a) && kernel.iter().any(|a| !*a),
            "{name}: the kernel's fates {kernel:?} do not tell anything"
        );
        assert_eq!(
            parapet, kernel,
            "{name}: parapet vs the kernel, datagram by datagram"
        );
    }
}
