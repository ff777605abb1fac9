//! ipset / nft formats: round trips, malformed input, all-or-nothing loads,
//! timeouts on a manual clock, capacity errors, swap, explain.

use parapet_sets::*;
use proptest::prelude::*;
use std::sync::Arc;

fn store_at(ms: u64) -> (SetStore, Arc<ManualClock>) {
    let c = Arc::new(ManualClock::new(ms));
    (SetStore::with_clock(c.clone()), c)
}

fn v4(s: &str) -> LookupKey {
    LookupKey::new().ipv4(s.parse().unwrap())
}

const IPSET: &str = "\
create ban hash:ip family inet hashsize 1024 maxelem 65536 timeout 300
add ban 192.0.2.1 timeout 100
add ban 192.0.2.2 timeout 0
create nets hash:net family inet hashsize 1024 maxelem 1000000 counters comment
add nets 10.0.0.0/8 packets 5 bytes 500 comment \"rfc1918\"
add nets 10.1.0.0/16 packets 0 bytes 0
add nets 203.0.113.7 packets 0 bytes 0
create svc hash:ip,port family inet hashsize 1024 maxelem 65536
add svc 192.0.2.1,tcp:22
add svc 192.0.2.1,udp:53
create nets6 hash:net,port family inet6 hashsize 1024 maxelem 65536
add nets6 2001:db8::/32,tcp:443
create ifs hash:net,iface family inet hashsize 1024 maxelem 65536
add ifs 198.51.100.0/24,eth0
create ports bitmap:port range 0-65535
add ports 22
add ports 80
";

#[test]
fn ipset_round_trip_and_lookups() {
    let (mut s, clock) = store_at(1_000_000);
    let st = s.load_ipset(IPSET).unwrap();
    assert_eq!(st.sets_created, 6);
    let saved = s.save_ipset(None);
    let (mut s2, _c2) = store_at(1_000_000);
    s2.load_ipset(&saved).unwrap();
    assert_eq!(s2.save_ipset(None), saved, "save → load → save is stable");
    // the saved text contains what was loaded
    for line in [
        "add ban 192.0.2.1 timeout 100",
        "add ban 192.0.2.2 timeout 0",
        "add nets 10.0.0.0/8 packets 5 bytes 500 comment \"rfc1918\"",
        "add svc 192.0.2.1,udp:53",
        "add nets6 2001:db8::/32,tcp:443",
        "add ifs 198.51.100.0/24,eth0",
        "add ports 80",
    ] {
        assert!(
            saved.lines().any(|l| l == line),
            "missing `{line}` in\n{saved}"
        );
    }
    assert_eq!(s.lookup("ban", &v4("192.0.2.1")), Some(true));
    assert_eq!(s.lookup("nets", &v4("10.1.2.3")), Some(true));
    assert_eq!(s.lookup("nets", &v4("11.1.2.3")), Some(false));
    assert_eq!(
        s.lookup("svc", &v4("192.0.2.1").proto(17).port(53)),
        Some(true)
    );
    assert_eq!(
        s.lookup("svc", &v4("192.0.2.1").proto(6).port(53)),
        Some(false)
    );
    assert_eq!(
        s.lookup(
            "nets6",
            &LookupKey::new()
                .ipv6("2001:db8::5".parse().unwrap())
                .proto(6)
                .port(443)
        ),
        Some(true)
    );
    assert_eq!(
        s.lookup("ifs", &v4("198.51.100.9").iface("eth0")),
        Some(true)
    );
    assert_eq!(
        s.lookup("ifs", &v4("198.51.100.9").iface("eth1")),
        Some(false)
    );
    assert_eq!(s.lookup("ports", &LookupKey::new().port(22)), Some(true));
    assert_eq!(s.lookup("nope", &LookupKey::new().port(22)), None);
    // family mismatch is not a member
    assert_eq!(
        s.lookup("ban", &LookupKey::new().ipv6("::1".parse().unwrap())),
        Some(false)
    );
    // IPv4-mapped addresses match IPv4 sets
    assert_eq!(
        s.lookup("ban", &LookupKey::new().addr(Family::V4, 0xffff_c000_0201)),
        Some(true)
    );
    assert_eq!(
        s.key_dims("svc"),
        &[KeyPart::Ipv4Addr, KeyPart::InetProto, KeyPart::InetService]
    );
    assert_eq!(s.key_dims("nope"), &[] as &[KeyPart]);
    // timeouts: 100 s element expires, permanent one stays
    clock.advance(100_000);
    assert_eq!(s.lookup("ban", &v4("192.0.2.1")), Some(false));
    assert_eq!(s.lookup("ban", &v4("192.0.2.2")), Some(true));
    assert!(!s.save_ipset(Some("ban")).contains("192.0.2.1"));
}

