//! One construct at a time: how each lowers to fields, and its errors.

use parapet_model::*;
use parapet_parse::*;

/// Parses one iptables rule in a filter table and returns its matches.
fn ipt(rule: &str) -> Rule {
    let text = format!("*filter\n:INPUT ACCEPT [0:0]\n:X - [0:0]\n-A INPUT {rule}\nCOMMIT\n");
    let rs = parse(&text, "t", Format::IptablesSave)
        .unwrap_or_else(|e| panic!("{rule}: {}", e[0]))
        .ruleset;
    let rule = rs.rules().next().unwrap().clone();
    rule
}

fn ipt_err(rule: &str) -> String {
    let text = format!("*filter\n:INPUT ACCEPT [0:0]\n:X - [0:0]\n-A INPUT {rule}\nCOMMIT\n");
    match parse(&text, "t", Format::IptablesSave) {
        Ok(_) => panic!("{rule} parsed"),
        Err(e) => e[0].to_string(),
    }
}

fn get(r: &Rule, f: Field) -> Vec<(u128, u128)> {
    r.matches
        .get(f)
        .map(|s| s.ranges().to_vec())
        .unwrap_or_default()
}

#[test]
fn negation_before_and_after_the_option() {
    let a = ipt("! -s 10.0.0.0/8 -j ACCEPT");
    let b = ipt("-s ! 10.0.0.0/8 -j ACCEPT");
    assert_eq!(a.matches, b.matches);
    assert_eq!(
        get(&a, Field::SrcAddr),
        [(0, 0x09ff_ffff), (0x0b00_0000, 0xffff_ffff)]
    );
    assert!(ipt_err("! ! -s 1.2.3.4 -j ACCEPT").contains("another '!'"));
}

#[test]
fn addresses_lists_and_masks() {
    let r = ipt("-d 10.0.0.1,10.0.0.2/31,192.168.0.0/255.255.0.0 -j ACCEPT");
    assert_eq!(
        get(&r, Field::DstAddr),
        [(0x0a00_0001, 0x0a00_0003), (0xc0a8_0000, 0xc0a8_ffff)]
    );
    assert!(ipt_err("-s 10.0.0.0/255.0.255.0 -j ACCEPT").contains("not contiguous"));
    // An IPv6 address makes the file ip6tables-save; an IPv4 one is then wrong.
    assert!(ipt_err("-s ::1 -d 1.2.3.4 -j ACCEPT").starts_with("t:4:20: expected an IPv6 address"));
    assert!(ipt_err("-s example.com -j ACCEPT")
        .contains("'example.com' is a host name: parapet does not resolve names"));
    assert!(ipt_err("-s bad,1.2.3.4 -j ACCEPT").contains("expected an IPv4 address, found 'bad'"));
}

#[test]
fn protocols_and_ports() {
    assert!(ipt("-p all -j ACCEPT").matches.get(Field::Proto).is_none());
    assert_eq!(
        get(&ipt("! -p udp -j ACCEPT"), Field::Proto),
        [(0, 16), (18, 255)]
    );
    assert_eq!(get(&ipt("-p 47 -j ACCEPT"), Field::Proto), [(47, 47)]);
    let r = ipt("-p udp --sport :1023 --dport 1024: -j ACCEPT");
    assert_eq!(get(&r, Field::SrcPort), [(0, 1023)]);
    assert_eq!(get(&r, Field::DstPort), [(1024, 65535)]);
    assert_eq!(
        get(&ipt("-p tcp --dport ssh -j ACCEPT"), Field::DstPort),
        [(22, 22)]
    );
    let r = ipt("-p tcp -m tcp ! --dport 22 -j ACCEPT");
    assert_eq!(get(&r, Field::DstPort), [(0, 21), (23, 65535)]);
    // `! --ports` (neither port in the list) is one box; `--ports` is two:
    // source in the list, else destination in it, both with the rule's id.
    let text = "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -p tcp -m multiport --ports 22,80 -j ACCEPT\nCOMMIT\n";
    let rs = parse(text, "t", Format::IptablesSave).unwrap().ruleset;
    let rules: Vec<&Rule> = rs.rules().collect();
    assert_eq!(rules.len(), 2);
    assert_eq!((rules[0].id, rules[1].id), (1, 1));
    assert_eq!(get(rules[0], Field::SrcPort), [(22, 22), (80, 80)]);
    assert_eq!(get(rules[1], Field::DstPort), [(22, 22), (80, 80)]);
    assert_eq!(
        get(rules[1], Field::SrcPort),
        [(0, 21), (23, 79), (81, 65535)]
    );
    let listed = render::iptables_save(&rs).unwrap();
    assert!(
        listed.contains("-m multiport --ports 22,80 -j ACCEPT"),
        "{listed}"
    );
    let again = parse(&listed, "t", Format::IptablesSave).unwrap().ruleset;
    assert_eq!(without_origins(&again), without_origins(&rs));
    let r = ipt("-p tcp -m multiport ! --ports 22,80 -j ACCEPT");
    assert_eq!(get(&r, Field::SrcPort), get(&r, Field::DstPort));
    assert_eq!(get(&r, Field::SrcPort), [(0, 21), (23, 79), (81, 65535)]);
    assert!(ipt_err("-p icmp --dport 22 -j ACCEPT")
        .contains("option --dport needs -m tcp|udp|sctp|udplite"));
    assert!(ipt_err("-p tcp --dport 99999 -j ACCEPT")
        .contains("expected a port number 0-65535, found '99999'"));
    assert!(ipt_err("-p tcp --dport 30:20 -j ACCEPT").contains("empty"));
    assert!(ipt_err("-m multiport --dports 1,2 -j ACCEPT")
        .contains("-m multiport needs -p tcp|udp|sctp|udplite"));
}

