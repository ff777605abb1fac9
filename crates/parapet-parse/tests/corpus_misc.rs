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

const ICMP_CODES: [(&str, u8); 8] = [
    ("net-unreachable", 0),
    ("host-unreachable", 1),
    ("prot-unreachable", 2),
    ("port-unreachable", 3),
    ("frag-needed", 4),
    ("net-prohibited", 9),
    ("host-prohibited", 10),
    ("admin-prohibited", 13),
];

const ICMP6_CODES: [(&str, u8); 6] = [
    ("no-route", 0),
    ("admin-prohibited", 1),
    ("addr-unreachable", 3),
    ("port-unreachable", 4),
    ("policy-fail", 5),
    ("reject-route", 6),
];

/// nft itself maps every code name to the number parapet does: loaded
/// with `nft -f`, listed with `nft -n` (numbers), in a namespace.
#[test]
#[ignore = "needs root"]
fn nft_icmp_code_names_are_nfts_numbers() {
    parapet_testbed::require_root();
    let mut text = String::from("table ip t {\n\tchain c {\n");
    for (name, _) in ICMP_CODES {
        text.push_str(&format!("\t\ticmp code {name} accept\n"));
    }
    text.push_str("\t}\n}\ntable ip6 u {\n\tchain c {\n");
    for (name, _) in ICMP6_CODES {
        text.push_str(&format!("\t\ticmpv6 code {name} accept\n"));
    }
    text.push_str("\t}\n}\n");
    let ns = parapet_testbed::Netns::create("icmpcode").unwrap();
    let file = std::env::temp_dir().join(format!("parapet-icmpcode-{}.nft", std::process::id()));
    std::fs::write(&file, &text).unwrap();
    let loaded = ns.exec(&["nft", "-f", file.to_str().unwrap()]);
    let _ = std::fs::remove_file(&file);
    loaded.unwrap();
    let listed = ns.exec(&["nft", "-n", "list", "ruleset"]).unwrap();
    let kernel: Vec<String> = listed
        .lines()
        .map(str::trim)
        .filter(|l| l.contains(" code "))
        .map(str::to_string)
        .collect();
    let ours: Vec<String> = ICMP_CODES
        .iter()
        .map(|(_, c)| format!("icmp code {c} accept"))
        .chain(
            ICMP6_CODES
                .iter()
                .map(|(_, c)| format!("icmpv6 code {c} accept")),
        )
        .collect();
    assert_eq!(kernel, ours, "{listed}");
    // And parapet reads the names as those numbers.
    let rs = nft(&text).unwrap();
    let codes: Vec<u8> = rs
        .rules()
        .map(|r| {
            let set = r.matches.get(Field::IcmpTypeCode).unwrap();
            (set.ranges()[0].0 & 0xff) as u8
        })
        .collect();
    let want: Vec<u8> = ICMP_CODES
        .iter()
        .chain(ICMP6_CODES.iter())
        .map(|(_, c)| *c)
        .collect();
    assert_eq!(codes, want);
}

#[test]
fn nft_icmp_code_names_are_the_codes_nft_describe_prints() {
    // `nft describe icmp_code` / `icmpv6_code`.
    let v4 = ICMP_CODES;
    for (name, code) in v4 {
        let rs = nft(&nft_input(
            "ip",
            &format!("\t\ticmp type 3 icmp code {name} drop"),
        ))
        .unwrap();
        assert_eq!(decide(&rs, &icmp(false, 3, code)), 1, "{name}");
        assert_eq!(decide(&rs, &icmp(false, 3, code ^ 1)), 0, "{name}");
    }
    let v6 = ICMP6_CODES;
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

/// fw4's shape: a filter chain, and chains at prerouting and input whose
/// rules only set the DSCP field.
const MANGLE: &str = "table inet fw4 {
	chain input {
		type filter hook input priority filter; policy drop;
		tcp dport 22 accept
	}
	chain mangle_prerouting {
		type filter hook prerouting priority mangle; policy accept;
		meta nfproto ipv4 meta l4proto tcp iifname \"eth0\" counter ip dscp set 0x1 comment \"m\"
		meta nfproto ipv6 meta l4proto udp counter ip6 dscp set cs1
	}
	chain mangle_input {
		type filter hook input priority mangle; policy accept;
		counter ip dscp set 0x2
	}
}
";

