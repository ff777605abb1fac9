//! The conntrack entry's addresses (`--ctorigsrc`, `--ctorigdst`,
//! `--ctreplsrc`, `--ctrepldst`; nft `ct original|reply ip|ip6
//! saddr|daddr`): what they mean for packets with and without an entry,
//! both syntaxes' round trips in both families, and the errors, each at
//! its FILE:LINE:COL. The kernel's verdicts (a DNAT'ed flow, whose
//! original and reply addresses differ) are checked in
//! `crates/parapet-cli/tests/netfilter_oracle_ctaddr.rs`.

use parapet_model::*;
use parapet_parse::*;
use std::net::IpAddr;

fn decisions(rs: &Ruleset, packets: &[Packet]) -> Vec<u32> {
    let e = LinearEngine::new(rs, rs.select_chain(None).unwrap()).unwrap();
    packets
        .iter()
        .map(|p| e.classify(p, &NoSets).unwrap().rule_id)
        .collect()
}

fn addr(s: &str) -> u128 {
    from_ip(s.parse::<IpAddr>().unwrap()).1
}

/// A UDP packet `src > dst` in `ct` state whose entry has these original
/// destination and reply source addresses (the rest its own tuple's).
fn pkt(src: &str, dst: &str, ct: CtState, orig_dst: &str, repl_src: &str) -> Packet {
    let (fam, s) = from_ip(src.parse().unwrap());
    let mut p = Packet::new(fam, s, addr(dst), 17, 40000, 53);
    p.ct_state = ct;
    p.set_ct_addr(Field::CtOrigDst, addr(orig_dst));
    p.set_ct_addr(Field::CtReplSrc, addr(repl_src));
    p
}

const IPT: &str = "*filter\n:INPUT DROP [0:0]\n\
    -A INPUT -m conntrack --ctstate NEW --ctorigdst 192.0.2.10 -j ACCEPT\n\
    -A INPUT -m conntrack ! --ctreplsrc 10.0.0.0/8 -j DROP\n\
    -A INPUT -m conntrack --ctorigsrc 10.1.0.0/16 --ctrepldst 10.1.2.3 -j ACCEPT\n\
    COMMIT\n";

const NFT: &str =
    "table ip filter {\n\tchain INPUT {\n\t\ttype filter hook input priority 0; policy drop;\n\
    \t\tct state new ct original daddr 192.0.2.10 accept\n\
    \t\tct reply ip saddr != 10.0.0.0/8 drop\n\
    \t\tct original ip saddr 10.1.0.0/16 ct reply daddr 10.1.2.3 accept\n\
    \t}\n}\n";

/// The cases of [`IPT`]: (packet, deciding rule).
fn cases() -> Vec<(Packet, u32)> {
    use CtState::*;
    let mut out = vec![
        // DNAT'ed from 192.0.2.10 to 10.0.0.5: the original destination decides
        (
            pkt("10.1.2.3", "10.0.0.5", New, "192.0.2.10", "10.0.0.5"),
            1,
        ),
        // its header's destination alone does not
        (
            pkt("10.1.2.3", "192.0.2.10", New, "10.0.0.5", "10.0.0.5"),
            3,
        ),
        // a reply source outside 10/8
        (
            pkt(
                "10.9.9.9",
                "10.0.0.5",
                Established,
                "10.0.0.5",
                "203.0.113.1",
            ),
            2,
        ),
        // inside 10/8, original source outside 10.1/16: the policy
        (
            pkt("10.9.9.9", "10.0.0.5", Established, "10.0.0.5", "10.0.0.5"),
            0,
        ),
    ];
    // no entry: no rule reading it matches, `!` included
    for ct in [Invalid, Untracked] {
        out.push((
            pkt("10.1.2.3", "10.0.0.5", ct, "192.0.2.10", "203.0.113.1"),
            0,
        ));
    }
    // without the entry's addresses: the packet's own tuple (no NAT)
    let mut own: Packet = "udp 10.1.2.3:40000 > 192.0.2.10:53 ct new".parse().unwrap();
    out.push((own.clone(), 1));
    own.ct_state = Established;
    out.push((own, 2));
    out
}

