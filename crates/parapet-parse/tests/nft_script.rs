//! nft files as `nft -f` reads them: includes, variables, commands applied
//! in order, family-less and bodiless tables, line continuations, `flags
//! dormant`, and verdict maps lowered into ordinary rules (checked on
//! packets with the linear engine). Also the constructs added for real
//! hosts' files: `th` ports, `meta protocol`, anonymous concatenated sets
//! and verdict maps on concatenations, and the parts parapet leaves to the
//! kernel (other families' tables, table objects, conntrack/mark/offload
//! statements, unreached NAT chains): noted, written back by `list`, never
//! enforced.

use parapet_model::*;
use parapet_parse::*;
use std::path::PathBuf;

fn ok(text: &str) -> Ruleset {
    parse(text, "n.nft", Format::Nft)
        .unwrap_or_else(|e| panic!("{}", e[0]))
        .ruleset
}

fn err(text: &str) -> String {
    parse(text, "n.nft", Format::Nft).unwrap_err()[0].to_string()
}

/// (rule id, verdict) for a packet at the ruleset's input base chain.
fn decide(rs: &Ruleset, pkt: &Packet) -> (u32, Verdict) {
    let e = LinearEngine::new(rs, rs.select_chain(None).unwrap()).unwrap();
    let d = e.classify(pkt, &NoSets).unwrap();
    (d.rule_id, d.verdict)
}

fn tcp(dport: u16, ct: CtState) -> Packet {
    let mut p = Packet::v4(0x0a00_0001, 0x0a00_0002, 6, 40000, dport);
    p.ct_state = ct;
    p
}

const BASE: &str = "type filter hook input priority filter; policy drop;";

#[test]
fn table_without_family_is_ip() {
    let rs = ok(&format!(
        "table filter {{\n\tchain input {{\n\t\t{BASE}\n\t\ttcp dport 22 accept\n\t}}\n}}\n"
    ));
    assert_eq!(rs.tables[0].family, TableFamily::Ip);
    assert_eq!(rs.tables[0].name, "filter");
    assert_eq!(decide(&rs, &tcp(22, CtState::New)), (1, Verdict::Accept));
}

#[test]
fn commands_apply_in_file_order() {
    // fw4's shape: a bodiless declaration, a flush, then the body; rules
    // added and inserted by commands afterwards.
    let text = format!(
        "table inet fw4\nflush table inet fw4\ntable inet fw4 {{\n\tchain input {{\n\t\t{BASE}\n\t\ttcp dport 80 accept\n\t}}\n}}\nadd rule inet fw4 input tcp dport 22 accept\ninsert rule inet fw4 input tcp dport 22 drop\n"
    );
    let rs = ok(&text);
    let rules = &rs.tables[0].chains[0].rules;
    assert_eq!(rules.len(), 3);
    // Ids follow file order; `insert` puts the rule first.
    assert_eq!(rules.iter().map(|r| r.id).collect::<Vec<_>>(), [3, 1, 2]);
    assert_eq!(decide(&rs, &tcp(22, CtState::New)), (3, Verdict::Drop));

    // `flush table` empties the chains written before it.
    let rs = ok(&format!(
        "table inet t {{\n\tchain input {{\n\t\t{BASE}\n\t\ttcp dport 22 accept\n\t}}\n}}\nflush table inet t\n"
    ));
    assert_eq!(rs.rule_count(), 0);
    // `flush ruleset` forgets everything before it; `delete table` one table.
    let rs = ok(&format!(
        "table ip a {{\n\tchain c {{\n\t}}\n}}\nflush ruleset\ntable ip b\ntable ip c\ndelete table ip b\nadd chain ip c input {{ {BASE} }}\nadd rule ip c input accept\n"
    ));
    assert_eq!(
        rs.tables
            .iter()
            .map(|t| t.name.as_str())
            .collect::<Vec<_>>(),
        ["c"]
    );
    assert_eq!(decide(&rs, &tcp(1, CtState::New)), (1, Verdict::Accept));

    assert_eq!(
        err("table ip t\nadd rule ip t nope accept\n"),
        "n.nft:2:15: no chain 'nope' in table 't'"
    );
    assert!(err("delete table ip gone\n").starts_with(
        "n.nft:1:8: cannot delete table 'gone': no such table (nft -f fails here too"
    ));
    assert!(err("table ip t\nadd rule ip t c position 3 accept\n").contains("no chain 'c'"));
    assert!(
        err("table ip t { chain c { } }\nadd rule ip t c position 3 accept\n")
            .contains("'add rule … position N' is not supported")
    );
    // A chain written twice gets the rules of both bodies.
    let rs = ok(&format!(
        "table ip t {{\n\tchain input {{\n\t\t{BASE}\n\t\ttcp dport 1 accept\n\t}}\n}}\ntable ip t {{\n\tchain input {{\n\t\ttcp dport 2 accept\n\t}}\n}}\n"
    ));
    assert_eq!(rs.rule_count(), 2);
}