#[test]
fn chains_that_only_mangle_are_left_to_the_kernel() {
    let rs = nft(MANGLE).unwrap();
    let chains: Vec<&str> = rs.tables[0]
        .chains
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(chains, ["input"]);
    let left: Vec<String> = LeftToKernel::summary(&rs.left_to_kernel);
    assert!(
        left.contains(&"inet fw4 (mangle_prerouting 2 rules)".to_string())
            && left.contains(&"inet fw4 (mangle_input 1 rule)".to_string()),
        "{left:?}"
    );
    // The filter rule keeps its id; the kernel's rules keep theirs.
    assert_eq!(rs.rules().next().unwrap().id, 1);
    let mut p = Packet::v4(0x0a00_0001, 0x0a00_0002, 6, 40000, 22);
    assert_eq!(decide(&rs, &p), 1);
    p.dport = 23;
    assert_eq!(decide(&rs, &p), 0);
    // The listing writes the chains back, and reads back the same.
    let text = render::nft(&rs).unwrap();
    assert!(text.contains("ip dscp set 0x1"), "{text}");
    let again = nft(&text).unwrap();
    assert_eq!(again.tables[0].chains.len(), 1);
    assert_eq!(again.left_to_kernel.len(), rs.left_to_kernel.len());
}

#[test]
fn a_chain_that_mangles_and_filters_stays_refused() {
    for rule in [
        "ip dscp set 0x1 accept",
        "ip dscp set 0x1\n\t\ttcp dport 22 drop",
        "ip dscp set 0x1\n\t\tjump other",
    ] {
        let text = format!(
            "table ip t {{\n\tchain other {{\n\t}}\n\tchain pre {{\n\t\ttype filter hook prerouting priority mangle; policy accept;\n\t\t{rule}\n\t}}\n}}\n"
        );
        let e = nft(&text).unwrap_err();
        assert!(e.contains("a payload or meta statement"), "{rule}: {e}");
    }
    // A policy that drops filters too.
    let e = nft("table ip t {\n\tchain pre {\n\t\ttype filter hook prerouting priority mangle; policy drop;\n\t\tip dscp set 1\n\t}\n}\n").unwrap_err();
    assert!(e.contains("a payload or meta statement"), "{e}");
}

#[test]
fn a_rule_matching_a_field_the_kernel_mangles_is_refused() {
    // nft: a filter rule on the DSCP that a chain left to the kernel sets.
    let text = MANGLE.replace(
        "tcp dport 22 accept",
        "tcp dport 22 accept\n\t\tip dscp 1 drop",
    );
    let e = nft(&text).unwrap_err();
    assert!(
        e.starts_with("n.nft:5:1: this rule matches dscp, which 'ip dscp set' in chain 'mangle_prerouting' of table inet fw4 (left to the kernel) changes"),
        "{e}"
    );
    // iptables: `-j DSCP` in *mangle, `-m dscp` in *filter.
    let ipt = "*mangle
:PREROUTING ACCEPT [0:0]
-A PREROUTING -p tcp -j DSCP --set-dscp 10
COMMIT
*filter
:INPUT ACCEPT [0:0]
-A INPUT -p tcp --dport 22 -j ACCEPT
-A INPUT -m dscp --dscp 10 -j DROP
COMMIT
";
    let e = parse(ipt, "r.v4", Format::IptablesSave).unwrap_err()[0].to_string();
    assert!(
        e.starts_with("r.v4:8:1: this rule matches dscp, which '-j DSCP' in table 'mangle' (left to the kernel) changes"),
        "{e}"
    );
    // Without the dscp match both load.
    assert!(parse(
        &ipt.replace("-A INPUT -m dscp --dscp 10 -j DROP\n", ""),
        "r.v4",
        Format::IptablesSave
    )
    .is_ok());
    assert!(nft(MANGLE).is_ok());
}

#[test]
fn deleting_a_missing_table_is_refused_as_nft_refuses_it() {
    // `nft -f` on a fresh host: "Error: No such file or directory; did you
    // mean table 'filter' in family ip?" (nftables' sets_and_maps example).
    let e = nft("delete table filter\ntable filter {\n}\n").unwrap_err();
    assert!(
        e.starts_with(
            "n.nft:1:8: cannot delete table 'filter': no such table (nft -f fails here too"
        ),
        "{e}"
    );
    assert!(e.contains("'table ip filter' before the 'delete'"), "{e}");
    // Both spellings the message offers load.
    assert!(nft("table ip filter\ndelete table ip filter\ntable filter {\n}\n").is_ok());
    assert!(nft("destroy table ip filter\ntable filter {\n}\n").is_ok());
}

