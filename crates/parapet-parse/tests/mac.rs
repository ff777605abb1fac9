//! The Ethernet source address (`-m mac --mac-source`, nft `ether
//! saddr`): a match and its negation, a packet without an Ethernet header
//! (matched neither way), both syntaxes' round trips and the refusals. The
//! kernel's verdicts are checked in
//! `crates/parapet-cli/tests/netfilter_oracle_mac.rs`.

use parapet_model::*;
use parapet_parse::*;

fn decisions(rs: &Ruleset, packets: &[Packet]) -> Vec<(u32, Verdict)> {
    let e = LinearEngine::new(rs, rs.select_chain(None).unwrap()).unwrap();
    packets
        .iter()
        .map(|p| {
            let d = e.classify(p, &NoSets).unwrap();
            (d.rule_id, d.verdict)
        })
        .collect()
}

const A: u64 = 0x0271_0000_0001;
const B: u64 = 0x0271_0000_0004;

/// UDP to ports 1 and 2 from MAC A, MAC B and no MAC at all.
fn packets() -> Vec<Packet> {
    let mut out = Vec::new();
    for mac in [Some(A), Some(B), None] {
        for dport in [1, 2] {
            let mut p = Packet::new(Family::V4, 1, 2, 17, 40000, dport);
            p.mac_src = mac;
            out.push(p);
        }
    }
    out
}

const IPT: &str = "*filter\n:INPUT DROP [0:0]\n\
    -A INPUT -p udp -m udp --dport 1 -m mac --mac-source 02:71:00:00:00:01 -j ACCEPT\n\
    -A INPUT -p udp -m udp --dport 2 -m mac ! --mac-source 02:71:00:00:00:01 -j ACCEPT\n\
    COMMIT\n";

const NFT: &str =
    "table ip filter {\n\tchain INPUT {\n\t\ttype filter hook input priority 0; policy drop;\n\
    \t\tudp dport 1 ether saddr 02:71:00:00:00:01 accept\n\
    \t\tudp dport 2 ether saddr != 02:71:00:00:00:01 accept\n\t}\n}\n";

#[test]
fn a_match_its_negation_and_no_header() {
    use Verdict::{Accept as A_, Drop as D};
    for (text, name) in [(IPT, "m.ipt"), (NFT, "m.nft")] {
        let rs = parse(text, name, Format::Auto).unwrap().ruleset;
        let got: Vec<Verdict> = decisions(&rs, &packets())
            .iter()
            .map(|d| d.1.clone())
            .collect();
        // A: port 1 accepted, port 2 (negated A) dropped; B: the other way
        // round; no Ethernet header: neither rule matches
        assert_eq!(got, vec![A_, D, D, A_, D, D], "{name}");
    }
}

#[test]
fn both_syntaxes_round_trip() {
    let want = decisions(
        &parse(IPT, "m.ipt", Format::Auto).unwrap().ruleset,
        &packets(),
    );
    for (text, name) in [(IPT, "m.ipt"), (NFT, "m.nft")] {
        let rs = parse(text, name, Format::Auto).unwrap().ruleset;
        for listing in [
            render::iptables_save(&rs).unwrap(),
            render::nft(&rs).unwrap(),
        ] {
            let again = parse(&listing, "again", Format::Auto)
                .unwrap_or_else(|e| panic!("{e:?}\n{listing}"));
            let got: Vec<Verdict> = decisions(&again.ruleset, &packets())
                .iter()
                .map(|d| d.1.clone())
                .collect();
            let want: Vec<Verdict> = want.iter().map(|d| d.1.clone()).collect();
            assert_eq!(got, want, "{listing}");
        }
    }
    let rs = parse(IPT, "m.ipt", Format::Auto).unwrap().ruleset;
    let listing = render::iptables_save(&rs).unwrap();
    assert!(
        listing.contains("-m mac --mac-source 02:71:00:00:00:01"),
        "{listing}"
    );
    assert!(
        listing.contains("-m mac ! --mac-source 02:71:00:00:00:01"),
        "{listing}"
    );
    let listing = render::nft(&rs).unwrap();
    assert!(
        listing.contains("ether saddr 02:71:00:00:00:01"),
        "{listing}"
    );
    assert!(
        listing.contains("ether saddr != 02:71:00:00:00:01"),
        "{listing}"
    );
}

#[test]
fn refusals_name_the_construct() {
    for (chain, rule, want) in [
        (
            "OUTPUT",
            "-m mac --mac-source 02:71:00:00:00:01 -j DROP",
            "refuses -m mac in OUTPUT",
        ),
        (
            "INPUT",
            "-m mac --mac-source 02:71:00:00:00 -j DROP",
            "expected a MAC address",
        ),
        (
            "INPUT",
            "--mac-source 02:71:00:00:00:01 -j DROP",
            "needs -m mac",
        ),
    ] {
        let text = format!("*filter\n:{chain} ACCEPT [0:0]\n-A {chain} {rule}\nCOMMIT\n");
        let e = match parse(&text, "t", Format::IptablesSave) {
            Ok(_) => panic!("{rule} parsed"),
            Err(e) => e[0].to_string(),
        };
        assert!(e.contains(want), "{rule}: {e}");
        assert!(e.starts_with("t:3:"), "{e}");
    }
    let nft = "table ip filter {\n\tchain c {\n\t\ttype filter hook input priority 0;\n\t\tether daddr 02:71:00:00:00:01 drop\n\t}\n}\n";
    let e = parse(nft, "n", Format::Nft).unwrap_err()[0].to_string();
    assert!(e.contains("'ether daddr' is not supported"), "{e}");
}
