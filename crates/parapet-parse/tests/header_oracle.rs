//! The kernel as the oracle for the IP header fields (TTL / hop limit,
//! DSCP, length): the same rules are loaded into iptables-legacy,
//! ip6tables-legacy and nft in a network namespace this test creates, raw
//! IPv4 and IPv6 packets of protocol 253 (experimental, so the kernel's
//! own ICMP errors match no rule) leave through OUTPUT on loopback, and the
//! rule whose kernel counter moved is compared with the linear engine's
//! decision, packet by packet.

#[path = "common/raw_out.rs"]
mod raw_out;

use parapet_model::{Family, LinearEngine, NoSets, Packet};
use parapet_parse::{parse, Format};
use parapet_testbed::{require_root, Netns};
use raw_out::{first_moved, nft_decisions, send_raw, wire};
use std::io::Write;
use std::process::Stdio;

const V4: &str = "*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A OUTPUT -p 253 -m ttl --ttl-eq 1 -j ACCEPT
-A OUTPUT -p 253 -m ttl --ttl-lt 5 -m dscp --dscp 0x2e -j ACCEPT
-A OUTPUT -p 253 -m ttl --ttl-gt 200 -m length --length 100:200 -j ACCEPT
-A OUTPUT -p 253 -m ttl ! --ttl-eq 64 -m length ! --length 0:60 -j ACCEPT
-A OUTPUT -p 253 -m dscp --dscp-class AF41 -j ACCEPT
-A OUTPUT -p 253 -m dscp ! --dscp 0 -m length --length 300: -j ACCEPT
-A OUTPUT -p 253 -m length --length :40 -j ACCEPT
-A OUTPUT -p 253 -m ttl --ttl-gt 100 -m ttl --ttl-lt 150 -j ACCEPT
COMMIT
";

const V6: &str = "*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A OUTPUT -p 253 -m hl --hl-eq 1 -j ACCEPT
-A OUTPUT -p 253 -m hl --hl-lt 5 -m dscp --dscp 0x2e -j ACCEPT
-A OUTPUT -p 253 -m hl --hl-gt 200 -m length --length 100:200 -j ACCEPT
-A OUTPUT -p 253 -m hl ! --hl-eq 64 -m length ! --length 0:60 -j ACCEPT
-A OUTPUT -p 253 -m dscp --dscp-class AF41 -j ACCEPT
-A OUTPUT -p 253 -m dscp ! --dscp 0 -m length --length 300: -j ACCEPT
-A OUTPUT -p 253 -m length --length :40 -j ACCEPT
-A OUTPUT -p 253 -m hl --hl-gt 100 -m hl --hl-lt 150 -j ACCEPT
COMMIT
";

const NFT: &str = "table inet t {
\tchain output {
\t\ttype filter hook output priority 0; policy accept;
\t\tmeta l4proto 253 ip ttl 1 counter accept
\t\tmeta l4proto 253 ip ttl < 5 ip dscp ef counter accept
\t\tmeta l4proto 253 ip6 hoplimit > 200 meta length 100-200 counter accept
\t\tmeta l4proto 253 ip6 hoplimit != 64 meta length != 0-60 counter accept
\t\tmeta l4proto 253 ip dscp { af41, cs1 } counter accept
\t\tmeta l4proto 253 ip6 dscp != cs0 meta length >= 300 counter accept
\t\tmeta l4proto 253 meta length <= 40 counter accept
\t\tmeta l4proto 253 ip ttl 100-150 counter accept
\t\tmeta l4proto 253 ip6 hoplimit { 3, 120 } ip6 dscp 34 counter accept
\t}
}
";