#[test]
fn refusals_that_stay_say_why() {
    // `queue` hands the packet to a program whose verdict parapet cannot know.
    let e = nft(&nft_input("inet", "\t\ttcp dport 80 queue num 3")).unwrap_err();
    assert!(
        e.contains("'queue' is not supported: it hands the packet to a user-space program"),
        "{e}"
    );
    // An option no loaded match has (iptables' parser tests use one on purpose).
    let ipt = "*filter\n:FORWARD ACCEPT [0:0]\n-A FORWARD -p udp -m multiport --ports 8080:8081,8082 --something-else -j ACCEPT\nCOMMIT\n";
    let e = parse(ipt, "r.v4", Format::IptablesSave).unwrap_err()[0].to_string();
    assert!(
        e.starts_with("r.v4:3:55: unknown option '--something-else' (options: "),
        "{e}"
    );
}

fn ipt_rule(opts: &str) -> Result<Rule, String> {
    let text = format!("*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -p tcp {opts} -j DROP\nCOMMIT\n");
    parse(&text, "r.v4", Format::IptablesSave)
        .map(|p| p.ruleset.rules().next().unwrap().clone())
        .map_err(|e| e[0].to_string())
}

#[test]
fn iptables_time_options_become_the_window() {
    let r = ipt_rule("-m time --timestart 22:00 --timestop 02:30:15 --weekdays Sat,7 ! --monthdays 1,2 --datestart 2024-01-01 --datestop 2024-12-31T23:59:59 --kerneltz --contiguous").unwrap();
    let w = r.time.clone().unwrap();
    assert_eq!(
        (w.daytime_start, w.daytime_stop),
        (22 * 3600, 2 * 3600 + 30 * 60 + 15)
    );
    assert_eq!(w.weekdays, 1 << 6 | 1 << 7);
    assert_eq!(w.monthdays, ALL_MONTHDAYS & !(1 << 1 | 1 << 2));
    assert_eq!(w.date_start, parse_date("2024-01-01").unwrap());
    assert_eq!(w.date_stop, parse_date("2025-01-01").unwrap() - 1);
    assert!(w.kernel_tz && w.contiguous);
    assert!(r.is_stateful(), "a time window makes the rule conditional");
    // iptables-save's spelling reads back to the same rule.
    let rs = parse(
        "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -p tcp -m time --timestart 22:00 --timestop 02:30:15 --weekdays Sat,7 ! --monthdays 1,2 --datestart 2024-01-01 --kerneltz --contiguous -j DROP\nCOMMIT\n",
        "r.v4",
        Format::IptablesSave,
    )
    .unwrap()
    .ruleset;
    let text = render::iptables_save(&rs).unwrap();
    assert!(
        text.contains("-m time --timestart 22:00:00 --timestop 02:30:15 --monthdays 3,4,"),
        "{text}"
    );
    let again = parse(&text, "again.v4", Format::IptablesSave)
        .unwrap()
        .ruleset;
    assert_eq!(
        again.rules().next().unwrap().time,
        rs.rules().next().unwrap().time
    );
    // What iptables refuses, parapet refuses.
    for (opts, msg) in [
        (
            "-m time --days Mon",
            "--days is the option of the old ipt_time match (patch-o-matic, before iptables 1.4.0 / Linux 2.6.23); iptables refuses it today (unknown option \"--days\"), as parapet does: write --weekdays",
        ),
        (
            "-m time --timestart 01:00 --timestop 02:00 --contiguous",
            "--contiguous only makes sense",
        ),
        (
            "-m time ! --timestart 01:00",
            "'!' cannot negate --timestart",
        ),
        (
            "-m time --timestart 25:00",
            "expected a time of day hh:mm[:ss]",
        ),
        (
            "-m time --weekdays Funday",
            "expected weekdays like Mon,Tue",
        ),
        (
            "-m time --datestart 2024-02-30",
            "expected a date YYYY[-MM[-DD",
        ),
        ("--timestart 01:00", "needs -m time"),
    ] {
        let e = ipt_rule(opts).unwrap_err();
        assert!(e.contains(msg), "{opts}: {e}");
    }
}