#[test]
fn the_entrys_addresses_decide_not_the_packets() {
    for (text, name) in [(IPT, "c.rules"), (NFT, "c.nft")] {
        let rs = parse(text, name, Format::Auto).unwrap().ruleset;
        let (packets, want): (Vec<Packet>, Vec<u32>) = cases().into_iter().unzip();
        assert_eq!(decisions(&rs, &packets), want, "{name}");
        // no --ctstate: a tracked state is required (the `!` within it)
        let r2 = rs.rules().nth(1).unwrap();
        assert_eq!(
            r2.matches.get(Field::CtState).unwrap().ranges(),
            [(1, 3)],
            "{name}"
        );
        assert_eq!(
            r2.matches.get(Field::CtReplSrc).unwrap().ranges(),
            [(0, 0x09ff_ffff), (0x0b00_0000, 0xffff_ffff)],
            "{name}"
        );
    }
}

#[test]
fn both_syntaxes_round_trip_in_both_families() {
    let v6_ipt = "*filter\n:INPUT DROP [0:0]\n\
        -A INPUT -m conntrack --ctorigdst 2001:db8::10 -j ACCEPT\n\
        -A INPUT -m conntrack ! --ctreplsrc 2001:db8::/32 -j DROP\n\
        COMMIT\n";
    let inet = "table inet filter {\n\tchain INPUT {\n\t\ttype filter hook input priority 0; policy drop;\n\
        \t\tct original ip6 daddr 2001:db8::10 accept\n\
        \t\tct reply ip6 saddr != 2001:db8::/32 drop\n\
        \t\tct reply ip saddr { 10.0.0.1, 10.0.0.5-10.0.0.9 } accept\n\
        \t}\n}\n";
    let v6 =
        |s: &str, orig_dst: &str, repl_src: &str, ct| pkt(s, "2001:db8::5", ct, orig_dst, repl_src);
    let mut packets = Vec::new();
    for ct in CtState::ALL {
        packets.push(v6("2001:db8::1", "2001:db8::10", "2001:db8::5", ct));
        packets.push(v6("2001:db8::1", "2001:db8::5", "2001:db9::5", ct));
        packets.push(v6("2001:db8::1", "2001:db8::5", "2001:db8::5", ct));
        for repl in ["10.0.0.1", "10.0.0.4", "10.0.0.7", "10.0.0.10"] {
            packets.push(pkt("10.0.0.9", "10.0.0.2", ct, "10.0.0.2", repl));
        }
        packets.extend(cases().into_iter().map(|(mut p, _)| {
            p.ct_state = ct;
            p
        }));
    }
    for (text, name, format) in [
        (IPT, "a.rules", Format::Auto),
        (NFT, "a.nft", Format::Auto),
        (v6_ipt, "b.rules", Format::Ip6tablesSave),
        (inet, "b.nft", Format::Auto),
    ] {
        let rs = parse(text, name, format).unwrap().ruleset;
        let want = decisions(&rs, &packets);
        let deciding: std::collections::BTreeSet<u32> = want.iter().copied().collect();
        assert!(
            deciding.len() >= 3,
            "{name}: rules barely decide: {deciding:?}"
        );
        let mut listings = vec![render::nft(&rs).unwrap()];
        if name != "b.nft" {
            listings.push(render::iptables_save(&rs).unwrap());
        }
        for listing in listings {
            let again = parse(&listing, "again", Format::Auto)
                .unwrap_or_else(|e| panic!("{e:?}\n{listing}"))
                .ruleset;
            assert_eq!(decisions(&again, &packets), want, "{name}:\n{listing}");
            assert_eq!(
                without_origins(&again).tables[0].chains[0].rules,
                without_origins(&rs).tables[0].chains[0].rules,
                "{name}:\n{listing}"
            );
        }
    }
    let listing = render::iptables_save(&parse(IPT, "a", Format::Auto).unwrap().ruleset).unwrap();
    for want in [
        "-m conntrack --ctstate NEW -m conntrack --ctorigdst 192.0.2.10 -j ACCEPT",
        "-m conntrack ! --ctreplsrc 10.0.0.0/8 -j DROP",
        "-m conntrack --ctorigsrc 10.1.0.0/16 --ctrepldst 10.1.2.3 -j ACCEPT",
    ] {
        assert!(listing.contains(want), "{want}:\n{listing}");
    }
    let listing = render::nft(&parse(inet, "b", Format::Auto).unwrap().ruleset).unwrap();
    for want in [
        "ct original ip6 daddr 2001:db8::10 accept",
        "ct reply ip6 saddr != 2001:db8::/32 drop",
        "ct reply ip saddr { 10.0.0.1, 10.0.0.5-10.0.0.9 } accept",
    ] {
        assert!(listing.contains(want), "{want}:\n{listing}");
    }
}

