//! The kernel as the oracle for masked comparisons (`ip saddr & MASK ==
//! VALUE`, `!=`; the ones too many intervals to expand are kept as
//! parapet's masked constraint kind): the same nft rules are loaded into
//! nft in a network namespace this test creates, raw packets of protocol
//! 253 with varied source addresses leave through OUTPUT on loopback, and
//! the rule whose counter moved is compared with the linear engine, packet
//! by packet. Also: the rules list as nft and read back to the same
//! decisions, and iptables-save refuses them by name.

#[path = "common/raw_out.rs"]
mod raw_out;
#[path = "common/save_text.rs"]
mod save_text;

use parapet_model::{Family, LinearEngine, NoSets, Packet};
use parapet_parse::{parse, render, Format};
use parapet_testbed::{require_root, Netns};
use raw_out::{nft_decisions, Sender};

const NFT: &str = "table inet t {
\tchain output {
\t\ttype filter hook output priority 0; policy accept;
\t\tmeta l4proto 253 ip saddr & 0.0.0.3 == 0.0.0.1 counter accept
\t\tmeta l4proto 253 ip saddr & 255.0.0.2 != 10.0.0.2 ip saddr & 0.0.1.0 == 0.0.0.0 counter accept
\t\tmeta l4proto 253 ip6 saddr & ::ffff:ffff:ffff:ffff == ::1 counter accept
\t\tmeta l4proto 253 ip6 saddr & ffff::1 != 2001::1 counter accept
\t\tmeta l4proto 253 ip saddr & 255.0.255.0 == 10.0.1.0 counter accept
\t\tmeta l4proto 253 ip6 saddr & ::8000:0:0:0 == ::8000:0:0:0 counter accept
\t\tmeta l4proto 253 counter accept
\t}
}
";

/// Source addresses on both sides of every rule's bits.
fn packets() -> Vec<Packet> {
    let mut out = Vec::new();
    for a in [0u32, 1, 2, 3] {
        for b in [0u32, 1, 2] {
            for c in [0u32, 9, 10, 127] {
                // (A zero source is filled in by the kernel: not sent.)
                let src = c << 24 | b << 8 | a;
                if src == 0 {
                    continue;
                }
                let mut p = Packet::new(Family::V4, src as u128, 0x7f00_0001, 253, 0, 0);
                p.len = 60;
                out.push(p);
                let mut p =
                    Packet::new(Family::V4, (src | 2 << 16) as u128, 0x7f00_0001, 253, 0, 0);
                p.len = 60;
                out.push(p);
            }
        }
    }
    for hi in [0u128, 0x2001, 0x2002, 0xfe80] {
        for lo in [0u128, 1, 2, 1 << 63 | 1, 1 << 63] {
            let mut p = Packet::new(Family::V6, hi << 112 | lo, 1, 253, 0, 0);
            p.len = 60;
            out.push(p);
        }
    }
    out
}

fn decisions(text: &str, name: &str, packets: &[Packet]) -> Vec<u32> {
    let rs = parse(text, name, Format::Auto)
        .unwrap_or_else(|e| panic!("{name}: {e:?}\n{text}"))
        .ruleset;
    let engine = LinearEngine::new(&rs, rs.select_chain(Some("output")).unwrap()).unwrap();
    packets
        .iter()
        .map(|p| engine.classify(p, &NoSets).unwrap().rule_id)
        .collect()
}

#[test]
fn masked_rules_list_as_nft_and_refuse_iptables() {
    let rs = parse(NFT, "m.nft", Format::Auto).unwrap().ruleset;
    let masked = rs.rules().filter(|r| r.matches.has_masked()).count();
    assert_eq!(masked, 5, "rules kept as masked comparisons");
    let listing = render::nft(&rs).unwrap();
    let p = packets();
    assert_eq!(
        decisions(&listing, "again.nft", &p),
        decisions(NFT, "m.nft", &p),
        "{listing}"
    );
    let again = parse(&listing, "again.nft", Format::Auto).unwrap().ruleset;
    let masks = |rs: &parapet_model::Ruleset| -> Vec<_> {
        rs.rules().map(|r| r.matches.masked().to_vec()).collect()
    };
    assert_eq!(masks(&again), masks(&rs), "{listing}");
    let ip = "table ip filter {\n\tchain INPUT {\n\t\ttype filter hook input priority 0; policy accept;\n\t\tip saddr & 0.0.0.3 == 0.0.0.1 drop\n\t}\n}\n";
    let rs = parse(ip, "ip.nft", Format::Auto).unwrap().ruleset;
    let e = render::iptables_save(&rs).unwrap_err();
    assert!(e.message.contains("masked comparison"), "{e}");
}

#[test]
#[ignore = "needs root"]
fn masked_comparisons_agree_with_nft() {
    require_root();
    let ns = Netns::create("p13-masked-nft").unwrap();
    ns.ip(&["link", "set", "lo", "up"]).unwrap();
    let p = packets();
    let kernel = nft_decisions(&ns, NFT, &p, Sender::Loopback);
    let ours = decisions(NFT, "masked.nft", &p);
    let differ: Vec<String> = p
        .iter()
        .zip(kernel.iter().zip(&ours))
        .filter(|(_, (k, o))| k != o)
        .map(|(p, (k, o))| format!("{p}: kernel rule {k}, parapet rule {o}"))
        .collect();
    // The kernel must tell the rules apart, or the test proves nothing.
    let distinct: std::collections::BTreeSet<u32> = kernel.iter().copied().collect();
    assert!(distinct.len() >= 6, "the kernel decided only {distinct:?}");
    assert!(
        differ.is_empty(),
        "{} of {} differ:\n{}",
        differ.len(),
        p.len(),
        differ.join("\n")
    );
}

/// Analysis with a masked comparison: it decides part of its box, so lint
/// must not call the rule before it redundant nor the rule after it
/// unreachable, and diff refuses rather than compare boxes.
#[test]
fn lint_and_diff_do_not_trust_a_masked_box() {
    use parapet_model::{diff, Budget};
    let text = "table ip filter {
\tchain INPUT {
\t\ttype filter hook input priority 0; policy accept;
\t\ttcp dport 22 drop
\t\tip saddr & 0.0.0.1 == 0.0.0.1 accept
\t\tdrop
\t}
}
";
    let (_, list, report) = save_text::linted(text, "m.nft", Format::Auto);
    // Without rule 1, an odd source would be accepted by rule 2: rule 1
    // is not redundant; rule 3 takes the even sources: reachable.
    assert!(
        report.findings.is_empty(),
        "findings: {:?}",
        report.findings
    );
    let e = diff(&list, &list, Budget::default()).unwrap_err();
    assert!(e.contains("masked comparison"), "{e}");
}
