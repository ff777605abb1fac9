//! The kernel as the oracle for `limit`: the same ruleset goes into a
//! network namespace this test creates (`iptables-legacy-restore`, `nft
//! -f`), 20 UDP datagrams go to 127.0.0.1 in quick succession, and which of
//! them arrive must equal, datagram by datagram, what the linear engine
//! decides for the same sequence with its buckets (`StatefulState`): with
//! 1/hour and a burst of 5 the first five pass and no token comes back
//! within the test, so the sequence does not depend on timing.

use parapet_model::*;
use parapet_parse::*;
use parapet_testbed::Netns;
use std::net::UdpSocket;
use std::time::Duration;

const IPTABLES: &str = "*filter
:INPUT ACCEPT [0:0]
-A INPUT -i lo -p udp -m udp --dport 9999 -m limit --limit 1/hour --limit-burst 5 -j ACCEPT
-A INPUT -i lo -p udp -m udp --dport 9999 -j DROP
COMMIT
";

const NFT: &str = "table inet t {
\tchain input {
\t\ttype filter hook input priority 0; policy accept;
\t\tiifname \"lo\" udp dport 9999 limit rate 1/hour burst 5 packets accept
\t\tiifname \"lo\" udp dport 9999 drop
\t}
}
";

/// `over`: the rule matches once the bucket is empty.
const NFT_OVER: &str = "table inet t {
\tchain input {
\t\ttype filter hook input priority 0; policy accept;
\t\tiifname \"lo\" udp dport 9999 limit rate over 1/hour burst 5 packets drop
\t}
}
";

/// A named limit object two rules share: one bucket for both ports.
const NFT_OBJECT: &str = "table inet t {
\tlimit shared {
\t\trate 1/hour burst 5 packets
\t}

\tchain input {
\t\ttype filter hook input priority 0; policy accept;
\t\tiifname \"lo\" udp dport 9999 limit name \"shared\" accept
\t\tiifname \"lo\" udp dport 9998 limit name \"shared\" accept
\t\tiifname \"lo\" udp dport { 9998, 9999 } drop
\t}
}
";

/// `limit name KEY map`: the port picks the object (3 and 2 tokens); a
/// port in no element breaks the rule (the next one drops it).
const NFT_OBJECT_MAP: &str = "table inet t {
\tlimit a {
\t\trate 1/hour burst 3 packets
\t}

\tlimit b {
\t\trate 1/hour burst 2 packets
\t}

\tchain input {
\t\ttype filter hook input priority 0; policy accept;
\t\tiifname \"lo\" limit name udp dport map { 9999 : \"a\", 9998 : \"b\" } accept
\t\tiifname \"lo\" udp dport { 9997, 9998, 9999 } drop
\t}
}
";

/// Which of `n` datagrams sent to 127.0.0.1 in the namespace arrive, the
/// i-th to port `ports[i % ports.len()]`.
fn arrivals(ns: &Netns, n: usize, ports: &[u16]) -> Vec<bool> {
    ns.run_in(|| {
        let rx: Vec<UdpSocket> = ports
            .iter()
            .map(|p| {
                let s = UdpSocket::bind(("127.0.0.1", *p)).unwrap();
                s.set_read_timeout(Some(Duration::from_millis(100)))
                    .unwrap();
                s
            })
            .collect();
        let tx = UdpSocket::bind("127.0.0.1:40000").unwrap();
        (0..n)
            .map(|i| {
                let k = i % ports.len();
                tx.send_to(&[i as u8], ("127.0.0.1", ports[k])).unwrap();
                let mut buf = [0u8; 4];
                // Bounded: one datagram or the timeout.
                matches!(rx[k].recv_from(&mut buf), Ok((1, _)) if buf[0] == i as u8)
            })
            .collect()
    })
}

/// The linear engine's fates for the same sequence, 1 ms apart.
fn engine_fates(rs: &Ruleset, n: usize, ports: &[u16]) -> Vec<bool> {
    let engine = LinearEngine::new(rs, rs.select_chain(None).unwrap()).unwrap();
    let mut state = StatefulState::new(Clock {
        ns: 1_000_000,
        hz: 250,
    });
    (0..n as u64)
        .map(|i| {
            let port = ports[i as usize % ports.len()];
            let mut pkt = Packet::v4(0x7f00_0001, 0x7f00_0001, 17, 40000, port);
            pkt.iif = IfName::new("lo").unwrap();
            state.set_ns(1_000_000 * (i + 1));
            let d = engine.classify_with(&pkt, &NoSets, &mut state).unwrap();
            d.verdict == Verdict::Accept
        })
        .collect()
}

/// Loads `text` into the namespace with `tool` (`nft -f`,
/// `iptables-legacy-restore`), through a file that is removed after.
fn load(ns: &Netns, tool: &str, ext: &str, text: &str) {
    let file = std::env::temp_dir().join(format!("parapet-limit-{}.{ext}", std::process::id()));
    std::fs::write(&file, text).unwrap();
    let mut argv: Vec<&str> = tool.split(' ').collect();
    argv.push(file.to_str().unwrap());
    let loaded = ns.exec(&argv);
    let _ = std::fs::remove_file(&file);
    loaded.unwrap_or_else(|e| panic!("{tool}: {e}"));
}

fn check(name: &str, kernel: Vec<bool>, parapet: Vec<bool>) {
    assert_eq!(
        kernel.iter().filter(|a| **a).count(),
        5,
        "{name}: the kernel let {kernel:?} through"
    );
    assert_eq!(
        parapet, kernel,
        "{name}: parapet vs the kernel, datagram by datagram"
    );
}

#[test]
#[ignore = "needs root"]
fn iptables_limit_agrees_with_iptables_legacy() {
    parapet_testbed::require_root();
    let ns = Netns::create("limit-ipt").unwrap();
    load(&ns, "iptables-legacy-restore", "v4", IPTABLES);
    let rs = parse(IPTABLES, "limit.v4", Format::IptablesSave)
        .unwrap()
        .ruleset;
    check(
        "iptables",
        arrivals(&ns, 20, &[9999]),
        engine_fates(&rs, 20, &[9999]),
    );
}

#[test]
#[ignore = "needs root"]
fn nft_limit_agrees_with_nft() {
    parapet_testbed::require_root();
    for (name, text, ports) in [
        ("nft", NFT, &[9999u16][..]),
        ("nft over", NFT_OVER, &[9999][..]),
        ("nft named object", NFT_OBJECT, &[9999, 9998][..]),
        ("nft object map", NFT_OBJECT_MAP, &[9999, 9998, 9997][..]),
    ] {
        let ns = Netns::create("limit-nft").unwrap();
        load(&ns, "nft -f", "nft", text);
        let rs = parse(text, "limit.nft", Format::Nft).unwrap().ruleset;
        check(name, arrivals(&ns, 20, ports), engine_fates(&rs, 20, ports));
    }
}
