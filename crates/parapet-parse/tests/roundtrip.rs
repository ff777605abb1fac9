//! Property: random rulesets survive render → parse with the same model and
//! the same decisions.

use parapet_gen::{packets_for, random_ruleset, RandomSpec};
use parapet_model::*;
use parapet_parse::*;
use proptest::prelude::*;

/// The generator makes a few rules no iptables rule can be: ports or ICMP
/// types under a negated protocol (`! -p tcp --dport 22` is refused by
/// iptables), and empty conntrack state sets (a rule that never matches).
/// A /0 prefix is also dropped: iptables-save never prints one. Rewrite
/// those into what they mean for first-match decisions: drop the
/// unwritable constraint (ports and types only apply under `-p` anyway),
/// and make never-matching rules counter-only rules, which decide nothing.
fn make_expressible(rs: &mut Ruleset) {
    for t in &mut rs.tables {
        for c in &mut t.chains {
            for r in &mut c.rules {
                let single_proto = matches!(r.matches.get(Field::Proto).map(|s| s.ranges()), Some([(a, b)]) if a == b);
                if r.matches.is_unsatisfiable() {
                    r.matches = Matches::any();
                    r.matches.constrain(Field::Family, IntervalSet::point(4));
                    r.action = Action::Count;
                    continue;
                }
                let mut m = Matches::any();
                for (f, v) in r.matches.iter() {
                    let port_like = matches!(
                        f,
                        Field::SrcPort | Field::DstPort | Field::IcmpTypeCode | Field::TcpFlags
                    );
                    // A /0 prefix is no constraint for an IPv4 rule; iptables-save omits it.
                    let whole_v4 =
                        matches!(f, Field::SrcAddr | Field::DstAddr) && v.is_full(0xffff_ffff);
                    if (!port_like || single_proto) && !whole_v4 {
                        m.constrain(*f, v.clone());
                    }
                }
                transport_header_means_first_fragment(&mut m);
                if m.is_unsatisfiable() {
                    m = Matches::any();
                    m.constrain(Field::Family, IntervalSet::point(4));
                    r.action = Action::Count;
                }
                r.matches = m;
            }
        }
    }
}

/// A port, flag or ICMP match reads the transport header, which a
/// non-first fragment does not have: iptables' and nft's matches never
/// match one, and the parsers say so (`fragment` 0).
fn transport_header_means_first_fragment(m: &mut Matches) {
    if m.reads_transport_header() {
        m.constrain(Field::Fragment, IntervalSet::point(0));
    }
}

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

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn random_rulesets_survive_iptables_save(seed in any::<u64>()) {
        let spec = RandomSpec { rules: 30, user_chains: 3, ipv6: false, set_refs: 0, control_flow: true };
        let mut rs = parapet_gen::random_ruleset_with_header_fields(seed, &spec);
        make_expressible(&mut rs);
        let text = render::iptables_save(&rs).unwrap();
        let parsed = parse(&text, "gen.v4", Format::Auto)
            .unwrap_or_else(|e| panic!("{e:?}\n{text}"))
            .ruleset;
        prop_assert_eq!(without_origins(&parsed), rs.clone(), "{}", text);
        let packets = packets_for(&rs, seed, 300);
        prop_assert_eq!(decisions(&parsed, &packets), decisions(&rs, &packets));

        // The same ruleset through nft.
        let text = render::nft(&rs).unwrap();
        let parsed = parse(&text, "gen.nft", Format::Nft)
            .unwrap_or_else(|e| panic!("{e:?}\n{text}"))
            .ruleset;
        prop_assert_eq!(without_origins(&parsed), rs.clone(), "{}", text);
    }
}