#[test]
fn defines_and_variables() {
    let text = format!(
        "define ssh = 22\ndefine web = {{ 80, 443 }}\ndefine ports = {{ $ssh, $web }}\ndefine lan = 10.0.0.0/8\ntable inet t {{\n\tchain input {{\n\t\t{BASE}\n\t\tip saddr $lan tcp dport {{ $ports, 8080 }} accept\n\t}}\n}}\n"
    );
    let rs = ok(&text);
    for (port, want) in [(22, 1), (443, 1), (8080, 1), (81, 0)] {
        assert_eq!(decide(&rs, &tcp(port, CtState::New)).0, want, "port {port}");
    }
    let mut outside = tcp(22, CtState::New);
    outside.src = 0x0b00_0001;
    assert_eq!(decide(&rs, &outside).0, 0);
    // A set variable used as the whole value keeps its braces.
    let rs = ok(&format!(
        "define web = {{ 80, 443 }}\ntable ip t {{\n\tchain input {{\n\t\t{BASE}\n\t\ttcp dport $web accept\n\t}}\n}}\n"
    ));
    assert_eq!(decide(&rs, &tcp(443, CtState::New)).0, 1);
    assert_eq!(
        err("table ip t {\n\tchain c {\n\t\ttcp dport $nope accept\n\t}\n}\n"),
        "n.nft:3:13: undefined variable '$nope' (no 'define nope = …' before it)"
    );
    // Line continuations join a statement's lines.
    let rs = ok(&format!(
        "table ip t {{\n\tchain input {{\n\t\t{BASE}\n\t\ttcp dport \\\n\t\t\t22 accept\n\t}}\n}}\n"
    ));
    assert_eq!(decide(&rs, &tcp(22, CtState::New)).0, 1);
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("parapet-nft-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(d.join("rules.d")).unwrap();
    d
}

#[test]
fn includes() {
    let d = temp_dir("inc");
    std::fs::write(d.join("defs.nft"), "define ssh = 22\n").unwrap();
    std::fs::write(
        d.join("rules.d/10-ssh.nft"),
        "add rule inet t input tcp dport $ssh accept\n",
    )
    .unwrap();
    std::fs::write(
        d.join("rules.d/20-web.nft"),
        "add rule inet t input tcp dport 80 accept\n",
    )
    .unwrap();
    let main = d.join("main.nft");
    let text = format!(
        "include \"defs.nft\"\ntable inet t {{\n\tchain input {{\n\t\t{BASE}\n\t}}\n}}\ninclude \"rules.d/*.nft\"\ninclude \"none.d/*.nft\"\n"
    );
    std::fs::write(&main, &text).unwrap();
    let path = main.to_str().unwrap();
    let rs = parse(&text, path, Format::Nft).unwrap().ruleset;
    assert_eq!(rs.rule_count(), 2);
    assert_eq!(decide(&rs, &tcp(22, CtState::New)), (1, Verdict::Accept));
    assert_eq!(decide(&rs, &tcp(80, CtState::New)), (2, Verdict::Accept));

    // An error inside an included file names that file and line.
    std::fs::write(
        d.join("rules.d/30-bad.nft"),
        "\nadd rule inet t input tcp dport x accept\n",
    )
    .unwrap();
    let e = parse(&text, path, Format::Nft).unwrap_err();
    let bad = d.join("rules.d/30-bad.nft");
    assert!(
        e[0].to_string()
            .starts_with(&format!("{}:2:33:", bad.display())),
        "{}",
        e[0]
    );
    std::fs::remove_file(&bad).unwrap();

    // A missing file and a cycle point at the including line.
    let e = parse("\n  include \"missing.nft\"\n", path, Format::Nft).unwrap_err();
    assert!(
        e[0].to_string()
            .starts_with(&format!("{path}:2:3: included file")),
        "{}",
        e[0]
    );
    std::fs::write(d.join("a.nft"), "include \"b.nft\"\n").unwrap();
    std::fs::write(d.join("b.nft"), "include \"a.nft\"\n").unwrap();
    let a = d.join("a.nft");
    let e = parse("include \"b.nft\"\n", a.to_str().unwrap(), Format::Nft).unwrap_err();
    assert!(
        e[0].to_string()
            .starts_with(&format!("{}:1:1: include '", d.join("b.nft").display()))
            && e[0]
                .to_string()
                .ends_with("includes itself (an include cycle)"),
        "{}",
        e[0]
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn dormant_table_is_not_enforced() {
    let text = format!(
        "table ip off {{\n\tflags dormant\n\tchain input {{\n\t\t{BASE}\n\t}}\n}}\ntable ip on {{\n\tchain input {{\n\t\ttype filter hook input priority 0; policy accept;\n\t}}\n}}\n"
    );
    let rs = ok(&text);
    assert_eq!(
        rs.tables
            .iter()
            .map(|t| t.name.as_str())
            .collect::<Vec<_>>(),
        ["on"]
    );
}

#[test]
fn anonymous_verdict_map() {
    let text = format!(
        "table inet t {{\n\tchain input {{\n\t\t{BASE}\n\t\tct state vmap {{ established : accept, related : accept, invalid : drop }}\n\t\ttcp dport 22 accept\n\t}}\n}}\n"
    );
    let rs = ok(&text);
    // One rule per element, all with the vmap rule's id, then the next rule.
    let ids: Vec<u32> = rs.rules().map(|r| r.id).collect();
    assert_eq!(ids, [1, 1, 1, 2]);
    assert_eq!(
        decide(&rs, &tcp(80, CtState::Established)),
        (1, Verdict::Accept)
    );
    assert_eq!(decide(&rs, &tcp(22, CtState::Invalid)), (1, Verdict::Drop));
    // No default: a key in no element goes on with the next rule.
    assert_eq!(decide(&rs, &tcp(22, CtState::New)), (2, Verdict::Accept));
    assert_eq!(decide(&rs, &tcp(80, CtState::New)), (0, Verdict::Drop));

    assert!(err(&format!(
        "table ip t {{\n\tchain c {{\n\t\t{BASE}\n\t\ttcp dport vmap {{ 20-30 : accept, 22 : drop }}\n\t}}\n}}\n"
    ))
    .contains("verdict map element '22' overlaps an earlier one"));
    assert!(err(&format!(
        "table ip t {{\n\tchain c {{\n\t\t{BASE}\n\t\ttcp dport vmap {{ 22 : queue }}\n\t}}\n}}\n"
    ))
    .contains("expected a verdict (accept, drop, return, continue, jump CHAIN, goto CHAIN), found 'queue'"));
}

#[test]
fn named_verdict_map_with_jumps() {
    let text = format!(
        "table ip t {{\n\tmap ports {{\n\t\ttype inet_service : verdict\n\t\telements = {{ 22 : jump ssh,\n\t\t\t80 : continue, 443 : goto web }}\n\t}}\n\tchain ssh {{\n\t\tip saddr 10.0.0.0/8 accept\n\t}}\n\tchain web {{\n\t\taccept\n\t}}\n\tchain input {{\n\t\t{BASE}\n\t\tip saddr 10.0.0.1 tcp dport vmap @ports\n\t\ttcp dport 80 accept\n\t}}\n}}\n"
    );
    let rs = ok(&text);
    // The map's rules also need the rule's own condition (ip saddr 10.0.0.1).
    assert_eq!(decide(&rs, &tcp(22, CtState::New)), (1, Verdict::Accept));
    assert_eq!(decide(&rs, &tcp(443, CtState::New)), (2, Verdict::Accept));
    assert_eq!(decide(&rs, &tcp(80, CtState::New)), (4, Verdict::Accept));
    let mut other = tcp(443, CtState::New);
    other.src = 0x0a00_0009;
    assert_eq!(decide(&rs, &other), (0, Verdict::Drop));

    assert!(err(&format!(
        "table ip t {{\n\tchain c {{\n\t\t{BASE}\n\t\ttcp dport vmap @nope\n\t}}\n}}\n"
    ))
    .contains("no map 'nope' in this table"));
    assert!(err(&format!(
        "table ip t {{\n\tmap m {{\n\t\ttype ipv4_addr : ipv4_addr\n\t}}\n\tchain c {{\n\t\t{BASE}\n\t\tip saddr vmap @m\n\t}}\n}}\n"
    ))
    .contains("map 'm' is not a verdict map"));
    // Jump targets in a map are checked like any jump.
    assert!(err(&format!(
        "table ip t {{\n\tchain c {{\n\t\t{BASE}\n\t\ttcp dport vmap {{ 22 : jump nowhere }}\n\t}}\n}}\n"
    ))
    .contains("jump to unknown chain 'nowhere'"));
}

#[test]
fn trace_steps_tell_vmap_elements_apart() {
    let rs = ok(&format!(
        "table ip t {{\n\tchain input {{\n\t\t{BASE}\n\t\ttcp dport vmap {{ 22 : accept, 23 : drop }}\n\t}}\n}}\n"
    ));
    let e = LinearEngine::new(&rs, rs.select_chain(None).unwrap()).unwrap();
    let (d, steps) = e.trace(&tcp(23, CtState::New), &NoSets).unwrap();
    assert_eq!((d.rule_id, d.verdict), (1, Verdict::Drop));
    // Both steps are rule 1; `at` says which element each was.
    assert_eq!(
        steps.iter().map(|s| (s.rule_id, s.at)).collect::<Vec<_>>(),
        [(1, (0, 0, 0)), (1, (0, 0, 1))]
    );
    assert_eq!(steps[1].failed_on, None);
}

#[test]
fn include_depth_is_bounded() {
    let d = temp_dir("depth");
    for i in 0..20 {
        std::fs::write(
            d.join(format!("{i}.nft")),
            format!("include \"{}.nft\"\n", i + 1),
        )
        .unwrap();
    }
    std::fs::write(d.join("20.nft"), "table ip t\n").unwrap();
    let first = d.join("0.nft");
    let text = std::fs::read_to_string(&first).unwrap();
    let e = parse(&text, first.to_str().unwrap(), Format::Nft).unwrap_err();
    assert!(
        e[0].message.contains("includes nested more than 16 deep"),
        "{}",
        e[0]
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn scripts_of_commands_are_detected_as_nft() {
    assert_eq!(
        detect("add table inet t\nadd chain inet t c\n"),
        Format::Nft
    );
    assert_eq!(detect("insert rule ip t c accept\n"), Format::Nft);
    assert_eq!(detect("delete table ip t\n"), Format::Nft);
    // ipset's `add SET ENTRY` stays ipset.
    assert_eq!(detect("add blocklist 192.0.2.1\n"), Format::Ipset);
}

#[test]
fn add_set_and_add_element_build_the_set_block() {
    let text = "add table inet t\nadd set inet t allow { type ipv4_addr; flags interval; }\nadd element inet t allow { 10.0.0.0/8 }\nadd element inet t allow { 192.168.1.1 }\n";
    let p = parse(text, "n.nft", Format::Nft).unwrap();
    assert_eq!(p.set_blocks.len(), 1);
    let b = &p.set_blocks[0];
    assert_eq!((b.table.as_str(), b.name.as_str()), ("t", "allow"));
    assert!(
        b.text.starts_with("set allow { type ipv4_addr;"),
        "{}",
        b.text
    );
    assert!(b.text.contains("elements = { 10.0.0.0/8 }"), "{}", b.text);
    assert!(b.text.contains("elements = { 192.168.1.1 }"), "{}", b.text);
    assert_eq!(
        err("add table inet t\nadd element inet t nope { 1.2.3.4 }\n"),
        "n.nft:2:20: no set 'nope' in table 't'"
    );
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
\t\tmeta mark set ct mark accept
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
        "meta mark set ct mark accept",
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
fn quota_objects_are_read_and_rules_using_them_refused() {
    ok("table inet t {\n\tquota q {\n\t\tover 10 mbytes\n\t}\n}\n");
    let e = err("table inet t {\n\tquota q {\n\t\tover 10 mbytes\n\t}\n\tchain c {\n\t\tquota name \"q\" drop\n\t}\n}\n");
    assert!(
        e.contains("n.nft:6:9:") && e.contains("named quota object"),
        "{e}"
    );
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
    let e = err(&input("\t\tip6 flowlabel 1 drop\n"));
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
    // ipset 4's save format, which a current `ipset restore` still reads,
    // loads as sets (tests/ipset_legacy_kernel.rs checks it against ipset).
    let text = "-N ban iphash --hashsize 128\n-A ban 1.2.3.4\nCOMMIT\n";
    assert_eq!(detect(text), Format::Ipset);
    let c = parapet_parse::check::check(text, "old.ipset", Format::Auto).unwrap();
    assert_eq!(c.format, Format::Ipset);
}

/// A regular chain no filter chain reaches, whose only errors are NAT
/// statements, is the kernel's NAT; reached from a filter chain, or with
/// another error (`ct status == dnat` is a match parapet refuses, not NAT),
/// it stays an error.
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
    let e = err("table ip t {\n\tchain n {\n\t\tct status == dnat accept\n\t}\n}\n");
    assert!(e.contains("compare all 32 status bits"), "{e}");
    // In a chain that also filters (a chain that only mangles is the
    // kernel's: corpus_misc.rs).
    let e = err(&input("\t\tip daddr set 10.0.0.1\n\t\ttcp dport 1 drop\n"));
    assert!(e.contains("changes the packet later rules see"), "{e}");
}

/// An anonymous set element's own `counter [packets N bytes N]` is read
/// (it counts, decides nothing); its malformed forms fail at the word.
#[test]
fn anonymous_set_element_counters() {
    let rs = ok(&input(
        "\t\tudp dport { 53 counter packets 0 bytes 0, 54 counter } drop\n",
    ));
    assert_eq!(decide(&rs, &pkt(Family::V4, 17, 54)), (1, Verdict::Drop));
    assert_eq!(decide(&rs, &pkt(Family::V4, 17, 55)), (0, Verdict::Accept));
    for (line, want) in [
        (
            "\t\tudp dport { 53 counter packets x bytes 0 } drop\n",
            "n.nft:4:34: expected a number of packets",
        ),
        (
            "\t\tudp dport { 53 counter packets 1 } drop\n",
            "n.nft:4:36: expected 'bytes N'",
        ),
    ] {
        let e = err(&input(line));
        assert!(e.contains(want), "{line:?}: {e}");
    }
}

/// A verdict after a verdict map is the verdict of its `continue`
/// elements (nft runs the next statement only after `continue`; a key in
/// no element ends the rule); anything else after it stays an error.
#[test]
fn a_verdict_after_a_verdict_map() {
    let rs = ok(&input(
        "\t\tudp dport vmap { 53 : continue, 54 : accept, 55 : drop } drop\n\t\tudp dport 56 drop\n",
    ));
    assert_eq!(decide(&rs, &pkt(Family::V4, 17, 53)).1, Verdict::Drop);
    assert_eq!(decide(&rs, &pkt(Family::V4, 17, 54)).1, Verdict::Accept);
    assert_eq!(decide(&rs, &pkt(Family::V4, 17, 55)).1, Verdict::Drop);
    assert_eq!(decide(&rs, &pkt(Family::V4, 17, 56)).1, Verdict::Drop);
    assert_eq!(decide(&rs, &pkt(Family::V4, 17, 57)), (0, Verdict::Accept));
    for (line, want) in [
        (
            "\t\tudp dport vmap { 53 : continue } accept drop\n",
            "n.nft:4:43: expected the end of the rule after the verdict, found 'drop'",
        ),
        (
            "\t\tudp dport vmap { 53 : continue } jump x\n",
            "n.nft:4:36: expected the end of the rule after the verdict, found 'jump'",
        ),
    ] {
        let e = err(&input(line));
        assert!(e.contains(want), "{line:?}: {e}");
    }
}

/// `ct helper "NAME"` as a match decides nothing at the end of a rule (a
/// failed match stops only what follows it): read, kept for the listing;
/// before a statement it is refused at its place.
#[test]
fn a_trailing_ct_helper_match() {
    let rs = ok(&input(
        "\t\tudp dport 137 ct helper \"netbios-ns\"\n\t\tudp dport 137 drop\n",
    ));
    assert_eq!(
        rs.tables[0].chains[0].rules[0].kernel,
        ["ct helper \"netbios-ns\""]
    );
    assert_eq!(decide(&rs, &pkt(Family::V4, 17, 137)), (2, Verdict::Drop));
    // The listing writes it after the rule's counter, still last.
    let listed = render::nft(&rs).unwrap();
    assert!(listed.contains("ct helper \"netbios-ns\"\n"), "{listed}");
    let again = parse(&listed, "listed.nft", Format::Nft).unwrap().ruleset;
    assert_eq!(
        again.tables[0].chains[0].rules[0].kernel,
        rs.tables[0].chains[0].rules[0].kernel
    );
    let e = err(&input("\t\tudp dport 137 ct helper \"ftp\" accept\n"));
    assert!(
        e.starts_with("n.nft:4:17: 'ct helper \"NAME\"' as a match"),
        "{e}"
    );
}
