//! Constructs of real rulesets (issue 13 items 1, 2, 7) decided in the
//! corpus session: targets left to the kernel, `th` in a named set keyed on
//! the protocol, nft's `mark set` short form, and the clear refusals (host
//! names, MARK, `queue`; `--tcp-option` is read since session 15). Also
//! `check::check`, the one function behind `parapet check` and the conformance suite.

use parapet_model::*;
use parapet_parse::*;

fn first_error(text: &str, format: Format) -> String {
    parse(text, "f", format).unwrap_err()[0].to_string()
}

const MSS: &str = "*filter
:INPUT ACCEPT [0:0]
:FORWARD DROP [0:0]
-A FORWARD -p tcp -m tcp --tcp-flags SYN,RST SYN -j TCPMSS --clamp-mss-to-pmtu
-A FORWARD -j NFLOG --nflog-prefix \"x y\" --nflog-group 2
-A FORWARD -j TCPMSS --set-mss 1400 -p tcp -m tcp --tcp-flags SYN,RST SYN --dport 80
-A FORWARD -i eth0 -j ACCEPT
COMMIT
";

#[test]
fn targets_left_to_the_kernel_are_noted_listed_and_do_not_decide() {
    let rs = parse(MSS, "mss.rules", Format::IptablesSave)
        .unwrap()
        .ruleset;
    let rules: Vec<&Rule> = rs.rules().collect();
    assert_eq!(rules[0].action, Action::Count);
    assert_eq!(rules[0].kernel, ["-j TCPMSS --clamp-mss-to-pmtu"]);
    assert_eq!(
        rules[1].kernel,
        ["-j NFLOG --nflog-prefix \"x y\" --nflog-group 2"]
    );
    // The options after the target are the rule's again.
    assert_eq!(rules[2].kernel, ["-j TCPMSS --set-mss 1400"]);
    assert!(rules[2].matches.get(Field::DstPort).is_some());
    let notes = LeftToKernel::summary(&rs.left_to_kernel);
    assert_eq!(
        notes,
        [
            "ip filter '-j TCPMSS' targets of 2 rules",
            "ip filter '-j NFLOG' targets of 1 rule"
        ]
    );
    // They decide nothing: a SYN to port 80 from eth0 is accepted by rule 4.
    let mut p = Packet::v4(0x0a00_0001, 0x0a00_0002, 6, 1000, 80);
    p.tcp_flags = 0x02;
    p.iif = IfName::new("eth0").unwrap();
    let e = LinearEngine::new(&rs, rs.select_chain(Some("FORWARD")).unwrap()).unwrap();
    let d = e.classify(&p, &NoSets).unwrap();
    assert_eq!((d.rule_id, d.verdict), (4, Verdict::Accept));
    // iptables-save writes them back; the model reads back equal.
    let text = render::iptables_save(&rs).unwrap();
    assert!(
        text.contains("-A FORWARD -p tcp -m tcp --dport 80 --tcp-flags SYN,RST SYN -j TCPMSS --set-mss 1400\n"),
        "{text}"
    );
    let again = parse(&text, "again", Format::IptablesSave).unwrap().ruleset;
    assert_eq!(without_origins(&again), without_origins(&rs));
    // nft has TCPMSS's spelling, not NFLOG's (refused, naming the rule).
    let err = render::nft(&rs).unwrap_err().to_string();
    assert!(err.contains("NFLOG") && err.contains('2'), "{err}");
}

#[test]
fn targets_that_change_what_later_rules_match_are_refused() {
    let e = first_error(
        "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -i ts0 -j CONNMARK --set-xmark 0x40000/0xff0000\nCOMMIT\n",
        Format::IptablesSave,
    );
    assert!(
        e.starts_with(
            "f:3:20: target 'CONNMARK' is not supported: it changes the connection's mark"
        ),
        "{e}"
    );
    let e = first_error(
        "*filter\n:FORWARD ACCEPT [0:0]\n-A FORWARD -p tcp -j TCPMSS\nCOMMIT\n",
        Format::IptablesSave,
    );
    assert!(
        e.contains("TCPMSS needs one of --set-mss N or --clamp-mss-to-pmtu"),
        "{e}"
    );
}

#[test]
fn host_names_are_refused_by_name_and_tcp_options_read() {
    let e = first_error(
        "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -s pxe.example.org -j ACCEPT\nCOMMIT\n",
        Format::IptablesSave,
    );
    assert!(
        e.starts_with("f:3:13: 'pxe.example.org' is a host name: parapet does not resolve names"),
        "{e}"
    );
    // session 15: `--tcp-option` is read (tests/tcp_option_kernel.rs)
    let rs = parse(
        "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -p tcp -m tcp --tcp-option 64 -j DROP\nCOMMIT\n",
        "f",
        Format::IptablesSave,
    )
    .unwrap()
    .ruleset;
    let rule = rs.rules().next().unwrap();
    assert_eq!(
        rule.matches.get(Field::TcpOption(64)),
        Some(&IntervalSet::point(1))
    );
}