#[test]
fn interfaces_fragments_icmp_flags() {
    let (lo, hi) = IfName::wildcard_range("veth");
    // In a user chain: iptables refuses -o in INPUT.
    let rs = parse(
        "*filter\n:INPUT ACCEPT [0:0]\n:X - [0:0]\n-A X -o veth+ -j ACCEPT\nCOMMIT\n",
        "t",
        Format::IptablesSave,
    )
    .unwrap()
    .ruleset;
    assert_eq!(get(rs.rules().next().unwrap(), Field::OutIface), [(lo, hi)]);
    assert!(ipt("-i + -j ACCEPT").matches.get(Field::InIface).is_none());
    assert!(ipt_err("-i averyveryverylongname -j ACCEPT").contains("longer than 15"));
    assert_eq!(get(&ipt("! -f -j ACCEPT"), Field::Fragment), [(0, 0)]);
    assert_eq!(
        get(
            &ipt("-p icmp --icmp-type echo-request -j ACCEPT"),
            Field::IcmpTypeCode
        ),
        [(0x800, 0x8ff)]
    );
    assert_eq!(
        get(
            &ipt("-p icmp --icmp-type port-unreachable -j ACCEPT"),
            Field::IcmpTypeCode
        ),
        [(0x303, 0x303)]
    );
    assert!(ipt("-p icmp --icmp-type any -j ACCEPT")
        .matches
        .get(Field::IcmpTypeCode)
        .is_none());
    assert!(ipt_err("-p icmp --icmp-type bogus -j ACCEPT")
        .contains("expected an ICMP type name or number"));
    let r = ipt("-p tcp --tcp-flags SYN,ACK NONE -j ACCEPT");
    let flags = r.matches.get(Field::TcpFlags).unwrap();
    assert!(flags.contains(0x01) && !flags.contains(0x02) && !flags.contains(0x10));
    assert!(ipt_err("-p udp --syn -j ACCEPT").contains("option --syn needs -m tcp"));
}

