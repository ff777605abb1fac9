//! nft constructs added for real hosts' files: `th` ports, `meta protocol`,
//! anonymous concatenated sets and verdict maps on concatenations (checked
//! on packets with the linear engine), and the parts parapet leaves to the
//! kernel (other families' tables, table objects, conntrack/mark/offload
//! statements): noted, written back by `list`, never enforced.

use parapet_model::*;
use parapet_parse::*;

fn ok(text: &str) -> Ruleset {
    parse(text, "n.nft", Format::Nft)
        .unwrap_or_else(|e| panic!("{}", e[0]))
        .ruleset
}

fn err(text: &str) -> String {
    parse(text, "n.nft", Format::Nft).unwrap_err()[0].to_string()
}

fn decide(rs: &Ruleset, pkt: &Packet) -> (u32, Verdict) {
    let e = LinearEngine::new(rs, rs.select_chain(None).unwrap()).unwrap();
    let d = e.classify(pkt, &NoSets).unwrap();
    (d.rule_id, d.verdict)
}

fn pkt(family: Family, proto: u8, dport: u16) -> Packet {
    match family {
        Family::V4 => Packet::v4(0x0a00_0001, 0x0a00_0002, proto, 40000, dport),
        Family::V6 => Packet::new(Family::V6, 1, 2, proto, 40000, dport),
    }
}

fn input(body: &str) -> String {
    format!("table inet t {{\n\tchain input {{\n\t\ttype filter hook input priority 0; policy accept;\n{body}\t}}\n}}\n")
}

#[test]
fn th_ports_where_the_rule_matches_port_protocols() {
    let rs = ok(&input("\t\tmeta l4proto { tcp, udp } th dport 53 drop\n"));
    assert_eq!(decide(&rs, &pkt(Family::V4, 6, 53)), (1, Verdict::Drop));
    assert_eq!(decide(&rs, &pkt(Family::V6, 17, 53)), (1, Verdict::Drop));
    assert_eq!(decide(&rs, &pkt(Family::V4, 17, 54)), (0, Verdict::Accept));
    assert_eq!(decide(&rs, &pkt(Family::V4, 1, 53)).0, 0);
    // Elsewhere th reads other header bytes (ICMP's checksum): refused.
    let e = err(&input("\t\tth dport 53 drop\n"));
    assert!(e.contains("n.nft:4:3:") && e.contains("'th' needs"), "{e}");
    let e = err(&input("\t\tmeta l4proto { tcp, icmp } th dport 53 drop\n"));
    assert!(e.contains("'th' needs"), "{e}");
    // The listing writes th back for several protocols, tcp dport for one.
    let out = render::nft(&rs).unwrap();
    assert!(out.contains("th dport 53 drop"), "{out}");
    let again = ok(&out);
    assert_eq!(decide(&again, &pkt(Family::V6, 6, 53)), (1, Verdict::Drop));
}

#[test]
fn meta_protocol_is_the_family() {
    let rs = ok(&input(
        "\t\tmeta protocol ip6 udp dport 1 drop\n\t\tmeta protocol vmap { ip : drop, arp : accept }\n",
    ));
    assert_eq!(decide(&rs, &pkt(Family::V6, 17, 1)), (1, Verdict::Drop));
    assert_eq!(decide(&rs, &pkt(Family::V6, 17, 2)), (0, Verdict::Accept));
    assert_eq!(decide(&rs, &pkt(Family::V4, 17, 1)), (2, Verdict::Drop));
    let e = err(&input("\t\tmeta protocol ipx drop\n"));
    assert!(e.contains("expected an ethertype"), "{e}");
}

#[test]
fn anonymous_concatenated_sets_and_concatenated_verdict_maps() {
    let rs = ok(&input(
        "\t\tmeta l4proto . th dport { udp . 53, tcp . 22 } counter drop\n\
         \t\tip protocol . th dport vmap { udp . 80 : drop, tcp . 80 : jump j }\n\
         \t\tmeta nfproto ipv4 icmp type . icmp code { 3 . 4, 12 . 0 } drop\n",
    )
    .replace("}\n}\n", "}\n\tchain j {\n\t\tdrop\n\t}\n}\n"));
    assert_eq!(decide(&rs, &pkt(Family::V4, 17, 53)), (1, Verdict::Drop));
    assert_eq!(decide(&rs, &pkt(Family::V6, 6, 22)), (1, Verdict::Drop));
    assert_eq!(decide(&rs, &pkt(Family::V4, 6, 53)).0, 0);
    assert_eq!(decide(&rs, &pkt(Family::V4, 17, 80)), (2, Verdict::Drop));
    assert_eq!(decide(&rs, &pkt(Family::V4, 6, 80)), (4, Verdict::Drop));
    assert_eq!(decide(&rs, &pkt(Family::V6, 6, 80)).0, 0);
    let mut icmp = pkt(Family::V4, 1, 0);
    (icmp.icmp_type, icmp.icmp_code) = (3, 4);
    assert_eq!(decide(&rs, &icmp), (3, Verdict::Drop));
    icmp.icmp_code = 3;
    assert_eq!(decide(&rs, &icmp).0, 0);
    // Overlapping elements would fire a jump twice: refused, as nft does.
    let e = err(&input(
        "\t\tip protocol . th dport { udp . 1-10, udp . 5 } drop\n",
    ));
    assert!(e.contains("overlaps an earlier one"), "{e}");
    let e = err(&input("\t\tip protocol . th dport != { udp . 1 } drop\n"));
    assert!(e.contains("negated or compared concatenation"), "{e}");
}