#[test]
fn ipset_restore_commands() {
    let (mut s, _) = store_at(0);
    s.load_ipset("create a hash:ip\nadd a 1.2.3.4\ncreate b hash:ip\nadd b 5.6.7.8\nswap a b\n")
        .unwrap();
    assert_eq!(s.lookup("a", &v4("5.6.7.8")), Some(true));
    assert_eq!(s.lookup("b", &v4("1.2.3.4")), Some(true));
    s.load_ipset("del a 5.6.7.8\nrename b c\n").unwrap();
    assert_eq!(s.lookup("a", &v4("5.6.7.8")), Some(false));
    assert_eq!(s.lookup("b", &v4("1.2.3.4")), None);
    assert_eq!(s.lookup("c", &v4("1.2.3.4")), Some(true));
    s.load_ipset("flush c\ndestroy a\n").unwrap();
    assert_eq!(s.lookup("c", &v4("1.2.3.4")), Some(false));
    assert_eq!(s.names(), vec!["c"]);
    // hash:ip with a CIDR expands to addresses (as ipset does)
    s.load_ipset("create h hash:ip\nadd h 10.0.0.0/30\n")
        .unwrap();
    assert_eq!(s.get("h").unwrap().len(), 4);
    assert!(s.save_ipset(Some("h")).contains("add h 10.0.0.3\n"));
}

fn err_of(text: &str) -> Error {
    let (mut s, _) = store_at(0);
    s.load_ipset("create existing hash:ip\nadd existing 9.9.9.9\n")
        .unwrap();
    let before = s.save_ipset(None);
    let e = s.load_ipset(text).unwrap_err();
    assert_eq!(s.save_ipset(None), before, "a failed load changes nothing");
    e
}

#[test]
fn ipset_malformed() {
    let cases: &[(&str, usize, usize, &str)] = &[
        ("create x hash:foo\n", 1, 10, "unsupported set type"),
        (
            "create x hash:ip\nadd x 1.2.3\n",
            2,
            7,
            "expected an IPv4 address",
        ),
        (
            "create x hash:ip\nadd y 1.2.3.4\n",
            2,
            5,
            "set `y` does not exist",
        ),
        ("create x hash:ip\nadd x\n", 2, 6, "expected an element"),
        (
            "create x hash:ip\nadd x 1.2.3.4 timeout 5\n",
            2,
            7,
            "without timeout support",
        ),
        (
            "create x hash:ip timeout 5\nadd x 1.2.3.4 timeout abc\n",
            2,
            23,
            "expected a timeout",
        ),
        (
            "create x hash:ip,port\nadd x 1.2.3.4,tcp:99999\n",
            2,
            15,
            "out of range",
        ),
        (
            "create x hash:ip,port\nadd x 1.2.3.4\n",
            2,
            15,
            "more comma-separated",
        ),
        (
            "create x hash:net\nadd x 10.0.0.0/33\n",
            2,
            7,
            "prefix length 33",
        ),
        (
            "create x hash:ip frobnicate\n",
            1,
            18,
            "unknown create option",
        ),
        (
            "create x hash:ip maxelem\n",
            1,
            25,
            "expected a value after `maxelem`",
        ),
        (
            "create x hash:ip comment\nadd x 1.2.3.4 comment \"oops\n",
            2,
            23,
            "unterminated string",
        ),
        ("create existing hash:ip\n", 1, 8, "already exists"),
        ("bogus\n", 1, 1, "expected create, add"),
        (
            "add existing 1.2.3.4\nadd existing 1.2.3.x\n",
            2,
            14,
            "expected an IPv4 address",
        ),
        ("create x bitmap:ip\n", 1, 19, "needs `range"),
        (
            "create x hash:ip maxelem 2\nadd x 1.1.1.1\nadd x 1.1.1.2\nadd x 1.1.1.3\n",
            4,
            7,
            "set `x` is full (maxelem 2)",
        ),
    ];
    for &(text, line, col, msg) in cases {
        let e = err_of(text);
        assert!(
            e.message.contains(msg),
            "{text:?}: message `{}` lacks `{msg}`",
            e.message
        );
        assert_eq!((e.line, e.column), (line, col), "{text:?}: {e}");
    }
}

