//! Smaller constructs of real rulesets (issue 13, session 7): nft's ICMP
//! code names, chains that only mangle left to the kernel, and the clear
//! refusals that stay (`queue`, `delete table` of a missing table, iptables
//! options no match has).

use parapet_model::*;
use parapet_parse::*;

fn nft(text: &str) -> Result<Ruleset, String> {
    parse(text, "n.nft", Format::Nft)
        .map(|p| p.ruleset)
        .map_err(|e| e[0].to_string())
}

fn nft_input(family: &str, body: &str) -> String {
    format!("table {family} t {{\n\tchain input {{\n\t\ttype filter hook input priority filter; policy accept;\n{body}\n\t}}\n}}\n")
}

/// The rule that decides `pkt` at the input base chain (0: the policy).
fn decide(rs: &Ruleset, pkt: &Packet) -> u32 {
    let e = LinearEngine::new(rs, rs.select_chain(None).unwrap()).unwrap();
    e.classify(pkt, &NoSets).unwrap().rule_id
}

fn icmp(v6: bool, ty: u8, code: u8) -> Packet {
    let mut p = if v6 {
        Packet::new(
            Family::V6,
            0x2001_0db8 << 96 | 1,
            0x2001_0db8 << 96 | 2,
            58,
            0,
            0,
        )
    } else {
        Packet::v4(0x0a00_0001, 0x0a00_0002, 1, 0, 0)
    };
    p.icmp_type = ty;
    p.icmp_code = code;
    p
}

#[test]
fn nft_icmp_code_names_are_the_codes_nft_describe_prints() {
    // `nft describe icmp_code` / `icmpv6_code`.
    let v4 = [
        ("net-unreachable", 0),
        ("host-unreachable", 1),
        ("prot-unreachable", 2),
        ("port-unreachable", 3),
        ("frag-needed", 4),
        ("net-prohibited", 9),
        ("host-prohibited", 10),
        ("admin-prohibited", 13),
    ];
    for (name, code) in v4 {
        let rs = nft(&nft_input(
            "ip",
            &format!("\t\ticmp type 3 icmp code {name} drop"),
        ))
        .unwrap();
        assert_eq!(decide(&rs, &icmp(false, 3, code)), 1, "{name}");
        assert_eq!(decide(&rs, &icmp(false, 3, code ^ 1)), 0, "{name}");
    }
    let v6 = [
        ("no-route", 0),
        ("admin-prohibited", 1),
        ("addr-unreachable", 3),
        ("port-unreachable", 4),
        ("policy-fail", 5),
        ("reject-route", 6),
    ];
    for (name, code) in v6 {
        let rs = nft(&nft_input("ip6", &format!("\t\ticmpv6 code {name} drop"))).unwrap();
        assert_eq!(decide(&rs, &icmp(true, 1, code)), 1, "{name}");
        assert_eq!(decide(&rs, &icmp(true, 1, code + 7)), 0, "{name}");
    }
    // A set of names, and numbers still.
    let rs = nft(&nft_input(
        "ip",
        "\t\ticmp code { port-unreachable, 13 } drop",
    ))
    .unwrap();
    assert_eq!(decide(&rs, &icmp(false, 3, 3)), 1);
    assert_eq!(decide(&rs, &icmp(false, 3, 13)), 1);
    assert_eq!(decide(&rs, &icmp(false, 3, 1)), 0);
    // A v6 name in an ICMP (v4) match: refused with the names it knows.
    let e = nft(&nft_input("ip", "\t\ticmp code no-route drop")).unwrap_err();
    assert!(
        e.contains("expected an ICMP code 0-255 or one of net-unreachable"),
        "{e}"
    );
}

#[test]
fn nft_reject_with_icmp_names_without_type() {
    // nft ≥ 1.0 lists `reject with icmp port-unreachable` (no `type`).
    for (rule, with) in [
        ("reject with icmp port-unreachable", "icmp-port-unreachable"),
        (
            "reject with icmp type host-unreachable",
            "icmp-host-unreachable",
        ),
        (
            "reject with icmpx admin-prohibited",
            "icmpx-admin-prohibited",
        ),
    ] {
        let rs = nft(&nft_input("inet", &format!("\t\ttcp dport 1 {rule}"))).unwrap();
        let r = rs.rules().next().unwrap();
        assert_eq!(
            r.action,
            Action::Verdict(Verdict::Reject {
                with: Some(with.into())
            }),
            "{rule}"
        );
    }
}