fn nft_input(body: &str) -> String {
    format!("table inet t {{\n\tset s {{\n\t\ttype inet_proto . inet_service\n\t\telements = {{ udp . 53 }}\n\t}}\n\tchain input {{\n\t\ttype filter hook input priority 0; policy accept;\n{body}\t}}\n}}\n")
}

#[test]
fn th_in_a_named_set_keyed_on_the_protocol_keeps_to_port_protocols() {
    let rs = parse(
        &nft_input("\t\tmeta l4proto . th dport @s drop\n"),
        "n.nft",
        Format::Nft,
    )
    .unwrap()
    .ruleset;
    let r = rs.rules().next().unwrap();
    assert_eq!(
        r.matches.get(Field::Proto).unwrap(),
        &IntervalSet::from_ranges([(6, 6), (17, 17), (132, 132), (136, 136)])
    );
    // Without the protocol in the key, `th` stays refused.
    let e = first_error(&nft_input("\t\tth dport @s drop\n"), Format::Nft);
    assert!(e.contains("'th' needs the rule to match only tcp"), "{e}");
}

#[test]
fn queue_is_refused_and_mark_set_of_a_number_is_modelled() {
    let e = first_error(&nft_input("\t\ttcp dport 80 queue to 3\n"), Format::Nft);
    assert!(
        e.contains(
            "'queue' is not supported: it hands the packet to a user-space program (NFQUEUE)"
        ),
        "{e}"
    );
    let rs = parse(
        &nft_input("\t\ttcp dport 80 mark set 1\n"),
        "n.nft",
        Format::Nft,
    )
    .unwrap()
    .ruleset;
    let r = rs.rules().next().unwrap();
    assert_eq!(r.set_mark, Some(MarkSet::set(1, u32::MAX)));
    assert!(r.kernel.is_empty());
    // a value parapet does not compute stays the kernel's
    let rs = parse(
        &nft_input("\t\ttcp dport 80 mark set ct mark\n"),
        "n.nft",
        Format::Nft,
    )
    .unwrap()
    .ruleset;
    assert_eq!(rs.rules().next().unwrap().kernel, ["mark set ct mark"]);
}

#[test]
fn check_loads_set_blocks_and_ipset_files() {
    // An nft set block of a type the sets crate refuses: the file's error,
    // at the block's line.
    let text = nft_input("").replace("inet_proto . inet_service", "ipv4_addr . nonsense");
    let e = check::check(&text, "n.nft", Format::Auto).unwrap_err();
    assert_eq!(
        (e[0].line, e[0].message.starts_with("set 's':")),
        (3, true),
        "{e:?}"
    );
    // An ipset file: its sets, no rules.
    let c = check::check(
        "create m hash:mac\nadd m 02:00:00:00:00:01\n",
        "m.ipset",
        Format::Auto,
    )
    .unwrap();
    assert_eq!(c.format, Format::Ipset);
    assert!(c.parsed.is_none());
    assert_eq!(c.sets.names(), ["m"]);
    let e = check::check("create m hash:mac\nadd m 02:00\n", "m.ipset", Format::Auto).unwrap_err();
    assert_eq!(
        (e[0].file.as_str(), e[0].line, e[0].column),
        ("m.ipset", 2, 7)
    );
}

#[test]
fn masked_comparisons_expand_exactly_when_small() {
    let rs = parse(
        &nft_input(
            "\t\tip saddr & 255.0.255.0 == 10.0.1.0 drop\n\t\tudp dport & 0xfff1 != 3009 accept\n",
        ),
        "n.nft",
        Format::Nft,
    )
    .unwrap()
    .ruleset;
    let r = rs.rules().next().unwrap();
    // One range per value of the second octet: 10.X.1.0/24.
    assert_eq!(r.matches.get(Field::SrcAddr).unwrap().ranges().len(), 256);
    let e = LinearEngine::new(&rs, rs.select_chain(None).unwrap()).unwrap();
    let decide = |src: u32, dport: u16| {
        let d = e
            .classify(&Packet::v4(src, 0x0a00_0002, 17, 1, dport), &NoSets)
            .unwrap();
        (d.rule_id, d.verdict)
    };
    assert_eq!(decide(0x0a4d_0105, 53), (1, Verdict::Drop));
    assert_eq!(decide(0x0a4d_0205, 53), (2, Verdict::Accept));
    // 3009 with any of bits 1-3 set is still equal under the mask.
    assert_eq!(decide(0x0a4d_0205, 3015), (0, Verdict::Accept));
    assert_eq!(decide(0x0a4d_0205, 3010), (2, Verdict::Accept));
    // Too many holes for intervals: kept as a masked comparison.
    let rs = parse(
        &nft_input("\t\tip6 saddr & ::ffff == ::1 drop\n"),
        "n.nft",
        Format::Nft,
    )
    .unwrap()
    .ruleset;
    let r = rs.rules().next().unwrap();
    assert!(r.matches.get(Field::SrcAddr).is_none());
    assert_eq!(r.matches.masked().len(), 1);
    assert_eq!(
        (r.matches.masked()[0].mask, r.matches.masked()[0].value),
        (0xffff, 1)
    );
}