#[test]
fn renders_refuse_honestly() {
    // A rule iptables cannot write (ports under a negated protocol, and a
    // log riding on a verdict): the renderer names it instead of writing
    // something else.
    let mut m = Matches::any();
    m.constrain(Field::Family, IntervalSet::point(4));
    m.constrain(Field::Proto, IntervalSet::point(6).complement(0xff));
    m.constrain(Field::DstPort, IntervalSet::point(22));
    let mut v4 = Matches::any();
    v4.constrain(Field::Family, IntervalSet::point(4));
    let rs = parapet_gen::one_chain(
        vec![
            Rule::new(0, v4.clone(), Action::Count),
            Rule::new(0, m, Action::Verdict(Verdict::Drop)),
        ],
        Verdict::Accept,
    );
    let e = render::iptables_save(&rs).unwrap_err();
    assert_eq!(e.rule_id, 2, "{e}");
    let mut logged = parapet_gen::one_chain(
        vec![Rule::new(0, v4, Action::Verdict(Verdict::Drop))],
        Verdict::Accept,
    );
    logged.tables[0].chains[0].rules[0].log = Some(LogSpec::default());
    assert_eq!(render::iptables_save(&logged).unwrap_err().rule_id, 1);
    assert!(render::nft(&logged).unwrap().contains("log drop"));
}

#[test]
fn ipv6_rulesets_survive_ip6tables_save() {
    let mut rs = parapet_gen::one_chain(Vec::new(), Verdict::Drop);
    rs.tables[0].family = TableFamily::Ip6;
    let mut m = Matches::any();
    m.constrain(Field::Family, IntervalSet::point(6));
    m.constrain(
        Field::SrcAddr,
        IntervalSet::prefix(0x2001_0db8 << 96, 32, 128).complement(u128::MAX),
    );
    m.constrain(Field::DstAddr, IntervalSet::range(1, 1000));
    m.constrain(Field::Proto, IntervalSet::point(58));
    m.constrain(Field::IcmpTypeCode, IntervalSet::point(0x8000));
    m.constrain(Field::Fragment, IntervalSet::point(0));
    rs.tables[0].chains[0]
        .rules
        .push(Rule::new(1, m, Action::Verdict(Verdict::Accept)));
    let text = render::iptables_save(&rs).unwrap();
    assert!(text.contains("! -s 2001:db8::/32"), "{text}");
    assert!(text.contains("--dst-range ::1-::3e8"), "{text}");
    assert!(text.contains("-m icmp6 --icmpv6-type 128/0"), "{text}");
    let again = parse(&text, "x", Format::Auto).unwrap();
    assert_eq!(again.format, Format::Ip6tablesSave);
    assert_eq!(without_origins(&again.ruleset), rs);
}