/// The kernel's decisions for `packets` under iptables-save `rules`.
fn iptables_decisions(ns: &Netns, rules: &str, family: Family, packets: &[Packet]) -> Vec<u32> {
    let tool = match family {
        Family::V4 => "iptables-legacy",
        Family::V6 => "ip6tables-legacy",
    };
    let mut restore = ns
        .command(format!("{tool}-restore"))
        .stdin(Stdio::piped())
        .spawn()
        .expect("iptables-legacy-restore");
    restore
        .stdin
        .take()
        .unwrap()
        .write_all(rules.as_bytes())
        .unwrap();
    assert!(
        restore.wait().unwrap().success(),
        "{tool}-restore refused the rules"
    );
    packets
        .iter()
        .map(|p| {
            ns.exec(&[tool, "-Z", "OUTPUT"]).unwrap();
            ns.run_in(|| send_raw(&wire(p), family));
            let out = ns.exec(&[tool, "-L", "OUTPUT", "-v", "-x", "-n"]).unwrap();
            let counts: Vec<u64> = out
                .lines()
                .skip(2)
                .map(|l| l.split_whitespace().next().unwrap().parse().unwrap())
                .collect();
            first_moved(&counts)
        })
        .collect()
}

/// Every combination of TTLs, DSCPs and lengths on both sides of the
/// rules' edges (an off-by-one in any bound changes a decision).
fn packets(family: Family) -> Vec<Packet> {
    let (lens, addr): (&[u32], u128) = match family {
        Family::V4 => (&[40, 41, 60, 61, 200, 201, 299, 300], 0x7f00_0001),
        Family::V6 => (&[40, 41, 60, 61, 200, 201, 299, 300], 1),
    };
    let mut out = Vec::new();
    for &ttl in &[1u8, 4, 5, 64, 100, 101, 149, 150, 200, 201] {
        for &dscp in &[0u8, 34, 46] {
            for &len in lens {
                let mut p = Packet::new(family, addr, addr, 253, 0, 0);
                (p.ttl, p.dscp, p.len) = (ttl, dscp, len);
                out.push(p);
            }
        }
    }
    out
}

fn compare(rules: &str, name: &str, chain: &str, packets: &[Packet], kernel: &[u32]) {
    let rs = parse(rules, name, Format::Auto).unwrap().ruleset;
    let engine = LinearEngine::new(&rs, rs.select_chain(Some(chain)).unwrap()).unwrap();
    let mut differ = Vec::new();
    for (p, &k) in packets.iter().zip(kernel) {
        let ours = engine.classify(p, &NoSets).unwrap().rule_id;
        if ours != k {
            differ.push(format!("{name}: {p}: kernel rule {k}, parapet rule {ours}"));
        }
    }
    // The kernel must tell the rules apart, or the test proves nothing.
    let distinct: std::collections::BTreeSet<u32> = kernel.iter().copied().collect();
    assert!(
        distinct.len() >= 6,
        "{name}: the kernel decided only {distinct:?}"
    );
    assert!(
        differ.is_empty(),
        "{} of {} differ:\n{}",
        differ.len(),
        packets.len(),
        differ.join("\n")
    );
}

#[test]
#[ignore = "needs root"]
fn ttl_dscp_length_agree_with_iptables_legacy() {
    require_root();
    let ns = Netns::create("p13-hdr-ipt").unwrap();
    ns.ip(&["link", "set", "lo", "up"]).unwrap();
    let v4 = packets(Family::V4);
    let kernel = iptables_decisions(&ns, V4, Family::V4, &v4);
    compare(V4, "header.v4", "filter/OUTPUT", &v4, &kernel);
    let v6 = packets(Family::V6);
    let kernel = iptables_decisions(&ns, V6, Family::V6, &v6);
    let v6_rules = format!("# Generated by ip6tables-save\n{V6}");
    compare(&v6_rules, "header.v6", "filter/OUTPUT", &v6, &kernel);
}

#[test]
#[ignore = "needs root"]
fn ttl_dscp_length_agree_with_nft() {
    require_root();
    let ns = Netns::create("p13-hdr-nft").unwrap();
    ns.ip(&["link", "set", "lo", "up"]).unwrap();
    let mut all = packets(Family::V4);
    all.extend(packets(Family::V6));
    let kernel = nft_decisions(&ns, NFT, &all);
    compare(NFT, "header.nft", "t/output", &all, &kernel);
}