#[test]
fn includes_are_looked_for_on_the_search_path_after_the_including_dir() {
    let root = std::env::temp_dir().join(format!("parapet-incl-{}", std::process::id()));
    let (main_dir, lib_dir) = (root.join("etc"), root.join("lib"));
    std::fs::create_dir_all(&main_dir).unwrap();
    std::fs::create_dir_all(&lib_dir).unwrap();
    std::fs::write(lib_dir.join("defs.nft"), "define ssh = 22\n").unwrap();
    let main = main_dir.join("main.nft");
    let text = "include \"defs.nft\"\ntable inet t {\n\tchain input {\n\t\ttype filter hook input priority 0; policy drop;\n\t\ttcp dport $ssh accept\n\t}\n}\n";
    let name = main.to_str().unwrap();
    let e = parse(text, name, Format::Nft).unwrap_err();
    assert!(e[0].message.contains("included file"), "{e:?}");
    let opts = ParseOptions {
        include_dirs: vec![root.join("nowhere"), lib_dir.clone()],
    };
    let p = parse_with(text, name, Format::Nft, &opts).unwrap();
    assert_eq!(p.ruleset.rule_count(), 1);
    // A file next to the including one comes first.
    std::fs::write(main_dir.join("defs.nft"), "define ssh = 2222\n").unwrap();
    let p = parse_with(text, name, Format::Nft, &opts).unwrap();
    let r = p.ruleset.rules().next().unwrap();
    assert_eq!(
        r.matches.get(Field::DstPort).unwrap(),
        &IntervalSet::point(2222)
    );
    let _ = std::fs::remove_dir_all(&root);
}

/// nft's `log group N` (NFLOG) is left to the kernel as iptables' `-j
/// NFLOG` is: noted, written back, and the rule goes on to its verdict.
#[test]
fn nft_log_group_is_left_to_the_kernel_like_nflog() {
    let text = "table ip filter {\n\tchain input {\n\t\ttype filter hook input priority 0; policy accept;\n\
        \t\ttcp dport 22 log group 2 prefix \"ssh \" snaplen 64 drop\n\
        \t\tlog group 0\n\t}\n}\n";
    let rs = parse(text, "g.nft", Format::Nft).unwrap().ruleset;
    let rules: Vec<&Rule> = rs.rules().collect();
    assert_eq!(rules[0].kernel, ["log group 2 prefix \"ssh \" snaplen 64"]);
    assert_eq!(rules[0].action, Action::Verdict(Verdict::Drop));
    assert_eq!(rules[1].kernel, ["log group 0"]);
    assert_eq!(rules[1].action, Action::Count);
    let notes = LeftToKernel::summary(&rs.left_to_kernel);
    assert!(notes.iter().any(|n| n.contains("log group")), "{notes:?}");
    let p = Packet::v4(1, 2, 6, 1000, 22);
    let e = LinearEngine::new(&rs, rs.select_chain(None).unwrap()).unwrap();
    let d = e.classify(&p, &NoSets).unwrap();
    assert_eq!((d.rule_id, d.verdict), (rules[0].id, Verdict::Drop));
    let listing = render::nft(&rs).unwrap();
    assert!(
        listing.contains("log group 2 prefix \"ssh \" snaplen 64"),
        "{listing}"
    );
    let e = first_error(
        "table ip filter {\n\tchain input {\n\t\ttype filter hook input priority 0;\n\t\tlog group 1 level info\n\t}\n}\n",
        Format::Nft,
    );
    assert!(e.contains("'log group' takes no level"), "{e}");
    let e = first_error(
        "table ip filter {\n\tchain input {\n\t\ttype filter hook input priority 0;\n\t\tlog snaplen 10\n\t}\n}\n",
        Format::Nft,
    );
    assert!(e.contains("need 'log group N'"), "{e}");
}
