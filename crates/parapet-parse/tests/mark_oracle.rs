//! The kernel as the oracle for marks: `-m mark`/`-m connmark --mark
//! V[/M]` (iptables-legacy) and `meta mark`/`ct mark` (nft). The kernel
//! gets a mangle part that sets each packet's mark and connection mark
//! from its source address (left to the kernel, as parapet leaves such
//! parts) and the filter rules; raw protocol-253 packets leave through
//! OUTPUT on loopback, and the rule whose counter moved is compared with
//! the linear engine's decision on the filter rules for the same packet
//! carrying the marks mangle gave it. Also: both syntaxes write the marks
//! back to the same decisions, and a rule matching a mark that a part
//! left to the kernel sets is refused.

#[path = "common/raw_out.rs"]
mod raw_out;

use parapet_model::{Family, LinearEngine, NoSets, Packet, Ruleset};
use parapet_parse::{parse, Format};
use parapet_testbed::{require_root, Netns};
use raw_out::{iptables_decisions, listings_keep, nft_decisions, Sender};

const FILTER: &str = "*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A OUTPUT -p 253 -m mark --mark 0x11 -j ACCEPT
-A OUTPUT -p 253 -m mark --mark 0x2/0x2 -j ACCEPT
-A OUTPUT -p 253 -m connmark --mark 0x4/0xc -j ACCEPT
-A OUTPUT -p 253 -m mark ! --mark 0x0/0xf0 -m connmark --mark 0x1/0x1 -j ACCEPT
-A OUTPUT -p 253 -m mark --mark 0x100/0xff00 -j ACCEPT
-A OUTPUT -p 253 -m connmark ! --mark 0x7 -j ACCEPT
COMMIT
";

const NFT: &str = "table inet t {
\tchain output {
\t\ttype filter hook output priority 0; policy accept;
\t\tmeta l4proto 253 meta mark 0x11 counter accept
\t\tmeta l4proto 253 meta mark & 0x2 == 0x2 counter accept
\t\tmeta l4proto 253 ct mark & 0xc == 0x4 counter accept
\t\tmeta l4proto 253 mark & 0xf0 != 0 ct mark & 0x1 == 0x1 counter accept
\t\tmeta l4proto 253 meta mark { 0x100-0x1ff, 0x300 } counter accept
\t\tmeta l4proto 253 ct mark != 0x7 counter accept
\t}
}
";

/// The marks mangle gives the packet from 127.0.0.K: each rule gets
/// packets, and packets just off each rule's bits.
fn marks(k: u32) -> (u32, u32) {
    match k % 6 {
        0 => (0x11 ^ (k & 0x100), k << 4),
        1 => ((k << 8) | 0x2, k << 4),
        2 => (k << 9, 0x4 | (k << 4) | (k & 0x8)),
        3 => (0x20 | (k << 12), 0x9 | (k & 0x2)),
        4 => (0x100 | (k << 4) & 0xfc, 0x8 | (k & 0x4)),
        _ => (k & 0x10, if k % 12 == 5 { 0x7 } else { 0x8 | k << 8 }),
    }
}

const SOURCES: u32 = 40;

fn packets() -> Vec<Packet> {
    (1..=SOURCES)
        .map(|k| {
            let mut p = Packet::new(Family::V4, 0x7f00_0000 | k as u128, 0x7f00_0001, 253, 0, 0);
            p.len = 60;
            (p.mark, p.ct_mark) = marks(k);
            p
        })
        .collect()
}

fn iptables_mangle() -> String {
    let mut s = String::from("*mangle\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n");
    for k in 1..=SOURCES {
        let (m, c) = marks(k);
        s += &format!("-A OUTPUT -s 127.0.0.{k} -j MARK --set-mark {m:#x}\n");
        s += &format!("-A OUTPUT -s 127.0.0.{k} -j CONNMARK --set-mark {c:#x}\n");
    }
    s + "COMMIT\n"
}

fn nft_mangle() -> String {
    let mut s = String::from(
        "table ip m {\n\tchain out {\n\t\ttype route hook output priority -150; policy accept;\n",
    );
    for k in 1..=SOURCES {
        let (m, c) = marks(k);
        s += &format!("\t\tip saddr 127.0.0.{k} meta mark set {m:#x} ct mark set {c:#x}\n");
    }
    s + "\t}\n}\n"
}

fn decisions(rs: &Ruleset, chain: &str, packets: &[Packet]) -> Vec<u32> {
    let e = LinearEngine::new(rs, rs.select_chain(Some(chain)).unwrap()).unwrap();
    packets
        .iter()
        .map(|p| e.classify(p, &NoSets).unwrap().rule_id)
        .collect()
}

fn compare(name: &str, kernel: &[u32], ours: &[u32], p: &[Packet]) {
    let distinct: std::collections::BTreeSet<u32> = kernel.iter().copied().collect();
    assert!(
        distinct.len() >= 6,
        "{name}: the kernel decided only {distinct:?}"
    );
    let differ: Vec<String> = p
        .iter()
        .zip(kernel.iter().zip(ours))
        .filter(|(_, (k, o))| k != o)
        .map(|(p, (k, o))| format!("{p}: kernel rule {k}, parapet rule {o}"))
        .collect();
    assert!(differ.is_empty(), "{name}: {}", differ.join("\n"));
}

#[test]
fn marks_survive_both_syntaxes() {
    let p = packets();
    listings_keep(
        &[("m.v4", FILTER, "filter/OUTPUT"), ("m.nft", NFT, "output")],
        &|rs, chain| decisions(rs, chain, &p),
    );
    // A mark the ruleset's own mangle table sets: refused, named.
    let with_mangle = format!("{}{FILTER}", iptables_mangle());
    let e = parse(&with_mangle, "both.v4", Format::Auto).unwrap_err();
    assert!(format!("{e:?}").contains("matches mark"), "{e:?}");
}

#[test]
#[ignore = "needs root"]
fn marks_agree_with_iptables_legacy() {
    require_root();
    let ns = Netns::create("p13-mark-ipt").unwrap();
    ns.ip(&["link", "set", "lo", "up"]).unwrap();
    let p = packets();
    let kernel = iptables_decisions(
        &ns,
        &format!("{}{FILTER}", iptables_mangle()),
        Family::V4,
        &p,
        Sender::Loopback,
    );
    let rs = parse(FILTER, "m.v4", Format::Auto).unwrap().ruleset;
    compare(
        "iptables-legacy",
        &kernel,
        &decisions(&rs, "filter/OUTPUT", &p),
        &p,
    );
}

#[test]
#[ignore = "needs root"]
fn marks_agree_with_nft() {
    require_root();
    let ns = Netns::create("p13-mark-nft").unwrap();
    ns.ip(&["link", "set", "lo", "up"]).unwrap();
    let p = packets();
    let kernel = nft_decisions(&ns, &format!("{}{NFT}", nft_mangle()), &p, Sender::Loopback);
    let rs = parse(NFT, "m.nft", Format::Auto).unwrap().ruleset;
    compare("nft", &kernel, &decisions(&rs, "output", &p), &p);
}