/// For nft's inet tables: additionally, ICMP types need the matching
/// family (nft's `icmp type` implies IPv4) and fragments are written only
/// for IPv4 (`ip frag-off`).
fn make_nft_expressible(rs: &mut Ruleset) {
    for t in &mut rs.tables {
        for c in &mut t.chains {
            for r in &mut c.rules {
                if r.matches.is_unsatisfiable() {
                    r.matches = Matches::any();
                    r.action = Action::Count;
                    continue;
                }
                let fam = r.matches.get(Field::Family).map(|s| s.ranges().to_vec());
                let proto = r.matches.get(Field::Proto).map(|s| s.ranges().to_vec());
                let icmp_ok = matches!(
                    (fam.as_deref(), proto.as_deref()),
                    (Some([(4, 4)]), Some([(1, 1)])) | (Some([(6, 6)]), Some([(58, 58)]))
                );
                let single_proto = matches!(proto.as_deref(), Some([(a, b)]) if a == b);
                let mut m = Matches::any();
                for (f, v) in r.matches.iter() {
                    let keep = match f {
                        Field::SrcPort | Field::DstPort | Field::TcpFlags => single_proto,
                        Field::IcmpTypeCode => icmp_ok,
                        Field::Fragment => fam.as_deref() == Some(&[(4, 4)]),
                        Field::SrcAddr | Field::DstAddr => !v.is_full(0xffff_ffff),
                        _ => true,
                    };
                    if keep {
                        m.constrain(*f, v.clone());
                    }
                }
                transport_header_means_first_fragment(&mut m);
                if m.is_unsatisfiable() {
                    m = Matches::any();
                    r.action = Action::Count;
                }
                r.matches = m;
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn random_inet_rulesets_survive_nft(seed in any::<u64>()) {
        let spec = RandomSpec { rules: 30, user_chains: 3, ipv6: true, set_refs: 0, control_flow: true };
        let mut rs = random_ruleset(seed, &spec);
        make_nft_expressible(&mut rs);
        let text = render::nft(&rs).unwrap_or_else(|e| panic!("{e}"));
        let parsed = parse(&text, "gen.nft", Format::Auto)
            .unwrap_or_else(|e| panic!("{e:?}\n{text}"))
            .ruleset;
        prop_assert_eq!(without_origins(&parsed), rs.clone(), "{}", text);
        let packets = packets_for(&rs, seed, 300);
        prop_assert_eq!(decisions(&parsed, &packets), decisions(&rs, &packets));
    }
}

/// `--dport 0:65535` on IPv6 only keeps non-first fragments out; nft has no
/// `ip6 frag-off`, so the listing writes the full-range selector, whose
/// transport payload never matches a non-first fragment either, and reads
/// back as the same rule.
#[test]
fn ipv6_full_range_ports_list_as_nft_and_back() {
    let text = "# Generated by ip6tables-save v1.8.9\n*filter\n:INPUT ACCEPT [0:0]\n\
                -A INPUT -p tcp --dport 0:65535 -j DROP\n\
                -A INPUT -p udp --sport 0:65535 -j ACCEPT\n\
                COMMIT\n";
    let rs = parse(text, "x", Format::Auto).unwrap().ruleset;
    let nft = render::nft(&rs).unwrap_or_else(|e| panic!("{e}"));
    assert!(nft.contains("tcp dport 0-65535 drop"), "{nft}");
    assert!(nft.contains("udp dport 0-65535 accept"), "{nft}");
    let again = parse(&nft, "x.nft", Format::Auto).unwrap().ruleset;
    let packets = packets_for(&rs, 7, 300);
    assert_eq!(decisions(&again, &packets), decisions(&rs, &packets));
}

/// Packets across TTL, DSCP and length edges, of both families.
fn header_packets() -> Vec<Packet> {
    let mut out = Vec::new();
    for family in [Family::V4, Family::V6] {
        for ttl in [0u8, 1, 4, 5, 64, 100, 101, 149, 150, 200, 201, 255] {
            for dscp in [0u8, 8, 10, 34, 46, 63] {
                for len in [20u32, 40, 60, 61, 100, 200, 201, 299, 300, 65535, 70000] {
                    let mut p = Packet::new(family, 1, 2, 253, 0, 0);
                    (p.ttl, p.dscp, p.len) = (ttl, dscp, len);
                    out.push(p);
                }
            }
        }
    }
    out
}

#[test]
fn header_fields_survive_both_syntaxes() {
    let v4 = "*filter\n:INPUT DROP [0:0]\n\
              -A INPUT -m ttl --ttl-eq 1 -j ACCEPT\n\
              -A INPUT -m ttl --ttl-lt 5 -m dscp --dscp 0x2e -j ACCEPT\n\
              -A INPUT -m ttl --ttl-gt 200 -m length --length 100:200 -j ACCEPT\n\
              -A INPUT -m ttl ! --ttl-eq 64 -m length ! --length 0:60 -j ACCEPT\n\
              -A INPUT -m dscp --dscp-class AF41 -j ACCEPT\n\
              -A INPUT -m dscp ! --dscp 0 -m length --length 300: -j ACCEPT\n\
              -A INPUT -m length --length :40 -j ACCEPT\n\
              -A INPUT -m ttl --ttl-gt 100 -m ttl --ttl-lt 150 -j ACCEPT\n\
              COMMIT\n";
    let v6 = v4.replace("-m ttl", "-m hl").replace("--ttl-", "--hl-");
    let v6 = format!("# Generated by ip6tables-save v1.8.9\n{v6}");
    let nft =
        "table inet t {\n\tchain input {\n\t\ttype filter hook input priority 0; policy drop;\n\
               \t\tip ttl 1 accept\n\
               \t\tip ttl < 5 ip dscp ef accept\n\
               \t\tip6 hoplimit > 200 meta length 100-200 accept\n\
               \t\tip6 hoplimit != 64 meta length != 0-60 accept\n\
               \t\tip dscp { af41, cs1, 3-5 } accept\n\
               \t\tip6 dscp != cs0 meta length >= 300 accept\n\
               \t\tmeta length <= 40 accept\n\
               \t\tip ttl { 100-150, 7 } accept\n\
               \t}\n}\n";
    let packets = header_packets();
    for (name, text) in [
        ("h.v4", v4.to_string()),
        ("h.v6", v6),
        ("h.nft", nft.to_string()),
    ] {
        let rs = parse(&text, name, Format::Auto)
            .unwrap_or_else(|e| panic!("{name}: {e:?}"))
            .ruleset;
        let want = decisions(&rs, &packets);
        let deciding: std::collections::BTreeSet<u32> = want.iter().map(|d| d.0).collect();
        assert!(
            deciding.len() >= 8,
            "{name}: rules barely decide: {deciding:?}"
        );
        let mut listings = vec![(
            "nft",
            render::nft(&rs).unwrap_or_else(|e| panic!("{name}: {e}")),
        )];
        if !name.ends_with("nft") {
            listings.push((
                "iptables",
                render::iptables_save(&rs).unwrap_or_else(|e| panic!("{name}: {e}")),
            ));
        }
        for (syntax, listing) in listings {
            let again = parse(&listing, name, Format::Auto)
                .unwrap_or_else(|e| panic!("{name} as {syntax}: {e:?}\n{listing}"))
                .ruleset;
            assert_eq!(
                decisions(&again, &packets),
                want,
                "{name} as {syntax}:\n{listing}"
            );
            if syntax == "iptables" {
                assert_eq!(without_origins(&again), without_origins(&rs), "{listing}");
            }
        }
    }
}

#[test]
fn header_field_errors_name_the_construct() {
    let bad = [
        ("-m ttl ! --ttl-lt 5", "cannot negate --ttl-lt"),
        ("-m ttl --ttl-eq 1 --ttl-lt 5", "takes one option"),
        ("-m ttl --ttl-eq 256", "0-255"),
        ("-m hl --hl-eq 1", "iptables has no -m hl"),
        ("-m dscp --dscp 64", "0-63"),
        ("-m dscp --dscp-class XX", "DSCP class"),
        ("-m length --length 1:x", "length or range"),
        ("--ttl-eq 1", "needs -m ttl"),
    ];
    for (rule, want) in bad {
        let text = format!("*filter\n:INPUT ACCEPT [0:0]\n-A INPUT {rule} -j DROP\nCOMMIT\n");
        let e = parse(&text, "x", Format::IptablesSave).unwrap_err();
        let msg = format!("{e:?}");
        assert!(msg.contains(want), "{rule}: {msg}");
    }
    let text = "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -m ttl --ttl-eq 1 -j DROP\nCOMMIT\n";
    let e = parse(
        &format!("# Generated by ip6tables-save\n{text}"),
        "x",
        Format::Auto,
    )
    .unwrap_err();
    assert!(
        format!("{e:?}").contains("ip6tables has no -m ttl"),
        "{e:?}"
    );
}

/// Packets with every conntrack status (bits 0..5) in every state that has
/// an entry; without one (INVALID, UNTRACKED) the status is 0.
fn status_packets() -> Vec<Packet> {
    let mut out = Vec::new();
    for ct in CtState::ALL {
        let tracked = !matches!(ct, CtState::Invalid | CtState::Untracked);
        for status in 0u8..if tracked { 64 } else { 1 } {
            let mut p = Packet::new(Family::V4, 1, 2, 17, 1, 7001);
            (p.ct_state, p.ct_status) = (ct, status);
            out.push(p);
        }
    }
    out
}

#[test]
fn ct_status_survives_both_syntaxes() {
    let ipt = "*filter\n:INPUT DROP [0:0]\n\
               -A INPUT -m conntrack --ctstate DNAT -p udp --dport 1 -j ACCEPT\n\
               -A INPUT -m conntrack --ctstate SNAT,DNAT -p udp --dport 2 -j ACCEPT\n\
               -A INPUT -m conntrack ! --ctstate SNAT -j DROP\n\
               -A INPUT -m conntrack --ctstate DNAT -m conntrack ! --ctstate SNAT -j ACCEPT\n\
               -A INPUT -m conntrack --ctstate ESTABLISHED -j ACCEPT\n\
               COMMIT\n";
    let nft =
        "table inet t {\n\tchain input {\n\t\ttype filter hook input priority 0; policy drop;\n\
               \t\tct status dnat udp dport 1 accept\n\
               \t\tct status snat,dnat udp dport 2 accept\n\
               \t\tct status & (snat|dnat) == dnat drop\n\
               \t\tct status & assured != 0 accept\n\
               \t\tct status & 0x0a == 0x08 accept\n\
               \t\tct status & seen-reply == 0 drop\n\
               \t\tct state established accept\n\
               \t}\n}\n";
    let mut packets = status_packets();
    for p in status_packets() {
        for dport in [1, 2] {
            packets.push(Packet { dport, ..p.clone() });
        }
    }
    for (name, text, syntaxes) in [
        ("s.ipt", ipt, &["nft-refused", "iptables"][..]),
        ("s.nft", nft, &["nft"][..]),
    ] {
        let rs = parse(text, name, Format::Auto)
            .unwrap_or_else(|e| panic!("{name}: {e:?}"))
            .ruleset;
        let want = decisions(&rs, &packets);
        let deciding: std::collections::BTreeSet<u32> = want.iter().map(|d| d.0).collect();
        assert!(
            deciding.len() >= 5,
            "{name}: rules barely decide: {deciding:?}"
        );
        for &syntax in syntaxes {
            let listing = match syntax {
                "iptables" => render::iptables_save(&rs),
                "nft-refused" => {
                    // `! --ctstate SNAT` takes packets without an entry:
                    // nft's ct status never matches those
                    let e = render::nft(&rs).unwrap_err();
                    assert!(e.message.contains("without a conntrack entry"), "{e}");
                    continue;
                }
                _ => render::nft(&rs),
            }
            .unwrap_or_else(|e| panic!("{name}: {e}"));
            let again = parse(&listing, name, Format::Auto)
                .unwrap_or_else(|e| panic!("{name} as {syntax}: {e:?}\n{listing}"))
                .ruleset;
            assert_eq!(
                decisions(&again, &packets),
                want,
                "{name} as {syntax}:\n{listing}"
            );
        }
    }
    // the same conditions without the negations list as nft too
    let rs = parse(
        &ipt.replace(" -j DROP\n", " -j ACCEPT\n")
            .replace("! --ctstate SNAT", "--ctstate SNAT"),
        "s2",
        Format::Auto,
    )
    .unwrap()
    .ruleset;
    let listing = render::nft(&rs).unwrap();
    let again = parse(&listing, "s2", Format::Auto).unwrap().ruleset;
    assert_eq!(
        decisions(&again, &packets),
        decisions(&rs, &packets),
        "{listing}"
    );
}

#[test]
fn ct_status_errors_name_the_construct() {
    let nft_bad = [
        ("ct status == dnat", "compare all 32 status bits"),
        ("ct status != dnat", "compare all 32 status bits"),
        ("ct status { dnat, snat }", "compares all 32 status bits"),
        ("ct status dying", "ct status parapet knows"),
        ("ct status & dnat == snat", "bits outside the mask"),
        ("ct status & dnat", "expected '==' or '!='"),
    ];
    for (expr, want) in nft_bad {
        let text = format!(
            "table inet t {{\n\tchain c {{\n\t\ttype filter hook forward priority 0;\n\t\t{expr} accept\n\t}}\n}}\n"
        );
        let e = parse(&text, "x", Format::Nft).unwrap_err();
        let msg = format!("{e:?}");
        assert!(msg.contains(want), "{expr}: {msg}");
        assert!(msg.contains("line: 4"), "{expr}: position: {msg}");
    }
    let text = "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -m conntrack --ctstate ESTABLISHED,DNAT -j DROP\nCOMMIT\n";
    let msg = format!("{:?}", parse(text, "x", Format::IptablesSave).unwrap_err());
    assert!(msg.contains("not one box"), "{msg}");
    let text = "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -m state --state DNAT -j DROP\nCOMMIT\n";
    let msg = format!("{:?}", parse(text, "x", Format::IptablesSave).unwrap_err());
    assert!(msg.contains("expected conntrack states"), "{msg}");
}

/// One conntrack address condition: (address bits, prefix length 1..=128
/// cut to the family's width, negated).
type CtAddrPick = Option<(u128, u32, bool)>;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The conntrack entry's addresses (`--ctorigsrc` … `--ctrepldst`,
    /// `ct original|reply ip|ip6 saddr|daddr`): a prefix or its complement
    /// on any of the four, either family, survive both renderers and
    /// parsers with the same model (a tracked state required, as both
    /// parsers read it).
    #[test]
    fn ct_addresses_survive_both_syntaxes(
        v6 in any::<bool>(),
        picks in prop::array::uniform4(prop::option::of((any::<u128>(), 1u32..=128, any::<bool>()))),
    ) {
        let picks: [CtAddrPick; 4] = picks;
        prop_assume!(picks.iter().any(Option::is_some));
        let fam = if v6 { Family::V6 } else { Family::V4 };
        let (bits, max) = (fam.addr_bits(), width_mask(fam.addr_bits()));
        let mut m = Matches::any();
        m.constrain(Field::Family, IntervalSet::point(fam.value()));
        m.constrain(Field::CtState, IntervalSet::range(1, 3));
        let fields = [Field::CtOrigSrc, Field::CtOrigDst, Field::CtReplSrc, Field::CtReplDst];
        for (f, pick) in fields.into_iter().zip(picks) {
            let Some((a, len, neg)) = pick else { continue };
            let len = 1 + (len - 1) % bits;
            let set = IntervalSet::prefix(a & max, len, bits);
            m.constrain(f, if neg { set.complement(max) } else { set });
        }
        let mut rs = parapet_gen::one_chain(
            vec![Rule::new(1, m, Action::Verdict(Verdict::Accept))],
            Verdict::Drop,
        );
        if v6 {
            rs.tables[0].family = TableFamily::Ip6;
        }
        for (text, name) in [
            (render::iptables_save(&rs).unwrap(), "gen.rules"),
            (render::nft(&rs).unwrap(), "gen.nft"),
        ] {
            let parsed = parse(&text, name, Format::Auto)
                .unwrap_or_else(|e| panic!("{e:?}\n{text}"))
                .ruleset;
            prop_assert_eq!(without_origins(&parsed), rs.clone(), "{}", text);
        }
    }
}

/// `-I CHAIN` puts a rule before rules written above it (its id, its place
/// in the file, is later than theirs): the listing keeps it first in its
/// chain, so the listed ruleset decides as the file does. (The listing
/// wrote rules in id order before, which moved it behind them.)
#[test]
fn inserted_rules_stay_first_in_the_listing() {
    let text = "*filter\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n-A INPUT -p tcp -j ACCEPT\n-A OUTPUT -p tcp -j ACCEPT\n-I INPUT -p tcp -m tcp --dport 22 -j DROP\n-I INPUT 2 -p tcp -m tcp --dport 23 -j DROP\nCOMMIT\n";
    let rs = parse(text, "i.v4", Format::IptablesSave).unwrap().ruleset;
    let listed = render::iptables_save(&rs).unwrap();
    let input: Vec<&str> = listed
        .lines()
        .filter(|l| l.starts_with("-A INPUT"))
        .collect();
    assert_eq!(
        input,
        [
            "-A INPUT -p tcp -m tcp --dport 22 -j DROP",
            "-A INPUT -p tcp -m tcp --dport 23 -j DROP",
            "-A INPUT -p tcp -j ACCEPT"
        ],
        "{listed}"
    );
    let back = parse(&listed, "l.v4", Format::IptablesSave)
        .unwrap()
        .ruleset;
    let pkt = Packet::v4(0x0a00_0001, 0x0a00_0002, 6, 1000, 22);
    let verdict = |rs: &Ruleset| {
        let chain = rs.select_chain(Some("filter/INPUT")).unwrap();
        LinearEngine::new(rs, chain)
            .unwrap()
            .classify(&pkt, &NoSets)
            .unwrap()
            .verdict
    };
    assert_eq!(verdict(&rs), Verdict::Drop);
    assert_eq!(verdict(&back), Verdict::Drop);
}