const NFT: &str = r#"
table inet filter {
	set ban {
		type ipv4_addr
		flags interval,timeout
		timeout 1h
		size 65536
		elements = { 10.0.0.0/8 timeout 30s expires 12s, 1.2.3.4,
			     10.1.0.0/16 comment "nested" }
	}
	set svc {
		type ipv4_addr . inet_service
		flags interval
		elements = { 192.0.2.0/24 . 1000-2000, 198.51.100.1 . 22 }
	}
	chain input {
		type filter hook input priority 0; policy drop;
		ip saddr @ban drop
	}
	set six { type ipv6_addr; elements = { 2001:db8::1, ::1 } }
	set ifs { typeof iifname; flags interval; elements = { "eth*", "lo" } }
	set protos { type inet_proto; elements = { tcp, 17 } }
}
"#;

#[test]
fn nft_load_lookup_timeouts_round_trip() {
    let (mut s, clock) = store_at(5_000_000);
    s.load_nft(NFT).unwrap();
    assert_eq!(s.names(), vec!["ban", "ifs", "protos", "six", "svc"]);
    assert_eq!(s.lookup("ban", &v4("10.200.0.1")), Some(true));
    assert_eq!(s.lookup("ban", &v4("1.2.3.4")), Some(true));
    assert_eq!(s.lookup("svc", &v4("192.0.2.9").port(1500)), Some(true));
    assert_eq!(s.lookup("svc", &v4("192.0.2.9").port(2001)), Some(false));
    assert_eq!(
        s.lookup("six", &LookupKey::new().ipv6("::1".parse().unwrap())),
        Some(true)
    );
    assert_eq!(s.lookup("ifs", &LookupKey::new().iface("eth7")), Some(true));
    assert_eq!(
        s.lookup("ifs", &LookupKey::new().iface("wlan0")),
        Some(false)
    );
    assert_eq!(s.lookup("protos", &LookupKey::new().proto(17)), Some(true));
    assert_eq!(s.get("ban").unwrap().backend(), BackendKind::Interval);
    assert_eq!(s.get("svc").unwrap().backend(), BackendKind::TupleSpace);
    assert_eq!(s.get("protos").unwrap().backend(), BackendKind::Bitmap);
    assert_eq!(s.get("ban").unwrap().maxelem(), 65536);
    let text = s.save_nft(None);
    assert!(
        text.contains("10.0.0.0/8 timeout 30s expires 12s"),
        "{text}"
    );
    assert!(
        text.contains("10.1.0.0/16 expires 1h comment \"nested\""),
        "{text}"
    );
    assert!(text.contains("\"eth*\""), "{text}");
    let (mut s2, _) = store_at(5_000_000);
    s2.load_nft(&text).unwrap();
    assert_eq!(s2.save_nft(None), text);
    // 12 s later the /8 has expired, the nested /16 (1 h) has not
    clock.advance(12_000);
    assert_eq!(s.lookup("ban", &v4("10.200.0.1")), Some(false));
    assert_eq!(s.lookup("ban", &v4("10.1.0.1")), Some(true));
    // re-adding refreshes
    s.load_nft("add element inet filter ban { 10.0.0.0/8 timeout 1m }")
        .unwrap();
    assert_eq!(s.lookup("ban", &v4("10.200.0.1")), Some(true));
    clock.advance(60_000);
    assert_eq!(s.lookup("ban", &v4("10.200.0.1")), Some(false));
    s.load_nft("delete element inet filter ban { 1.2.3.4 }\nflush set inet filter svc\n")
        .unwrap();
    assert_eq!(s.lookup("ban", &v4("1.2.3.4")), Some(false));
    assert_eq!(s.get("svc").unwrap().len(), 0);
    // ipset text of an nft set
    assert!(s
        .save_ipset(Some("ban"))
        .starts_with("create ban hash:net family inet"));
}