#[test]
fn conntrack_sets_comments_limits() {
    assert_eq!(
        get(
            &ipt("-m state --state NEW,UNTRACKED -j ACCEPT"),
            Field::CtState
        ),
        [(1, 1), (4, 4)]
    );
    assert_eq!(
        get(
            &ipt("-m conntrack ! --ctstate INVALID -j ACCEPT"),
            Field::CtState
        ),
        [(1, 255)]
    );
    assert!(ipt_err("-m state --state SNAT -j ACCEPT").contains("expected conntrack states"));
    assert_eq!(
        get(
            &ipt("-m conntrack --ctstate DNAT -j ACCEPT"),
            Field::CtStatus
        ),
        [(32, 63)]
    );
    let r = ipt("-m comment --comment 'single quoted \"x\"' -j ACCEPT");
    assert_eq!(r.comment.as_deref(), Some("single quoted \"x\""));
    let r = ipt(r#"-m comment --comment "esc \"q\" \\ ok" -j ACCEPT"#);
    assert_eq!(r.comment.as_deref(), Some(r#"esc "q" \ ok"#));
    let r = ipt("-m limit --limit-burst 7 -j ACCEPT");
    assert_eq!(
        r.limit,
        Some(Limit {
            rate: 3,
            per: TimeUnit::Hour,
            burst: 7,
            flavor: LimitFlavor::Xt,
            over: false,
            object: None,
        })
    );
    assert_eq!(
        ipt("-m limit --limit 10/day -j ACCEPT").limit.unwrap().per,
        TimeUnit::Day
    );
    assert!(
        ipt_err("-m limit --limit 10/fortnight -j ACCEPT").contains("expected a rate like 5/min")
    );
    assert!(ipt_err("--comment x -j ACCEPT").contains("needs -m comment"));
    // connlimit counts conntrack entries per address: refused with why.
    let e = ipt_err("-p tcp -m connlimit --connlimit-above 3 -j REJECT");
    assert!(
        e.contains(
            "t:4:20: match 'connlimit' is not supported: it counts the host's tracked connections"
        ),
        "{e}"
    );
    assert!(ipt_err("-m set --match-set s sideways -j ACCEPT").contains("expected src or dst"));
}

#[test]
fn targets() {
    assert_eq!(ipt("-g X").action, Action::Goto("X".into()));
    assert_eq!(ipt("-j X").action, Action::Jump("X".into()));
    assert_eq!(ipt("-s 1.2.3.4").action, Action::Count);
    assert_eq!(
        ipt("-j LOG --log-level info").action,
        Action::Log(LogSpec {
            prefix: None,
            level: Some(6),
            ..Default::default()
        })
    );
    assert!(ipt_err("-j INPUT").contains("cannot jump to built-in chain 'INPUT'"));
    assert!(ipt_err("-j DNAT --to-destination 1.2.3.4").contains("target 'DNAT' is not supported"));
    assert!(ipt_err("-j CT --notrack").contains("target 'CT' is not supported"));
    assert!(ipt_err("-j NFQUEUE").contains("target 'NFQUEUE' is not supported"));
    // After a target's own options come the rule's again, as
    // iptables-restore reads them; --reject-with is not one of them.
    assert!(ipt_err("-j ACCEPT --reject-with tcp-reset").contains("unknown option '--reject-with'"));
    let r = ipt("-j RETURN -d 10.0.0.0/8");
    assert_eq!((r.action, r.matches.len()), (Action::Return, 2));
    assert_eq!(
        ipt("-j LOG --log-uid --log-tcp-sequence -p tcp").action,
        Action::Log(LogSpec {
            options: vec!["--log-tcp-sequence".into(), "--log-uid".into()],
            ..Default::default()
        })
    );
    assert!(ipt_err("-j").starts_with("t:4:13: expected a value after -j"));
}

#[test]
fn file_structure_errors() {
    let cases: &[(&str, &str)] = &[
        (
            "-A INPUT -j ACCEPT\n",
            "1:1: expected '*TABLE' (like *filter)",
        ),
        (
            "*filter\n:INPUT ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\nCOMMIT\n",
            "3:2: chain 'INPUT' is declared twice",
        ),
        (
            "*filter\n:X ACCEPT [0:0]\nCOMMIT\n",
            "2:4: 'X' is not a built-in chain of table 'filter'",
        ),
        (
            "*filter\n:INPUT - [0:0]\nCOMMIT\n",
            "2:8: built-in chain 'INPUT' needs a policy ACCEPT or DROP",
        ),
        (
            "*filter\n:INPUT ACCEPT [x:0]\nCOMMIT\n",
            "2:15: expected counters [PACKETS:BYTES]",
        ),
        ("COMMIT\n", "1:1: COMMIT outside a table"),
        (
            "*filter\n-I INPUT -j ACCEPT\nCOMMIT\n",
            "2:4: chain 'INPUT' is not declared in table 'filter'",
        ),
        (
            "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -j MARK --set-mark 1/2/3\nCOMMIT\n",
            "3:29: --set-mark takes VALUE[/MASK]",
        ),
        (
            "*filter\n*filter\nCOMMIT\n",
            "2:1: expected COMMIT for table 'filter'",
        ),
        ("*broute\nCOMMIT\n", "1:2: table 'broute' is not supported"),
    ];
    for (text, want) in cases {
        let errs = parse(text, "f", Format::IptablesSave).unwrap_err();
        let got = errs[0].to_string();
        assert!(
            got.starts_with(&format!("f:{want}")),
            "{text:?}: got {got}, want {want}"
        );
    }
}

#[test]
fn all_errors_of_a_file_and_no_partial_ruleset() {
    let text = "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -s bad -j ACCEPT\n-A INPUT -p tcp -j ACCEPT\n-A INPUT -m nope -j ACCEPT\nCOMMIT\n";
    let errs = parse(text, "f", Format::IptablesSave).unwrap_err();
    assert_eq!(errs.len(), 2);
    assert_eq!((errs[0].line, errs[1].line), (3, 5));
}

#[test]
fn ids_follow_file_order_across_tables_and_chains() {
    let text = "*raw\n:PREROUTING ACCEPT [0:0]\n-A PREROUTING -j ACCEPT\nCOMMIT\n*filter\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n-A OUTPUT -j ACCEPT\n-A INPUT -j DROP\nCOMMIT\n";
    let rs = parse(text, "f", Format::IptablesSave).unwrap().ruleset;
    let input = &rs.tables[0].chains[0];
    let output = &rs.tables[0].chains[1];
    // The raw table is left to the kernel: its rule is not a rule of the
    // model but keeps its place (id 1) in the file's numbering.
    assert_eq!((input.rules[0].id, output.rules[0].id), (3, 2));
    // Rendering keeps file order, so the ids survive.
    let out = render::iptables_save(&rs).unwrap();
    let again = parse(&out, "g", Format::IptablesSave).unwrap().ruleset;
    assert_eq!(without_origins(&again), without_origins(&rs));
}

/// One nft rule in an inet (or given family) table.
fn nft_in(family: &str, rule: &str) -> Result<Rule, String> {
    let text = format!(
        "table {family} t {{\n\tchain c {{\n\t\ttype filter hook input priority 0; policy accept;\n\t\t{rule}\n\t}}\n\tchain other {{\n\t}}\n}}\n"
    );
    parse(&text, "n", Format::Nft)
        .map(|p| p.ruleset.rules().next().unwrap().clone())
        .map_err(|e| e[0].to_string())
}

fn nft(rule: &str) -> Rule {
    nft_in("inet", rule).unwrap_or_else(|e| panic!("{rule}: {e}"))
}

#[test]
fn nft_expressions() {
    let r = nft("ip saddr { 10.0.0.0/8, 192.168.1.1-192.168.1.9 } ip daddr != 1.2.3.4 accept");
    assert_eq!(get(&r, Field::Family), [(4, 4)]);
    assert_eq!(
        get(&r, Field::SrcAddr),
        [(0x0a00_0000, 0x0aff_ffff), (0xc0a8_0101, 0xc0a8_0109)]
    );
    assert_eq!(
        get(&r, Field::DstAddr),
        [(0, 0x0102_0303), (0x0102_0305, 0xffff_ffff)]
    );
    let r = nft("ip6 saddr 2001:db8::/32 drop");
    assert_eq!(get(&r, Field::Family), [(6, 6)]);
    let r = nft("udp dport != { 53, 123 } accept");
    assert_eq!(get(&r, Field::Proto), [(17, 17)]);
    assert_eq!(get(&r, Field::DstPort), [(0, 52), (54, 122), (124, 65535)]);
    assert_eq!(
        get(&nft("tcp dport < 1024 accept"), Field::DstPort),
        [(0, 1023)]
    );
    assert_eq!(
        get(&nft("tcp sport >= 1024 accept"), Field::SrcPort),
        [(1024, 65535)]
    );
    assert_eq!(
        get(&nft("tcp dport ssh accept"), Field::DstPort),
        [(22, 22)]
    );
    assert_eq!(
        get(&nft("meta l4proto { tcp, udp } accept"), Field::Proto),
        [(6, 6), (17, 17)]
    );
    let r = nft("ip protocol icmp accept");
    assert_eq!(
        (get(&r, Field::Proto), get(&r, Field::Family)),
        (vec![(1, 1)], vec![(4, 4)])
    );
    assert_eq!(
        get(&nft("meta nfproto ipv6 accept"), Field::Family),
        [(6, 6)]
    );
    let (lo, hi) = IfName::wildcard_range("eth");
    assert_eq!(
        get(&nft("iifname \"eth*\" accept"), Field::InIface),
        [(lo, hi)]
    );
    let lo0 = IfName::new("lo").unwrap().0;
    assert_eq!(
        get(&nft("oifname { \"lo\" } accept"), Field::OutIface),
        [(lo0, lo0)]
    );
    assert_eq!(
        get(&nft("ct state { new, untracked } accept"), Field::CtState),
        [(1, 1), (4, 4)]
    );
    assert_eq!(
        get(&nft("ct state != established accept"), Field::CtState),
        [(0, 1), (3, 255)]
    );
    let r = nft("icmp type destination-unreachable icmp code 4 accept");
    assert_eq!(get(&r, Field::IcmpTypeCode), [(0x304, 0x304)]);
    assert_eq!(get(&r, Field::Proto), [(1, 1)]);
    assert_eq!(
        get(&nft("ip frag-off & 0x1fff != 0 drop"), Field::Fragment),
        [(1, 1)]
    );
}

#[test]
fn nft_tcp_flags_forms() {
    let classic = nft("tcp flags & (fin|syn|rst|ack) == syn accept");
    let slash = nft("tcp flags syn / fin,syn,rst,ack accept");
    assert_eq!(classic.matches, slash.matches);
    let syn_ack = ipt("-p tcp --tcp-flags FIN,SYN,RST,ACK SYN -j ACCEPT");
    assert_eq!(
        get(&classic, Field::TcpFlags),
        get(&syn_ack, Field::TcpFlags)
    );
    let not = nft("tcp flags & (syn|ack) != syn accept");
    assert_eq!(
        not.matches.get(Field::TcpFlags).unwrap().complement(0xff),
        *nft("tcp flags & (syn|ack) == syn accept")
            .matches
            .get(Field::TcpFlags)
            .unwrap()
    );
    // A bare flag: any of them set.
    let any = nft("tcp flags syn accept");
    let f = any.matches.get(Field::TcpFlags).unwrap();
    assert!(f.contains(0x12) && !f.contains(0x10));
}

#[test]
fn nft_statements_and_verdicts() {
    let r = nft("counter packets 5 bytes 300 log prefix \"p \" level crit comment \"c\"");
    assert_eq!(
        r.counters,
        Counters {
            packets: 5,
            bytes: 300
        }
    );
    assert_eq!(
        r.action,
        Action::Log(LogSpec {
            prefix: Some("p ".into()),
            level: Some(2),
            ..Default::default()
        })
    );
    assert_eq!(r.comment.as_deref(), Some("c"));
    for (text, with) in [
        ("reject", None),
        ("reject with tcp reset", Some("tcp-reset")),
        (
            "reject with icmp type host-prohibited",
            Some("icmp-host-prohibited"),
        ),
        (
            "reject with icmp type prot-unreachable",
            Some("icmp-proto-unreachable"),
        ),
        (
            "reject with icmpv6 type admin-prohibited",
            Some("icmp6-adm-prohibited"),
        ),
        (
            "reject with icmpx type port-unreachable",
            Some("icmpx-port-unreachable"),
        ),
    ] {
        assert_eq!(
            nft(text).action,
            Action::Verdict(Verdict::Reject {
                with: with.map(str::to_string)
            }),
            "{text}"
        );
    }
    assert_eq!(nft("goto other").action, Action::Goto("other".into()));
    assert_eq!(
        nft("limit rate 10/minute accept").limit,
        Some(Limit {
            rate: 10,
            per: TimeUnit::Minute,
            burst: 5,
            flavor: LimitFlavor::Nft,
            over: false,
            object: None,
        })
    );
}

#[test]
fn nft_families_and_errors() {
    assert_eq!(
        get(&nft_in("ip", "tcp dport 22 accept").unwrap(), Field::Family),
        [(4, 4)]
    );
    assert_eq!(
        get(
            &nft_in("ip6", "tcp dport 22 accept").unwrap(),
            Field::Family
        ),
        [(6, 6)]
    );
    assert!(nft_in("ip6", "ip saddr 1.2.3.4 accept")
        .unwrap_err()
        .contains("'ip' matches cannot appear in a ip6 table"));
    let over = nft_in("inet", "limit rate over 10/second drop").unwrap();
    assert!(over
        .limit
        .as_ref()
        .is_some_and(|l| l.over && l.flavor == LimitFlavor::Nft));
    assert!(nft_in("inet", "limit rate 1/second tcp dport 22 accept")
        .unwrap_err()
        .contains("a match after 'limit' is not supported"));
    assert!(nft_in("inet", "log prefix \"x\" limit rate 1/second drop")
        .unwrap_err()
        .contains("'log' before 'limit' is not supported"));
    assert!(nft_in("inet", "accept drop")
        .unwrap_err()
        .starts_with("n:4:10: expected the end of the rule after the verdict"));
    assert!(nft_in("inet", "queue num 1")
        .unwrap_err()
        .contains("'queue' is not supported: it hands the packet to a user-space program"));
    assert!(nft_in("inet", "log prefix \"x\" drop drop")
        .unwrap_err()
        .starts_with("n:4:23: expected the end of the rule after the verdict"));
    assert!(nft_in(
        "inet",
        "ip saddr . tcp dport vmap { 1.2.3.4 . 22 : accept }"
    )
    .is_ok());
    assert!(nft_in("inet", "jump c")
        .unwrap_err()
        .contains("cannot jump to base chain 'c'"));
    // NAT is the kernel's: the chain is kept, reported, not enforced.
    let nat = "table ip nat {\n\tchain pre {\n\t\ttype nat hook prerouting priority dstnat; policy accept;\n\t\ttcp dport 80 dnat to 10.0.0.2\n\t}\n}\n";
    let rs = parse(nat, "n", Format::Nft).unwrap().ruleset;
    assert_eq!(rs.rule_count(), 0);
    assert_eq!(rs.left_to_kernel.len(), 1);
    assert_eq!(rs.left_to_kernel[0].describe(), "ip nat (pre 1 rule)");
    // A filter chain reaching a NAT statement is still an error.
    let bad = "table ip t {\n\tchain input {\n\t\ttype filter hook input priority 0;\n\t\tjump x\n\t}\n\tchain x {\n\t\tdnat to 10.0.0.2\n\t}\n}\n";
    let e = parse(bad, "n", Format::Nft).unwrap_err();
    assert!(
        e[0].to_string()
            .starts_with("n:7:3: unknown expression 'dnat'"),
        "{}",
        e[0]
    );
    let loop_ = "table inet t {\n\tchain a {\n\t\tjump b\n\t}\n\tchain b {\n\t\tgoto a\n\t}\n}\n";
    let e = parse(loop_, "n", Format::Nft).unwrap_err();
    assert_eq!(e[0].to_string(), "n:6:8: chain loop: a -> b -> a");
}

#[test]
fn detection_and_format_names() {
    assert_eq!(
        detect("*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -s 2001:db8::1 -j DROP\nCOMMIT\n"),
        Format::Ip6tablesSave
    );
    assert_eq!(detect("\n# hand-written\n*filter\n"), Format::IptablesSave);
    assert_eq!(detect("flush ruleset\ntable ip f {\n}\n"), Format::Nft);
    assert_eq!(
        detect("create blocklist hash:net family inet hashsize 1024 maxelem 65536\n"),
        Format::Ipset
    );
    let e = parse("what is this", "x", Format::Auto).unwrap_err();
    assert!(e[0]
        .to_string()
        .starts_with("x:1:1: cannot tell the format"));
    let e = parse("create s hash:ip\n", "x", Format::Auto).unwrap_err();
    assert!(e[0].message.contains("ipset save file"));
    for f in [
        Format::Auto,
        Format::IptablesSave,
        Format::Ip6tablesSave,
        Format::Classbench,
        Format::Nft,
        Format::Ipset,
    ] {
        assert_eq!(f.name().parse::<Format>(), Ok(f));
    }
}

#[test]
fn json_is_the_model() {
    let text = "*filter\n:INPUT DROP [0:0]\n-A INPUT -p tcp --dport 22 -j ACCEPT\nCOMMIT\n";
    let rs = parse(text, "f", Format::IptablesSave).unwrap().ruleset;
    let json = render::json(&rs);
    let back: Ruleset = serde_json::from_str(&json).unwrap();
    assert_eq!(back, rs);
}

#[test]
fn render_refuses_what_it_cannot_say() {
    // Two disjoint port sets of 16 items exceed multiport in both spellings.
    let mut m = Matches::any();
    m.constrain(Field::Family, IntervalSet::point(4));
    m.constrain(Field::Proto, IntervalSet::point(6));
    m.constrain(
        Field::DstPort,
        IntervalSet::from_ranges((0..16u128).map(|i| (i * 100, i * 100))),
    );
    // A port match never matches a non-first fragment, in nft as in the
    // kernel: the model says so too, so the listing reads back equal.
    m.constrain(Field::Fragment, IntervalSet::point(0));
    let rs = parapet_gen::one_chain(
        vec![Rule::new(0, m, Action::Verdict(Verdict::Drop))],
        Verdict::Accept,
    );
    let e = render::iptables_save(&rs).unwrap_err();
    assert_eq!(e.rule_id, 1);
    assert!(e.to_string().contains("more than 15"), "{e}");
    // nft lists them in an anonymous set.
    let out = render::nft(&rs).unwrap();
    let again = parse(&out, "n", Format::Nft).unwrap().ruleset;
    assert_eq!(without_origins(&again), without_origins(&rs));
    // Addresses that are neither prefix nor range nor their conjunction.
    let mut m = Matches::any();
    m.constrain(Field::Family, IntervalSet::point(4));
    m.constrain(
        Field::SrcAddr,
        IntervalSet::from_ranges([(1, 1), (5, 5), (9, 9)]),
    );
    let rs = parapet_gen::one_chain(
        vec![Rule::new(0, m, Action::Verdict(Verdict::Drop))],
        Verdict::Accept,
    );
    assert!(render::iptables_save(&rs)
        .unwrap_err()
        .to_string()
        .starts_with("rule 1: saddr"));
}

#[test]
fn nft_log_then_verdict_is_one_rule_that_logs() {
    let r = nft("log prefix \"x: \" level warn drop");
    assert_eq!(r.action, Action::Verdict(Verdict::Drop));
    assert_eq!(
        r.log,
        Some(LogSpec {
            prefix: Some("x: ".into()),
            level: Some(4),
            ..Default::default()
        })
    );
    let plain = nft("log prefix \"y\"");
    assert_eq!(plain.log, None);
    assert!(matches!(plain.action, Action::Log(_)));
}

/// The decision of a one-rule INPUT chain (policy DROP) for a packet.
fn decides(rule: &str, pkt: &str) -> Verdict {
    let text = format!("*filter\n:INPUT DROP [0:0]\n-A INPUT {rule}\nCOMMIT\n");
    let rs = parse(&text, "t", Format::IptablesSave).unwrap().ruleset;
    let e = LinearEngine::new(&rs, rs.select_chain(None).unwrap()).unwrap();
    e.classify(&pkt.parse().unwrap(), &NoSets).unwrap().verdict
}

/// iptables' `ALL` is FIN,SYN,RST,PSH,ACK,URG (libxt_tcp: 0x3F): ECE and CWR
/// are never examined, so the scan rules real hosts use keep their kernel
/// meaning for ECN packets; ECE/CWR are names iptables-restore refuses.
#[test]
fn tcp_flags_all_is_the_six_classic_flags() {
    let syn = "-p tcp -m tcp --tcp-flags ALL SYN -j ACCEPT";
    assert_eq!(get(&ipt(syn), Field::TcpFlags).len(), 4, "ECE/CWR free");
    assert_eq!(
        decides(syn, "tcp 1.2.3.4:1 > 5.6.7.8:22 flags SYN,ECE,CWR"),
        Verdict::Accept
    );
    assert_eq!(
        decides(syn, "tcp 1.2.3.4:1 > 5.6.7.8:22 flags SYN,ACK"),
        Verdict::Drop
    );
    let none = "-p tcp -m tcp --tcp-flags ALL NONE -j ACCEPT";
    assert_eq!(
        decides(none, "tcp 1.2.3.4:1 > 5.6.7.8:22 flags ECE"),
        Verdict::Accept
    );
    let all = "-p tcp -m tcp --tcp-flags ALL ALL -j ACCEPT";
    assert_eq!(
        decides(
            all,
            "tcp 1.2.3.4:1 > 5.6.7.8:22 flags FIN,SYN,RST,PSH,ACK,URG"
        ),
        Verdict::Accept
    );
    assert!(
        ipt_err("-p tcp --tcp-flags SYN,ECE SYN -j ACCEPT")
            .starts_with("t:4:29: iptables has no TCP flag 'ECE'"),
        "{}",
        ipt_err("-p tcp --tcp-flags SYN,ECE SYN -j ACCEPT")
    );
    // A listing writes what iptables-restore reads: ALL as the six names.
    let text = "*filter\n:INPUT DROP [0:0]\n-A INPUT -p tcp -m tcp --tcp-flags ALL SYN -j ACCEPT\nCOMMIT\n";
    let rs = parse(text, "t", Format::IptablesSave).unwrap().ruleset;
    let out = render::iptables_save(&rs).unwrap();
    assert!(
        out.contains("--tcp-flags FIN,SYN,RST,PSH,ACK,URG SYN") && !out.contains("ECE"),
        "{out}"
    );
    // nft can constrain ECE/CWR; iptables cannot say it, so listing fails.
    let nft = "table ip filter {\n\tchain INPUT {\n\t\ttype filter hook input priority 0; policy accept;\n\t\ttcp flags == syn accept\n\t}\n}\n";
    let rs = parse(nft, "n", Format::Nft).unwrap().ruleset;
    let e = render::iptables_save(&rs).unwrap_err();
    assert!(e.to_string().contains("cannot name ECE or CWR"), "{e}");
}

/// `--icmp-type 255` is every type in the kernel (`test_type == 0xFF`),
/// and every name `iptables -p icmp -h` lists loads.
#[test]
fn icmp_type_255_and_iptables_icmp_names() {
    for any in ["255", "255/0", "any"] {
        let rule = format!("-p icmp -m icmp --icmp-type {any} -j ACCEPT");
        assert!(
            ipt(&rule).matches.get(Field::IcmpTypeCode).is_none(),
            "{any}"
        );
        assert_eq!(
            decides(&rule, "icmp 1.2.3.4 > 5.6.7.8 type 3 code 1"),
            Verdict::Accept
        );
    }
    let v6 = "*filter\n:INPUT DROP [0:0]\n-A INPUT -p ipv6-icmp -m icmp6 --icmpv6-type 255 -j ACCEPT\nCOMMIT\n";
    let rs = parse(v6, "t", Format::Ip6tablesSave).unwrap().ruleset;
    assert!(rs
        .rules()
        .next()
        .unwrap()
        .matches
        .get(Field::IcmpTypeCode)
        .is_none());
    for (name, range) in [
        ("ping", (0x800, 0x8ff)),
        ("pong", (0x000, 0x0ff)),
        ("ttl-exceeded", (0xb00, 0xbff)),
        ("host-redirect", (0x501, 0x501)),
        ("network-redirect", (0x500, 0x500)),
        ("TOS-network-redirect", (0x502, 0x502)),
        ("TOS-host-redirect", (0x503, 0x503)),
        ("network-unknown", (0x306, 0x306)),
        ("host-unknown", (0x307, 0x307)),
        ("TOS-network-unreachable", (0x30b, 0x30b)),
        ("TOS-host-unreachable", (0x30c, 0x30c)),
        ("host-precedence-violation", (0x30e, 0x30e)),
        ("precedence-cutoff", (0x30f, 0x30f)),
        ("ip-header-bad", (0xc00, 0xc00)),
        ("required-option-missing", (0xc01, 0xc01)),
    ] {
        let r = ipt(&format!("-p icmp -m icmp --icmp-type {name} -j ACCEPT"));
        assert_eq!(get(&r, Field::IcmpTypeCode), [range], "{name}");
    }
    // iptables' aliases are not nft names.
    let nft = "table ip t {\n\tchain c {\n\t\ttype filter hook input priority 0; policy accept;\n\t\ticmp type ping accept\n\t}\n}\n";
    assert!(parse(nft, "n", Format::Nft).is_err());
}

#[test]
fn nft_named_limit_objects_are_shared() {
    let text = "table inet t {\n\tlimit shared {\n\t\trate over 10/second burst 3 packets\n\t\tcomment \"one bucket\"\n\t}\n\n\tchain input {\n\t\ttype filter hook input priority 0; policy accept;\n\t\tudp dport 53 limit name \"shared\" drop\n\t\ttcp dport 53 limit name shared drop\n\t}\n}\n";
    let rs = parse(text, "n", Format::Nft).unwrap().ruleset;
    let limits: Vec<&Limit> = rs.rules().map(|r| r.limit.as_ref().unwrap()).collect();
    assert_eq!(limits.len(), 2);
    for l in &limits {
        assert_eq!(l.object.as_deref(), Some("shared"));
        assert_eq!(
            (l.rate, l.per, l.burst, l.over),
            (10, TimeUnit::Second, 3, true)
        );
    }
    let out = render::nft(&rs).unwrap();
    let again = parse(&out, "again", Format::Nft).unwrap().ruleset;
    assert_eq!(without_origins(&again), without_origins(&rs), "{out}");
    assert!(render::iptables_save(&rs).is_err());
    let e = parse(
        &text.replace("limit name shared", "limit name other"),
        "n",
        Format::Nft,
    )
    .unwrap_err();
    assert!(
        e[0].to_string().contains("no limit object 'other'"),
        "{}",
        e[0]
    );
}

/// What iptables-restore refuses is refused (issue 13 item 8), and what it
/// reads besides `-A` is read.
#[test]
fn restore_refusals_and_commands() {
    let e = ipt_err("-o lo -j ACCEPT");
    assert!(
        e.starts_with("t:4:10:") && e.contains("Can't use -o with INPUT"),
        "{e}"
    );
    let out = parse(
        "*filter\n:OUTPUT ACCEPT [0:0]\n-A OUTPUT -i lo -j ACCEPT\nCOMMIT\n",
        "t",
        Format::IptablesSave,
    )
    .unwrap_err();
    assert!(
        out[0].to_string().contains("Can't use -i with OUTPUT"),
        "{}",
        out[0]
    );
    let e = ipt_err("-p tcp -m multiport --dports 1,2 --sports 3 -j ACCEPT");
    assert!(e.contains("one -m multiport takes one of"), "{e}");
    assert_eq!(
        ipt("-p tcp -m multiport --dports 1,2 -m multiport --sports 3 -j ACCEPT")
            .matches
            .get(Field::SrcPort),
        Some(&IntervalSet::point(3))
    );
    // -P, -N, -F before rules, ':CHAIN [p:b]'.
    let rs = parse(
        "*filter\n:INPUT ACCEPT [0:0]\n:U [0:0]\n-N V\n-F\n-P INPUT DROP\n-A INPUT -j V\nCOMMIT\n",
        "t",
        Format::IptablesSave,
    )
    .unwrap()
    .ruleset;
    let chains: Vec<&str> = rs.tables[0]
        .chains
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(chains, ["INPUT", "U", "V"]);
    assert_eq!(
        rs.tables[0].chains[0].base.as_ref().unwrap().policy,
        Verdict::Drop
    );
    let e = parse(
        "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -j ACCEPT\n-F INPUT\nCOMMIT\n",
        "t",
        Format::IptablesSave,
    )
    .unwrap_err();
    assert!(
        e[0].to_string().starts_with("t:4:1: '-F' after rules"),
        "{}",
        e[0]
    );
    // Every netbase name: protocols and services.
    assert_eq!(
        ipt("-p vrrp").matches.get(Field::Proto),
        Some(&IntervalSet::point(112))
    );
    assert_eq!(
        ipt("-p tcp --dport postgresql").matches.get(Field::DstPort),
        Some(&IntervalSet::point(5432))
    );
    // A port match never matches a non-first fragment; a bare -p does.
    assert_eq!(
        ipt("-p tcp --sport 0:65535").matches.get(Field::Fragment),
        Some(&IntervalSet::point(0))
    );
    assert_eq!(ipt("-p tcp").matches.get(Field::Fragment), None);
}