#[test]
fn nft_time_keys_become_the_window() {
    let rs = nft(&nft_input(
        "inet",
        "\t\tmeta time \"2022-05-30 21:51:23\"-\"2022-06-01 23:51:23\" accept\n\t\tmeta hour >= \"21:00\" meta day { \"Monday\", \"Sun\" } accept\n\t\tmeta time < \"2022-01-01 00:00:00\" accept\n\t\tmeta day 6 accept",
    ))
    .unwrap();
    let w: Vec<TimeWindow> = rs.rules().map(|r| r.time.clone().unwrap()).collect();
    assert_eq!(
        (w[0].date_start, w[0].date_stop),
        (
            parse_date("2022-05-30 21:51:23").unwrap(),
            parse_date("2022-06-01 23:51:23").unwrap()
        )
    );
    assert_eq!(
        (w[1].daytime_start, w[1].daytime_stop, w[1].weekdays),
        (21 * 3600, 86_399, 1 << 1 | 1 << 7)
    );
    assert_eq!(
        (w[2].date_start, w[2].date_stop),
        (0, parse_date("2022-01-01").unwrap() - 1)
    );
    assert_eq!(w[3].weekdays, 1 << 6, "nft's day 6 is Saturday");
    // The nft listing reads back to the same windows.
    let text = render::nft(&rs).unwrap();
    let again = nft(&text).unwrap();
    let back: Vec<TimeWindow> = again.rules().map(|r| r.time.clone().unwrap()).collect();
    assert_eq!(back, w, "{text}");
    for (rule, msg) in [
        (
            "meta hour \"23:00\"-\"01:00\" accept",
            "ends before it starts",
        ),
        (
            "meta hour != \"10:00\" accept",
            "'meta hour !=' is not supported",
        ),
        (
            "meta hour >= \"10:00\" meta hour <= \"11:00\" accept",
            "two 'meta hour' windows",
        ),
        ("meta day \"Funday\" accept", "expected a day"),
        ("meta time >= \"yesterday\" accept", "expected a date"),
    ] {
        let e = nft(&nft_input("inet", &format!("\t\t{rule}"))).unwrap_err();
        assert!(e.contains(msg), "{rule}: {e}");
    }
}

#[test]
fn a_time_window_decides_by_the_wall_clock() {
    // 2024-03-10 was a Sunday.
    let sunday_noon = parse_date("2024-03-10T12:00:00").unwrap();
    let rs = parse(
        "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -p tcp -m time --weekdays Sun --timestart 11:00 --timestop 13:00 -j DROP\n-A INPUT -p tcp -j REJECT\nCOMMIT\n",
        "r.v4",
        Format::IptablesSave,
    )
    .unwrap()
    .ruleset;
    let e = LinearEngine::new(&rs, rs.select_chain(None).unwrap()).unwrap();
    let pkt = Packet::v4(1, 2, 6, 1000, 22);
    let at = |secs: i64| {
        let mut s = StatefulState::new(Clock { ns: 0, hz: 250 });
        s.wall_start_secs = secs;
        e.classify_with(&pkt, &NoSets, &mut s).unwrap().rule_id
    };
    assert_eq!(at(sunday_noon), 1);
    assert_eq!(
        at(sunday_noon + 2 * 3600),
        2,
        "closed: the next rule decides"
    );
    assert_eq!(at(sunday_noon + 86_400), 2, "Monday");
    // Offline assumptions.
    assert_eq!(
        e.classify_with(&pkt, &NoSets, &mut Assume(true))
            .unwrap()
            .rule_id,
        1
    );
    assert_eq!(
        e.classify_with(&pkt, &NoSets, &mut Assume(false))
            .unwrap()
            .rule_id,
        2
    );
}