#[test]
fn nft_malformed() {
    let cases: &[(&str, usize, usize, &str)] = &[
        (
            "set x { type ipv4_adr; }",
            1,
            9,
            "unsupported type `ipv4_adr`",
        ),
        (
            "set x { type ipv4_addr; elements = { 1.2.3.4 1.2.3.5 } }",
            1,
            46,
            "`,` or `}` after an element",
        ),
        (
            "set x { type ipv4_addr; elements = { 1.2.3.4.5 } }",
            1,
            38,
            "expected an IPv4 address",
        ),
        (
            "set x {\n type ipv4_addr\n flags interval,bogus\n}",
            3,
            17,
            "expected a flag",
        ),
        (
            "set x { type ipv4_addr . inet_service; elements = { 1.2.3.4 } }",
            1,
            53,
            "expected 2 value(s)",
        ),
        ("set x { elements = { 1.2.3.4 } }", 1, 5, "has no `type`"),
        (
            "set x { type ipv4_addr; timeout 5x; }",
            1,
            33,
            "expected a duration",
        ),
        (
            "set x { type ipv4_addr;\n elements = { 1.2.3.4 timeout 5s } }",
            2,
            15,
            "without timeout support",
        ),
        (
            "set x { type ipv4_addr; size 1; elements = { 1.1.1.1, 1.1.1.2 } }",
            1,
            55,
            "set `x` is full (maxelem 1)",
        ),
        (
            "table inet f {\n set x { type ipv4_addr; }\n",
            3,
            1,
            "closing the table",
        ),
        (
            "set x { type ipv4_addr; policy fast; }",
            1,
            32,
            "expected performance or memory",
        ),
        (
            "set x { type ipv4_addr; comment \"oops }",
            1,
            33,
            "unterminated string",
        ),
        ("frob", 1, 1, "expected table, set"),
        ("set existing { type ipv4_addr; }", 1, 5, "already exists"),
    ];
    for &(text, line, col, msg) in cases {
        let (mut s, _) = store_at(0);
        s.load_nft("set existing { type ipv4_addr; elements = { 9.9.9.9 } }")
            .unwrap();
        let before = s.save_nft(None);
        let e = s.load_nft(text).unwrap_err();
        assert_eq!(s.save_nft(None), before, "a failed load changes nothing");
        assert!(
            e.message.contains(msg),
            "{text:?}: message `{}` lacks `{msg}`",
            e.message
        );
        assert_eq!((e.line, e.column), (line, col), "{text:?}: {e}");
    }
}

#[test]
fn durations() {
    assert_eq!(parse_duration("1h30m"), Some(5_400_000));
    assert_eq!(parse_duration("500ms"), Some(500));
    assert_eq!(parse_duration("7"), Some(7000));
    assert_eq!(parse_duration("1x"), None);
    assert_eq!(format_duration(5_400_500), "1h30m500ms");
    assert_eq!(format_duration(86_400_000), "1d");
}