const KERNEL_PARTS: &str = "table arp a {
\tchain c {
\t\ttype filter hook input priority 0; policy accept;
\t\tarp operation request counter
\t}
}
table inet t {
\tflowtable ft {
\t\thook ingress priority 0; devices = { lo };
\t}
\tct helper ftp {
\t\ttype \"ftp\" protocol tcp;
\t}
\tct helper sip {
\t\ttype \"sip\" protocol udp;
\t}
\tcounter c {
\t}
\tchain input {
\t\ttype filter hook input priority 0; policy drop;
\t\ttcp dport 21 ct helper set \"ftp\" counter name c
\t\tmeta l4proto { tcp, udp } flow add @ft
\t\tmeta mark set 0x10 accept
\t}
\tchain out {
\t\ttype filter hook output priority raw; policy accept;
\t\tudp dport 53 notrack
\t}
}
";

#[test]
fn other_families_objects_and_statements_are_left_to_the_kernel() {
    let rs = ok(KERNEL_PARTS);
    let notes = LeftToKernel::summary(&rs.left_to_kernel);
    assert_eq!(
        notes,
        [
            "arp a (c 1 rule)",
            "inet t flowtable ft",
            "inet t ct helper ftp, sip",
            "inet t 'ct helper set' statements of 1 rule",
            "inet t 'flow add' statements of 1 rule",
            "inet t 'meta mark set' statements of 1 rule",
            "inet t 'notrack' statements of 1 rule",
        ]
    );
    // The arp table's rule holds id 1: the inet rules are 2, 3, 4.
    assert_eq!(decide(&rs, &pkt(Family::V4, 6, 21)), (4, Verdict::Accept));
    assert_eq!(rs.tables.len(), 1);
    let r = &rs.tables[0].chains[0].rules;
    assert_eq!(r[0].kernel, ["ct helper set \"ftp\""]);
    assert_eq!(r[0].action, Action::Count);
    // `list` writes every part back; reading the listing gives the same
    // notes and the same decisions.
    let out = render::nft(&rs).unwrap();
    for part in [
        "table arp a {",
        "flowtable ft {",
        "ct helper sip {",
        "flow add @ft",
        "notrack",
        "meta mark set 0x10 accept",
    ] {
        assert!(out.contains(part), "{part} missing:\n{out}");
    }
    let again = ok(&out);
    assert_eq!(LeftToKernel::summary(&again.left_to_kernel), notes);
    assert_eq!(
        decide(&again, &pkt(Family::V4, 6, 21)),
        (4, Verdict::Accept)
    );
    // iptables-save cannot say an nft statement: refused, not dropped.
    assert!(render::iptables_save(&rs).is_err());
}

#[test]
fn quota_objects_and_synproxy_stay_refused() {
    let e = err("table inet t {\n\tquota q {\n\t\tover 10 mbytes\n\t}\n}\n");
    assert!(e.contains("n.nft:2:2:") && e.contains("keeps state"), "{e}");
}

/// Issue 13 item 7's messages.
#[test]
fn clearer_messages_and_nft_spellings() {
    // `reject with icmpx admin-prohibited`, as nft lists it.
    let rs = ok(&input("\t\treject with icmpx admin-prohibited\n"));
    assert_eq!(
        rs.tables[0].chains[0].rules[0].action,
        Action::Verdict(Verdict::Reject {
            with: Some("icmpx-admin-prohibited".into())
        })
    );
    // nft's name for the IPv6 protocol field is nexthdr.
    let e = err(&input("\t\tip6 hoplimit 1 drop\n"));
    assert!(
        e.contains("ip6 nexthdr") && !e.contains("ip6 protocol"),
        "{e}"
    );
    // A refused chain header is one error, not two.
    let e = parse(
        "table netdev x {\n}\ntable inet t {\n\tchain c {\n\t\ttype filter hook ingress device eth0 priority 0; policy drop;\n\t}\n}\n",
        "n.nft",
        Format::Nft,
    )
    .unwrap_err();
    assert_eq!(e.len(), 1, "{e:?}");
    // ipset 4's save format is named, not "cannot tell the format".
    let e = parse(
        "-N ban iphash\n-A ban 1.2.3.4\nCOMMIT\n",
        "old.ipset",
        Format::Auto,
    )
    .unwrap_err();
    assert!(
        e[0].to_string().contains("legacy ipset save file"),
        "{}",
        e[0]
    );
}

/// A regular chain no filter chain reaches, whose only errors are NAT
/// statements, is the kernel's NAT; reached from a filter chain, or with
/// another error (`ct status dnat` is a match, not NAT), it stays an error.
#[test]
fn unreached_nat_chains_are_the_kernels() {
    let rs = ok("table ip t {\n\tchain n {\n\t\tsnat to ip saddr map { 1.1.1.1 : 2.2.2.2 }\n\t\tmasquerade\n\t}\n\tchain input {\n\t\ttype filter hook input priority 0; policy accept;\n\t\tdrop\n\t}\n}\n");
    assert_eq!(
        LeftToKernel::summary(&rs.left_to_kernel),
        ["ip t (n 2 rules)"]
    );
    assert_eq!(decide(&rs, &pkt(Family::V4, 6, 1)), (3, Verdict::Drop));
    let e = err("table ip t {\n\tchain n {\n\t\tmasquerade\n\t}\n\tchain input {\n\t\ttype filter hook input priority 0; policy accept;\n\t\tjump n\n\t}\n}\n");
    assert!(e.contains("n.nft:3:3:"), "{e}");
    let e = err("table ip t {\n\tchain n {\n\t\tct status dnat accept\n\t}\n}\n");
    assert!(e.contains("'ct status' is not supported"), "{e}");
    let e = err(&input("\t\tip daddr set 10.0.0.1\n"));
    assert!(e.contains("changes the packet later rules see"), "{e}");
}
