//! Real-shaped files: what iptables-save, iptables-save -c, ip6tables-save
//! and nft list ruleset print, and malformed files with exact positions.

use parapet_model::*;
use parapet_parse::*;

fn data(name: &str) -> String {
    let path = format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn load(name: &str) -> Parsed {
    let text = data(name);
    parse(&text, name, Format::Auto).unwrap_or_else(|errs| {
        panic!(
            "{}",
            errs.iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join("\n")
        )
    })
}

fn rule(rs: &Ruleset, id: u32) -> &Rule {
    rs.rules().find(|r| r.id == id).expect("rule id exists")
}

fn classify(rs: &Ruleset, p: &Packet, sets: &dyn SetLookup) -> (u32, Verdict) {
    let e = LinearEngine::new(rs, rs.select_chain(None).unwrap()).unwrap();
    let d = e.classify(p, sets).unwrap();
    (d.rule_id, d.verdict)
}

fn pkt(s: &str) -> Packet {
    s.parse().unwrap()
}

/// Checks parse → render → parse gives the same model, in both syntaxes
/// where the ruleset is expressible.
fn round_trips(rs: &Ruleset, iptables: bool) {
    if iptables {
        let text = render::iptables_save(rs).unwrap();
        let again =
            parse(&text, "rendered", Format::Auto).unwrap_or_else(|e| panic!("{e:?}\n{text}"));
        assert_eq!(
            without_origins(&again.ruleset),
            without_origins(rs),
            "{text}"
        );
    }
    let text = render::nft(rs).unwrap();
    let again =
        parse(&text, "rendered.nft", Format::Nft).unwrap_or_else(|e| panic!("{e:?}\n{text}"));
    // nft has one limit, with its own rounding: an iptables limit listed
    // as nft comes back as nft's (docs/syntax.md says so).
    assert_eq!(
        nft_limits(without_origins(&again.ruleset)),
        nft_limits(without_origins(rs)),
        "{text}"
    );
}

fn nft_limits(mut rs: Ruleset) -> Ruleset {
    for t in &mut rs.tables {
        for c in &mut t.chains {
            for r in &mut c.rules {
                if let Some(l) = &mut r.limit {
                    l.flavor = LimitFlavor::Nft;
                }
            }
        }
    }
    rs
}

#[test]
fn debian_style_host_firewall() {
    let p = load("host.v4");
    assert_eq!(p.format, Format::IptablesSave);
    let rs = &p.ruleset;
    assert_eq!(rs.rule_count(), 13);
    assert_eq!(rs.tables[0].family, TableFamily::Ip);
    let input = &rs.tables[0].chains[0];
    assert_eq!(input.base.as_ref().unwrap().policy, Verdict::Drop);
    // -p tcp -m multiport --dports 22 -j f2b-sshd
    let r4 = rule(rs, 4);
    assert_eq!(r4.action, Action::Jump("f2b-sshd".into()));
    assert_eq!(
        r4.matches.get(Field::DstPort).unwrap().ranges(),
        &[(22, 22)]
    );
    assert_eq!(r4.matches.get(Field::Family).unwrap().ranges(), &[(4, 4)]);
    assert_eq!(r4.origin.line, 10);
    let r5 = rule(rs, 5);
    assert_eq!(
        r5.matches.get(Field::IcmpTypeCode).unwrap().ranges(),
        &[(0x800, 0x8ff)]
    );
    assert_eq!(
        r5.limit,
        Some(Limit {
            rate: 5,
            per: TimeUnit::Second,
            burst: 10,
            flavor: LimitFlavor::Xt,
            over: false,
            object: None,
        })
    );
    assert_eq!(rule(rs, 7).comment.as_deref(), Some("web server"));
    assert_eq!(
        rule(rs, 9).action,
        Action::Log(LogSpec {
            prefix: Some("INPUT drop: ".into()),
            level: Some(4),
            ..Default::default()
        })
    );
    assert_eq!(
        rule(rs, 11).action,
        Action::Verdict(Verdict::Reject {
            with: Some("icmp-port-unreachable".into())
        })
    );
    assert_eq!(rule(rs, 13).action, Action::Return);
    // The fail2ban chain bans one address and RETURNs for the rest.
    assert_eq!(
        classify(rs, &pkt("tcp 203.0.113.7:4000 > 10.0.0.1:22"), &NoSets).0,
        12
    );
    assert_eq!(
        classify(rs, &pkt("tcp 203.0.113.8:4000 > 10.0.0.1:22"), &NoSets).0,
        6
    );
    assert_eq!(
        classify(rs, &pkt("icmp 1.2.3.4 > 10.0.0.1 type 8"), &NoSets).0,
        5
    );
    assert_eq!(
        classify(rs, &pkt("udp 192.168.1.9:999 > 10.0.0.1:53"), &NoSets).0,
        8
    );
    assert_eq!(
        classify(rs, &pkt("udp 192.168.2.9:999 > 10.0.0.1:53"), &NoSets).0,
        11
    );
    assert_eq!(
        classify(
            rs,
            &pkt("tcp 1.2.3.4:1 > 10.0.0.1:80 ct established"),
            &NoSets
        )
        .0,
        2
    );
    assert_eq!(
        classify(rs, &pkt("tcp 1.2.3.4:1 > 10.0.0.1:9 iif lo"), &NoSets).0,
        1
    );
    round_trips(rs, true);
}

#[test]
fn counters_and_several_tables() {
    let p = load("counters.v4");
    let rs = &p.ruleset;
    // The raw table is the kernel's: loaded, reported, not enforced; its
    // rule keeps its place in the numbering (id 1) without being a rule.
    assert_eq!(rs.tables.len(), 1);
    assert_eq!(rs.tables[0].name, "filter");
    assert_eq!(rs.left_to_kernel.len(), 1);
    let raw = &rs.left_to_kernel[0];
    assert_eq!((raw.table.as_str(), raw.line), ("raw", 2));
    assert_eq!(
        raw.chains,
        vec![("PREROUTING".to_string(), 1), ("OUTPUT".to_string(), 0)]
    );
    assert!(rs.rules().all(|r| r.id != 1));
    assert_eq!(rule(rs, 2).origin.line, 14);
    assert_eq!(rs.rule_count(), 15);
    assert_eq!(
        rule(rs, 2).counters,
        Counters {
            packets: 310,
            bytes: 25240
        }
    );
    let input = &rs.tables[0].chains[0];
    assert_eq!(
        input.base.as_ref().unwrap().counters,
        Counters {
            packets: 12,
            bytes: 720
        }
    );
    // --tcp-flags FIN,SYN,RST,ACK SYN and ! --syn are exact complements.
    let syn = rule(rs, 4).matches.get(Field::TcpFlags).unwrap().clone();
    let not_syn = rule(rs, 5).matches.get(Field::TcpFlags).unwrap().clone();
    assert_eq!(syn.complement(0xff), not_syn);
    assert!(syn.contains(0x02) && !syn.contains(0x12) && syn.contains(0x0a));
    // Dotted mask.
    let r6 = rule(rs, 6);
    assert_eq!(
        r6.matches.get(Field::SrcAddr).unwrap().ranges(),
        &[(0x0a00_0000, 0x0aff_ffff)]
    );
    assert_eq!(
        r6.matches.get(Field::SrcPort).unwrap().ranges(),
        &[(1024, 65535)]
    );
    assert_eq!(
        r6.matches.get(Field::DstPort).unwrap().ranges(),
        &[(161, 162)]
    );
    assert_eq!(
        rule(rs, 7).matches.get(Field::SrcAddr).unwrap().ranges(),
        &[(0xc633_640a, 0xc633_6414)]
    );
    assert_eq!(
        rule(rs, 8)
            .matches
            .get(Field::IcmpTypeCode)
            .unwrap()
            .ranges(),
        &[(0x304, 0x304)]
    );
    assert_eq!(
        rule(rs, 10).matches.get(Field::Fragment).unwrap().ranges(),
        &[(1, 1)]
    );
    let (lo, hi) = IfName::wildcard_range("eth");
    assert_eq!(
        rule(rs, 11).matches.get(Field::InIface).unwrap(),
        &IntervalSet::range(lo, hi).complement(u128::MAX)
    );
    assert_eq!(rs.set_refs.len(), 2);
    assert_eq!(
        rs.set_refs[1].key,
        SetKeySpec::Flags(vec![Dir::Src, Dir::Dst])
    );
    assert_eq!(
        rule(rs, 13).matches.get(Field::Set(1)).unwrap().ranges(),
        &[(0, 0)]
    );
    // iptables-save -c round trip keeps the counters.
    let text = render::iptables_save(rs).unwrap();
    assert!(
        text.contains("[310:25240] -A INPUT -i lo -j ACCEPT"),
        "{text}"
    );
    let again = parse(&text, "r", Format::IptablesSave).unwrap().ruleset;
    assert_eq!(without_origins(&again), without_origins(rs));
    // nft cannot say iptables' direction-flag set matches.
    let e = render::nft(rs).unwrap_err();
    assert_eq!(e.rule_id, 12);
    assert!(e.to_string().starts_with("rule 12: set 'blocklist'"), "{e}");
}

#[test]
fn ip6tables_host() {
    let p = load("host.v6");
    assert_eq!(p.format, Format::Ip6tablesSave);
    let rs = &p.ruleset;
    assert_eq!(rs.tables[0].family, TableFamily::Ip6);
    assert_eq!(rs.rule_count(), 10);
    for r in rs.rules() {
        assert_eq!(r.matches.get(Field::Family).unwrap().ranges(), &[(6, 6)]);
    }
    assert_eq!(
        rule(rs, 4).matches.get(Field::Proto).unwrap().ranges(),
        &[(58, 58)]
    );
    assert_eq!(
        rule(rs, 4)
            .matches
            .get(Field::IcmpTypeCode)
            .unwrap()
            .ranges(),
        &[(0x8000, 0x80ff)]
    );
    assert_eq!(
        rule(rs, 9).matches.get(Field::DstPort).unwrap().ranges(),
        &[(80, 80), (443, 443), (8000, 8100)]
    );
    assert_eq!(
        classify(
            rs,
            &pkt("tcp [2001:db8:10::5]:1000 > [2001:db8::1]:22"),
            &NoSets
        )
        .0,
        8
    );
    assert_eq!(
        classify(
            rs,
            &pkt("tcp [2001:db9::5]:1000 > [2001:db8::1]:8080"),
            &NoSets
        )
        .0,
        9
    );
    assert_eq!(
        classify(
            rs,
            &pkt("tcp [2001:db8::5]:1000 > [2001:db8::1]:8080"),
            &NoSets
        )
        .0,
        10
    );
    // An IPv4 packet is no rule's business: the policy decides.
    assert_eq!(
        classify(rs, &pkt("tcp 1.2.3.4:1 > 5.6.7.8:22"), &NoSets),
        (0, Verdict::Drop)
    );
    round_trips(rs, true);
}

struct Members;

impl SetLookup for Members {
    fn contains(&self, set_ref: &SetRef, pkt: &Packet) -> bool {
        match set_ref.name.as_str() {
            "blocklist4" => (pkt.src >> 8) == 0xc0_00_02,
            "ssh_allow" => pkt.src == 0x0a00_0005 && pkt.dport == 22,
            _ => false,
        }
    }
}

#[test]
fn nft_inet_table_with_sets() {
    let p = load("inet.nft");
    assert_eq!(p.format, Format::Nft);
    let rs = &p.ruleset;
    assert_eq!(rs.rule_count(), 16);
    assert_eq!(p.set_blocks.len(), 2);
    assert_eq!(p.set_blocks[0].name, "blocklist4");
    assert_eq!(p.set_blocks[0].line, 2);
    assert!(
        p.set_blocks[1].text.starts_with("set ssh_allow {") && p.set_blocks[1].text.ends_with('}')
    );
    assert_eq!(
        rs.set_refs[1].key,
        SetKeySpec::Fields(vec![Field::SrcAddr, Field::DstPort])
    );
    let base = rs.tables[0].chains[0].base.as_ref().unwrap();
    assert_eq!(
        (base.hook, base.policy.clone()),
        (Hook::Input, Verdict::Drop)
    );
    // inet: no family unless an ip/ip6/icmp match implies it.
    assert!(rule(rs, 1).matches.get(Field::Family).is_none());
    assert_eq!(
        rule(rs, 4).matches.get(Field::Family).unwrap().ranges(),
        &[(4, 4)]
    );
    assert_eq!(
        rule(rs, 5).matches.get(Field::Proto).unwrap().ranges(),
        &[(6, 6)]
    );
    assert_eq!(
        rule(rs, 3).counters,
        Counters {
            packets: 3,
            bytes: 180
        }
    );
    assert_eq!(
        rule(rs, 6)
            .matches
            .get(Field::IcmpTypeCode)
            .unwrap()
            .ranges(),
        &[(0x300, 0x3ff), (0x800, 0x8ff)]
    );
    assert_eq!(
        rule(rs, 7).matches.get(Field::Family).unwrap().ranges(),
        &[(6, 6)]
    );
    assert_eq!(rule(rs, 9).comment.as_deref(), Some("web"));
    assert_eq!(
        rule(rs, 11).action,
        Action::Log(LogSpec {
            prefix: Some("new conn: ".into()),
            level: Some(6),
            ..Default::default()
        })
    );
    assert_eq!(rule(rs, 14).action, Action::Count);
    assert_eq!(
        rule(rs, 15).limit,
        Some(Limit {
            rate: 1,
            per: TimeUnit::Minute,
            burst: 3,
            flavor: LimitFlavor::Nft,
            over: false,
            object: None,
        })
    );
    assert_eq!(
        classify(rs, &pkt("tcp 192.0.2.9:1 > 10.0.0.1:22"), &Members).0,
        4
    );
    assert_eq!(
        classify(rs, &pkt("tcp 10.0.0.5:1 > 10.0.0.1:22"), &Members).0,
        5
    );
    assert_eq!(
        classify(rs, &pkt("tcp 10.0.0.6:1 > 10.0.0.1:443"), &Members).0,
        9
    );
    assert_eq!(
        classify(
            rs,
            &pkt("udp 10.0.0.6:1 > 10.0.0.1:51820 iif wg0"),
            &Members
        )
        .0,
        10
    );
    assert_eq!(
        classify(rs, &pkt("udp 203.0.113.5:1 > 10.0.0.1:9"), &Members),
        (16, Verdict::Drop)
    );
    assert_eq!(
        classify(rs, &pkt("tcp 1.1.1.1:1 > 10.0.0.1:25"), &Members).0,
        13
    );
    round_trips(rs, false);
    let e = render::iptables_save(rs).unwrap_err();
    assert!(e.to_string().contains("inet"), "{e}");
}

fn errors(name: &str) -> Vec<String> {
    let text = data(name);
    let fmt = if name.ends_with(".nft") {
        Format::Nft
    } else {
        Format::IptablesSave
    };
    match parse(&text, name, fmt) {
        Ok(_) => panic!("{name} parsed"),
        Err(errs) => errs.iter().map(|e| e.to_string()).collect(),
    }
}

/// Each expected error is `(position prefix, message substring)`, in order.
fn assert_errors(name: &str, want: &[(&str, &str)]) {
    let got = errors(name);
    assert_eq!(got.len(), want.len(), "{got:#?}");
    for (g, (pos, msg)) in got.iter().zip(want) {
        assert!(
            g.starts_with(&format!("{name}:{pos}: ")),
            "{g} does not start at {pos}"
        );
        assert!(g.contains(msg), "{g} does not say {msg}");
    }
}

#[test]
fn unsupported_constructs_are_errors_not_dropped() {
    assert_errors(
        "bad/nat.v4",
        &[
            (
                "7:13",
                "target 'CONNMARK' is not supported: it changes the connection's mark",
            ),
            ("8:20", "unknown match 'foo' (supported: tcp, udp"),
            (
                "9:30",
                "multiport --ports with other port options in one rule is not supported",
            ),
            ("10:39", "-m addrtype --limit-iface-in is not supported"),
        ],
    );
}

#[test]
fn syntax_errors_name_line_and_column() {
    assert_errors(
        "bad/syntax.v4",
        &[
            ("1:1", "table 'filter' has no COMMIT"),
            ("5:4", "expected a chain name after -A"),
            ("6:4", "chain 'NOPE' is not declared in table 'filter'"),
            ("7:13", "expected an IPv4 address, found '10.0.0.300'"),
            ("8:10", "option --dport needs -m tcp|udp|sctp|udplite"),
            ("9:20", "-m tcp needs -p tcp before it"),
            ("10:13", "jump to unknown chain or target 'missing'"),
            ("13:9", "chain loop: A -> B -> A"),
            ("14:31", "unterminated \"-quoted string"),
        ],
    );
    assert_errors(
        "bad/syntax.nft",
        &[
            ("4:13", "expected a port number 0-65535, found '70000'"),
            ("5:12", "prefix length 33 is longer than 32"),
            ("7:8", "jump to unknown chain 'nowhere'"),
            ("8:12", "expected a conntrack state"),
            // `table bridge x` (line 11) is the kernel's: no error.
        ],
    );
}

#[test]
fn nft_ip_and_ip6_tables_with_handles() {
    let p = load("multi.nft");
    let rs = &p.ruleset;
    assert_eq!(rs.tables.len(), 2);
    assert_eq!(rs.rule_count(), 7);
    // Every rule of an ip table is IPv4, of an ip6 table IPv6.
    for (t, fam) in rs.tables.iter().zip([4u128, 6]) {
        for r in t.chains.iter().flat_map(|c| &c.rules) {
            assert_eq!(
                r.matches.get(Field::Family).unwrap().ranges(),
                &[(fam, fam)]
            );
        }
    }
    assert_eq!(
        rule(rs, 1).counters,
        Counters {
            packets: 120,
            bytes: 9000
        }
    );
    assert_eq!(rs.tables[1].chains[0].base.as_ref().unwrap().priority, 10);
    // Two base chains hook input: choose one.
    assert!(rs.select_chain(None).is_ok(), "filter/INPUT exists");
    let id = rs.select_chain(Some("filter6/input6")).unwrap();
    let e = LinearEngine::new(rs, id).unwrap();
    let d = e
        .classify(&pkt("tcp [2001:db8::9]:1000 > [2001:db8::1]:22"), &NoSets)
        .unwrap();
    assert_eq!(d.rule_id, 7);
    assert_eq!(
        classify(rs, &pkt("tcp 198.51.100.3:1000 > 10.0.0.1:22"), &NoSets).0,
        2
    );
    round_trips(rs, false);
}

#[test]
fn full_router_dump_leaves_nat_mangle_raw_to_the_kernel() {
    let p = load("router.v4");
    let rs = &p.ruleset;
    // Only the filter table is enforced; its rules keep their positions in
    // the file (the 6 kernel-table rules before them are ids 1-6).
    assert_eq!(rs.tables.len(), 1);
    assert_eq!(rs.tables[0].name, "filter");
    assert_eq!(rs.rule_count(), 4);
    assert_eq!(rule(rs, 7).origin.line, 30);
    let left: Vec<_> = rs
        .left_to_kernel
        .iter()
        .map(|l| (l.table.as_str(), l.line, l.rule_count()))
        .collect();
    assert_eq!(left, [("raw", 2, 1), ("mangle", 7, 2), ("nat", 16, 3)]);
    assert_eq!(
        rs.left_to_kernel[2].describe(),
        "nat (PREROUTING 1 rule, INPUT 0 rules, OUTPUT 0 rules, POSTROUTING 1 rule, DOCKER 1 rule)"
    );
    // The host's NAT survives a listing: written back verbatim.
    let text = render::iptables_save(rs).unwrap();
    assert!(
        text.contains("*nat\n:PREROUTING ACCEPT [12:720]\n")
            && text.contains("-A POSTROUTING -s 192.168.1.0/24 -o eth0 -j MASQUERADE\n"),
        "{text}"
    );
    let again = parse(&text, "listed", Format::Auto).unwrap().ruleset;
    assert_eq!(without_origins(&again), without_origins(rs), "{text}");
    // nft cannot hold them, and says so instead of dropping them silently.
    let nft = render::nft(rs).unwrap();
    assert!(
        nft.starts_with("# left to the kernel's netfilter, not listed here: iptables table raw (PREROUTING 1 rule, OUTPUT 0 rules)\n"),
        "{nft}"
    );
    // The same in ip6tables-save: the family is kept.
    let v6 = data("router.v4")
        .replace("iptables-save v1", "ip6tables-save v1")
        .replace("192.168.1.0/24", "2001:db8:1::/64")
        .replace("172.17.0.2:80", "[2001:db8::2]:80");
    let p6 = parse(&v6, "router.v6", Format::Auto).unwrap();
    assert_eq!(p6.format, Format::Ip6tablesSave);
    assert_eq!(p6.ruleset.left_to_kernel[0].family, TableFamily::Ip6);
    let listed = render::iptables_save(&p6.ruleset).unwrap();
    let again = parse(&listed, "listed", Format::Auto).unwrap();
    assert_eq!(again.format, Format::Ip6tablesSave, "{listed}");
}

#[test]
fn kernel_tables_are_still_checked_for_structure() {
    assert_errors(
        "bad/kernel_tables.v4",
        &[
            (
                "3:14",
                "expected a policy ACCEPT, DROP or '-', found 'MASQ'",
            ),
            ("4:47", "unterminated \"-quoted string"),
            ("5:4", "chain 'NOPE' is not declared in table 'nat'"),
            // `-I` loads (as iptables-restore), into a chain the
            // refused header at line 3 did not declare.
            ("6:4", "chain 'POSTROUTING' is not declared in table 'nat'"),
            ("8:1", "table 'mangle' has no COMMIT"),
        ],
    );
}

/// Issue #13's round-trip bug: parapet's own ip6tables-save header must be
/// read back as IPv6, or a policy-DROP chain would accept IPv4 packets.
#[test]
fn listed_ip6tables_ruleset_is_read_back_as_ipv6() {
    let text = "*filter\n:INPUT DROP [0:0]\n-A INPUT -p tcp -m tcp --dport 22 -j ACCEPT\nCOMMIT\n";
    let rs = parse(text, "f", Format::Ip6tablesSave).unwrap().ruleset;
    let listed = render::iptables_save(&rs).unwrap();
    let again = parse(&listed, "listed", Format::Auto).unwrap();
    assert_eq!(again.format, Format::Ip6tablesSave, "{listed}");
    assert_eq!(without_origins(&again.ruleset), without_origins(&rs));
    let forced = parse(&listed, "listed", Format::IptablesSave).unwrap();
    assert_eq!(without_origins(&forced.ruleset), without_origins(&rs));
    assert_eq!(
        classify(&again.ruleset, &pkt("tcp 1.2.3.4:1 > 5.6.7.8:22"), &NoSets),
        (0, Verdict::Drop)
    );
}