/// `-I` in a restore file (OpenWrt/firemanxbr-style scripts).
const INSERTS: &str = "*filter
:INPUT DROP [0:0]
:sub - [0:0]
-A INPUT -p tcp -m tcp --dport 22 -m comment --comment a -j ACCEPT
-A INPUT -p udp -m multiport --ports 53,853 -m comment --comment b -j ACCEPT
-A INPUT -m comment --comment c -j sub
-I INPUT -p tcp -m tcp --dport 22 -m comment --comment d -j DROP
-I INPUT 3 -p udp -m comment --comment e -j sub
-I INPUT 6 -m comment --comment f -j ACCEPT
-A sub -p udp -m udp --dport 9 -m comment --comment g -j DROP
COMMIT
*nat
:PREROUTING ACCEPT [0:0]
-I PREROUTING -p tcp -j REDIRECT --to-ports 8080
COMMIT
";

fn comments(rs: &Ruleset, chain: &str) -> Vec<String> {
    let c = rs.tables[0]
        .chains
        .iter()
        .find(|c| c.name == chain)
        .unwrap();
    let mut out: Vec<String> = Vec::new();
    for r in &c.rules {
        let text = format!("{}{}", r.comment.clone().unwrap_or_default(), r.id);
        if out.last() != Some(&text) {
            out.push(text);
        }
    }
    out
}

#[test]
fn iptables_insert_puts_the_rule_where_restore_does_with_its_file_id() {
    let rs = parse(INSERTS, "i.v4", Format::IptablesSave)
        .unwrap()
        .ruleset;
    // Chain order as iptables-restore builds it; ids are file positions.
    assert_eq!(comments(&rs, "INPUT"), ["d4", "a1", "e5", "b2", "c3", "f6"]);
    let engine = LinearEngine::new(&rs, rs.select_chain(None).unwrap()).unwrap();
    let decide = |p: &Packet| engine.classify(p, &NoSets).unwrap();
    assert_eq!(decide(&Packet::v4(1, 2, 6, 1000, 22)).rule_id, 4);
    // udp to 9: e jumps to sub, where g drops.
    let d = decide(&Packet::v4(1, 2, 17, 1000, 9));
    assert_eq!((d.rule_id, d.verdict), (7, Verdict::Drop));
    assert_eq!(decide(&Packet::v4(1, 2, 6, 1000, 80)).rule_id, 6);
    // One rule in the chain: -I 1 and 2 are fine, 0 and 3 are not.
    for (n, want) in [
        ("0", Some("i.v4:4:10: -I: rule numbers start at 1")),
        (
            "3",
            Some("i.v4:4:10: -I: index of insertion too big (chain 'INPUT' has 1 rules"),
        ),
        ("2", None),
        ("1", None),
    ] {
        let text = format!(
            "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -j DROP\n-I INPUT {n} -j ACCEPT\nCOMMIT\n"
        );
        match (parse(&text, "i.v4", Format::IptablesSave), want) {
            (Err(e), Some(want)) => assert!(e[0].to_string().starts_with(want), "-I {n}: {}", e[0]),
            (Ok(p), None) => {
                let ids: Vec<u32> = p.ruleset.rules().map(|r| r.id).collect();
                assert_eq!(ids, if n == "1" { [2, 1] } else { [1, 2] }, "-I {n}");
            }
            (got, _) => panic!("-I {n}: {:?}", got.map(|_| ())),
        }
    }
}

#[test]
#[ignore = "needs root"]
fn iptables_insert_order_is_iptables_restores() {
    parapet_testbed::require_root();
    let ns = parapet_testbed::Netns::create("insert").unwrap();
    let file = std::env::temp_dir().join(format!("parapet-insert-{}.v4", std::process::id()));
    std::fs::write(&file, INSERTS).unwrap();
    let loaded = ns.exec(&["iptables-legacy-restore", file.to_str().unwrap()]);
    let _ = std::fs::remove_file(&file);
    loaded.unwrap();
    let saved = ns.exec(&["iptables-legacy-save", "-t", "filter"]).unwrap();
    // The kernel's order of the comments, rule by rule.
    let kernel: Vec<String> = saved
        .lines()
        .filter(|l| l.starts_with("-A INPUT"))
        .filter_map(|l| l.split("--comment ").nth(1))
        .map(|c| c.split_whitespace().next().unwrap().to_string())
        .collect();
    let rs = parse(INSERTS, "i.v4", Format::IptablesSave)
        .unwrap()
        .ruleset;
    let ours: Vec<String> = comments(&rs, "INPUT")
        .iter()
        .map(|c| c.trim_end_matches(char::is_numeric).to_string())
        .collect();
    assert_eq!(ours, kernel, "{saved}");
}