/// Bad addresses and unsupported forms, each at the file, line and column
/// of the word at fault.
#[test]
fn errors_name_the_place_and_the_construct() {
    for (rule, at, want) in [
        (
            "-m conntrack --ctorigsrc 10.0.0.300 -j DROP",
            "10.0.0.300",
            "--ctorigsrc: expected an IPv4 address, found '10.0.0.300'",
        ),
        (
            "-m conntrack --ctorigdst 2001:db8::1 -j DROP",
            "2001:db8::1",
            "expected an IPv4 address",
        ),
        (
            "-m conntrack --ctreplsrc 10.0.0.0/33 -j DROP",
            "10.0.0.0/33",
            "prefix length 33 is longer than 32",
        ),
        (
            "-m conntrack --ctrepldst 10.0.0.0/255.0.255.0 -j DROP",
            "10.0.0.0/",
            "is not contiguous",
        ),
        (
            "-m conntrack ! --ctrepldst gw.example.net -j DROP",
            "gw.example",
            "is a host name",
        ),
        (
            "-m conntrack --ctstate INVALID,NEW --ctorigsrc 10.0.0.1 -j DROP",
            "--ctorigsrc",
            "admitting INVALID or UNTRACKED",
        ),
        (
            "--ctorigsrc 10.0.0.1 -j DROP",
            "--ctorigsrc",
            "needs -m conntrack",
        ),
    ] {
        let line = format!("-A INPUT {rule}");
        let text = format!("*filter\n:INPUT ACCEPT [0:0]\n{line}\nCOMMIT\n");
        let e = match parse(&text, "t.rules", Format::IptablesSave) {
            Ok(_) => panic!("{rule} parsed"),
            Err(e) => e[0].to_string(),
        };
        let col = line.find(at).unwrap() + 1;
        assert!(e.starts_with(&format!("t.rules:3:{col}:")), "{rule}: {e}");
        assert!(e.contains(want), "{rule}: {e}");
    }
    for (fam, rule, at, want) in [
        (
            "ip",
            "ct original ip saddr 10.0.0.300 drop",
            "10.0.0.300",
            "10.0.0.300",
        ),
        (
            "inet",
            "ct original saddr 10.0.0.1 drop",
            "ct",
            "needs the family: write 'ct original ip saddr' or 'ct original ip6 saddr'",
        ),
        (
            "ip",
            "ct reply ip6 daddr ::1 drop",
            "ct",
            "'ct reply ip6 daddr' cannot appear in a ip table",
        ),
        (
            "ip",
            "ct original ip saddr @allowed drop",
            "@allowed",
            "as a set, map or concatenation key",
        ),
        (
            "ip",
            "ct reply proto-dst 53 drop",
            "ct",
            "'ct reply proto-dst' is not supported",
        ),
    ] {
        let line = format!("\t\t{rule}");
        let text = format!("table {fam} filter {{\n\tchain c {{\n\t\ttype filter hook input priority 0;\n{line}\n\t}}\n}}\n");
        let e = parse(&text, "n.nft", Format::Nft).unwrap_err()[0].to_string();
        // nft columns count a tab as one
        let col = line.find(at).unwrap() + 1;
        assert!(e.starts_with(&format!("n.nft:4:{col}:")), "{rule}: {e}");
        assert!(e.contains(want), "{rule}: {e}");
    }
}