#[test]
fn capacity_bulk_swap_explain() {
    let (mut s, _) = store_at(0);
    s.create("small", SetDesc::new(&[KeyPart::Ipv4Addr]).maxelem(3))
        .unwrap();
    let els: Vec<Element> = (0..4u128).map(|i| Element::exact(&[i])).collect();
    let e = s.add_many("small", &els).unwrap_err();
    assert_eq!(
        e,
        SetError::Full {
            set: "small".into(),
            maxelem: 3
        }
    );
    assert_eq!(
        e.to_string(),
        "set `small` is full (maxelem 3): element not added"
    );
    assert_eq!(
        s.get("small").unwrap().len(),
        0,
        "add_many is all or nothing"
    );
    assert_eq!(s.add_many("small", &els[..3]).unwrap(), 3);
    assert_eq!(s.add_many("small", &els[..3]).unwrap(), 0, "idempotent");
    assert_eq!(s.del_many("small", &els).unwrap(), 3);
    assert_eq!(s.del_many("small", &els).unwrap(), 0);
    // no 65,536 default cap
    s.create("big", SetDesc::new(&[KeyPart::Ipv4Addr])).unwrap();
    let many: Vec<Element> = (0..70_000u128).map(|i| Element::exact(&[i])).collect();
    assert_eq!(s.add_many("big", &many).unwrap(), 70_000);
    assert_eq!(s.get("big").unwrap().maxelem(), DEFAULT_MAXELEM);
    // swap: build aside, flip
    let mut aside = Set::new("ignored", SetDesc::new(&[KeyPart::Ipv4Addr]).interval()).unwrap();
    aside
        .add(&Element::new(&[(0, u32::MAX as u128)]), 0)
        .unwrap();
    let old = s.swap("big", aside).unwrap();
    assert_eq!(old.len(), 70_000);
    assert_eq!(s.lookup("big", &v4("200.1.1.1")), Some(true));
    assert_eq!(s.get("big").unwrap().name(), "big");
    s.flush("big").unwrap();
    assert_eq!(s.lookup("big", &v4("200.1.1.1")), Some(false));
    // explain
    s.load_nft("set p { type inet_service; }\nset q { type ipv4_addr; size 1000; }\nset r { type ipv4_addr; policy memory; }\nset m { type inet_service; size 4; flags timeout; policy memory; }").unwrap();
    let ex = s.explain("p").unwrap();
    assert_eq!(ex.backend, BackendKind::Bitmap);
    assert!(ex.to_string().contains("lookup: O(1)"), "{ex}");
    assert_eq!(s.explain("q").unwrap().backend, BackendKind::HashFixed);
    assert_eq!(s.explain("r").unwrap().backend, BackendKind::HashGrowable);
    assert_eq!(s.explain("m").unwrap().backend, BackendKind::HashGrowable);
    assert!(s.explain("m").unwrap().reasons[0].contains("policy is memory"));
    assert!(s.explain("zz").is_none());
    // a forced, incompatible backend is refused
    let mut d = SetDesc::new(&[KeyPart::Ipv4Addr]).interval();
    d.backend = Some(BackendKind::HashFixed);
    assert!(matches!(Set::new("x", d), Err(SetError::InvalidDesc(_))));
}

#[test]
fn expiry_reaping_is_incremental() {
    let (mut s, clock) = store_at(0);
    s.create("t", SetDesc::new(&[KeyPart::Ipv4Addr]).timeouts(1000))
        .unwrap();
    let els: Vec<Element> = (0..10_000u128).map(|i| Element::exact(&[i])).collect();
    s.add_many("t", &els).unwrap();
    clock.advance(1000);
    assert_eq!(
        s.lookup("t", &LookupKey::new().addr(Family::V4, 5)),
        Some(false),
        "expired reads as absent before any reaping"
    );
    let mut rounds = 0;
    while !s.get("t").unwrap().is_empty() {
        let n = s.tick(512);
        assert!(n <= 512);
        rounds += 1;
        assert!(rounds < 1000);
    }
    assert!(rounds >= 10_000 / 512);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    /// ipset save → parse → save is the identity on what ipset save prints.
    #[test]
    fn ipset_save_parse_save(nets in prop::collection::vec((any::<u32>(), 8u32..=32, prop::option::of(0u32..10_000)), 0..50),
                             ips6 in prop::collection::vec((any::<u128>(), any::<u16>(), prop::bool::ANY), 0..30)) {
        let (mut s, _) = store_at(1_000_000);
        let mut text = String::from("create n hash:net family inet hashsize 64 maxelem 100000 timeout 600 comment\n");
        for (a, l, t) in &nets {
            let a = a & if *l == 0 { 0 } else { u32::MAX << (32 - l) };
            let ip = std::net::Ipv4Addr::from(a);
            text += &format!("add n {ip}/{l}");
            if let Some(t) = t { text += &format!(" timeout {t}"); }
            text += " comment \"c d\"\n";
        }
        text += "create p hash:ip,port family inet6 hashsize 64 maxelem 100000\n";
        for (a, port, udp) in &ips6 {
            let ip = std::net::Ipv6Addr::from(*a);
            text += &format!("add p {ip},{}:{port}\n", if *udp { "udp" } else { "tcp" });
        }
        s.load_ipset(&text).unwrap();
        let saved = s.save_ipset(None);
        let (mut s2, _) = store_at(1_000_000);
        s2.load_ipset(&saved).unwrap();
        prop_assert_eq!(s2.save_ipset(None), saved);
    }
}
