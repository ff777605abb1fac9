//! The kernel as the oracle for nft dynamic sets: the same ruleset goes
//! into a network namespace this test creates (`nft -f`), UDP datagrams
//! from several loopback addresses (127.0.0.2, .3, .4) go to 127.0.0.1,
//! and which of them arrive must equal, datagram by datagram, what the
//! linear engine decides for the same sequence with its state
//! (`StatefulState`). Limits are 1/hour and timeouts an hour, so no token
//! comes back and no element expires within the test: the fates do not
//! depend on timing. Also: each ruleset's nft listing reads back equal.

mod common;
#[path = "common/paced.rs"]
mod paced;
#[path = "common/raw_out.rs"]
mod raw_out;

use common::udp_lo::assert_fates;
use parapet_model::*;
use parapet_parse::*;
use parapet_testbed::Netns;

/// The SSH brute-force pattern: per source address, a bucket of 3; the
/// fourth datagram and later are dropped.
const METER: &str = "table inet t {
\tset m {
\t\ttype ipv4_addr
\t\tsize 16
\t\tflags dynamic
\t}

\tchain input {
\t\ttype filter hook input priority 0; policy accept;
\t\tiifname \"lo\" udp dport 9999 add @m { ip saddr limit rate over 1/hour burst 3 packets } drop
\t}
}
";

/// Port knocking: a datagram to 9998 adds the source; 9999 accepts
/// members and drops the rest; 9997 removes the source again.
const KNOCK: &str = "table ip t {
\tset knocked {
\t\ttype ipv4_addr
\t\tsize 16
\t\tflags dynamic,timeout
\t\ttimeout 1h
\t}

\tchain input {
\t\ttype filter hook input priority 0; policy accept;
\t\tiifname \"lo\" udp dport 9998 update @knocked { ip saddr timeout 2h }
\t\tiifname \"lo\" udp dport 9997 delete @knocked { ip saddr }
\t\tiifname \"lo\" udp dport 9999 ip saddr @knocked accept
\t\tiifname \"lo\" udp dport 9999 drop
\t}
}
";

/// A full set refuses a new key (the kernel's `NFT_BREAK`): the third
/// address is never added, so the `!=` lookup drops its datagrams while
/// the members' get through.
const FULL: &str = "table inet t {
\tset two {
\t\ttype ipv4_addr
\t\tsize 2
\t\tflags dynamic
\t}

\tchain input {
\t\ttype filter hook input priority 0; policy accept;
\t\tiifname \"lo\" udp dport 9998 add @two { ip saddr }
\t\tiifname \"lo\" udp dport 9999 ip saddr != @two drop
\t}
}
";

/// A meter, the older spelling (per source, a bucket of 2).
const OLD_METER: &str = "table ip t {
\tchain input {
\t\ttype filter hook input priority 0; policy accept;
\t\tiifname \"lo\" udp dport 9999 meter flood size 128 { ip saddr limit rate over 1/hour burst 2 packets } drop
\t}
}
";

/// Counters in a set and in its elements count, and decide nothing: the
/// set declares `counter` (each element counts); the limit's element also
/// counts, after its limit (nft_dynset runs the element's expressions in
/// order, the counter never fails).
const COUNTED: &str = "table ip t {
\tset seen {
\t\ttype ipv4_addr
\t\tsize 16
\t\tflags dynamic
\t\tcounter
\t}

\tset flood {
\t\ttype ipv4_addr
\t\tsize 16
\t\tflags dynamic,timeout
\t\ttimeout 1h
\t}

\tchain input {
\t\ttype filter hook input priority 0; policy accept;
\t\tiifname \"lo\" udp dport 9998 update @seen { ip saddr }
\t\tiifname \"lo\" udp dport 9999 ip saddr != @seen drop
\t\tiifname \"lo\" udp dport 9999 update @flood { ip saddr limit rate over 1/hour burst 2 packets counter } drop
\t}
}
";

/// Keys of an address and a service: a knock on 9001 admits the source
/// to 9101 (a constant port), a first datagram to 9102 admits its source
/// to 9102 (the packet's port) and is dropped, a knock on 9003 takes the
/// 9101 admission away again.
const PAIRS: &str = "table inet t {
\tset pairs {
\t\ttype ipv4_addr . inet_service
\t\tsize 16
\t\tflags dynamic,timeout
\t\ttimeout 1h
\t}

\tchain input {
\t\ttype filter hook input priority 0; policy accept;
\t\tiifname \"lo\" udp dport 9001 add @pairs { ip saddr . 9101 }
\t\tiifname \"lo\" udp dport 9003 delete @pairs { ip saddr . 9101 }
\t\tiifname \"lo\" udp dport 9101-9102 ip saddr . udp dport @pairs accept
\t\tiifname \"lo\" udp dport 9102 add @pairs { ip saddr . udp dport } drop
\t\tiifname \"lo\" udp dport 9101 drop
\t}
}
";

/// Port knocking in three steps as nft's own test writes it: each knock
/// is a lookup of the previous one and, in the same rule, an `add` of the
/// next (the lookup decides first: a knock out of turn adds nothing).
const KNOCK_STEPS: &str = "table inet t {
\tset cand {
\t\ttype ipv4_addr . inet_service
\t\tsize 16
\t\tflags dynamic,timeout
\t\ttimeout 1h
\t}

\tset clients {
\t\ttype ipv4_addr
\t\tsize 16
\t\tflags dynamic,timeout
\t\ttimeout 1h
\t}

\tchain input {
\t\ttype filter hook input priority 0; policy accept;
\t\tiifname \"lo\" udp dport 9001 add @cand { ip saddr . 9002 timeout 1h }
\t\tiifname \"lo\" udp dport 9002 ip saddr . udp dport @cand add @cand { ip saddr . 9003 timeout 1h }
\t\tiifname \"lo\" udp dport 9003 ip saddr . udp dport @cand add @clients { ip saddr timeout 2h }
\t\tiifname \"lo\" udp dport 9999 ip saddr @clients accept
\t\tiifname \"lo\" udp dport 9999 drop
\t}
}
";

/// Sets declared with elements: `allowed` holds .2 from the load on (its
/// own timeout, part of it already gone) and has room for one more, which
/// an `add` takes; `pinned` holds .3 . 9997 for ever (no timeout at all).
const DECLARED: &str = "table ip t {
\tset allowed {
\t\ttype ipv4_addr
\t\tsize 2
\t\tflags dynamic,timeout
\t\ttimeout 1h
\t\telements = { 127.0.0.2 timeout 2h expires 1h30m }
\t}

\tset pinned {
\t\ttype ipv4_addr . inet_service
\t\tsize 16
\t\tflags dynamic
\t\telements = { 127.0.0.3 . 9997 }
\t}

\tchain input {
\t\ttype filter hook input priority 0; policy accept;
\t\tiifname \"lo\" udp dport 9998 add @allowed { ip saddr }
\t\tiifname \"lo\" udp dport 9999 ip saddr @allowed accept
\t\tiifname \"lo\" udp dport 9999 drop
\t\tiifname \"lo\" udp dport 9996 add @pinned { ip saddr . 9997 }
\t\tiifname \"lo\" udp dport 9997 ip saddr . udp dport @pinned drop
\t}
}
";

/// Elements added by an `add element` command after the rules.
const ADDED: &str = "table ip t {
\tset s {
\t\ttype ipv4_addr
\t\tsize 4
\t\tflags dynamic
\t}

\tchain input {
\t\ttype filter hook input priority 0; policy accept;
\t\tiifname \"lo\" udp dport 9998 add @s { ip saddr }
\t\tiifname \"lo\" udp dport 9999 ip saddr != @s drop
\t}
}
add element ip t s { 127.0.0.3 }
";

/// (source host byte, port) of each datagram.
type Sequence = Vec<(u8, u16)>;

fn cases() -> Vec<(&'static str, &'static str, Sequence)> {
    let meter: Sequence = (0..12).map(|i| ([2, 3, 2, 4][i % 4], 9999)).collect();
    let knock = vec![
        (2, 9999),
        (2, 9998),
        (2, 9999),
        (3, 9999),
        (3, 9998),
        (3, 9999),
        (2, 9997),
        (2, 9999),
        (3, 9999),
        (2, 9998),
        (2, 9999),
    ];
    let full = vec![
        (2, 9999),
        (2, 9998),
        (3, 9998),
        (4, 9998),
        (2, 9999),
        (3, 9999),
        (4, 9999),
    ];
    let old: Sequence = (0..8).map(|i| ([2, 3][i % 2], 9999)).collect();
    let pairs = vec![
        (2, 9101),
        (2, 9001),
        (2, 9101),
        (3, 9101),
        (3, 9102),
        (3, 9102),
        (2, 9102),
        (2, 9102),
        (3, 9101),
        (2, 9003),
        (2, 9101),
        (2, 9102),
        (4, 9102),
        (4, 9102),
        (4, 9101),
    ];
    let knock_steps = vec![
        (2, 9999),
        (2, 9002),
        (2, 9003),
        (2, 9999),
        (2, 9001),
        (2, 9003),
        (2, 9999),
        (2, 9002),
        (2, 9003),
        (2, 9999),
        (3, 9002),
        (3, 9999),
        (3, 9001),
        (3, 9002),
        (3, 9003),
        (3, 9999),
        (4, 9999),
    ];
    let counted = vec![
        (2, 9999),
        (2, 9998),
        (3, 9998),
        (2, 9999),
        (2, 9999),
        (3, 9999),
        (2, 9999),
        (4, 9999),
        (3, 9999),
        (3, 9999),
    ];
    let declared = vec![
        (2, 9999),
        (3, 9999),
        (4, 9999),
        (4, 9998),
        (4, 9999),
        (3, 9998),
        (3, 9999),
        (3, 9997),
        (2, 9997),
        (2, 9996),
        (2, 9997),
        (4, 9997),
    ];
    let added = vec![(2, 9999), (3, 9999), (2, 9998), (2, 9999), (4, 9999)];
    vec![
        ("sets declared with elements", DECLARED, declared),
        ("elements of an add element command", ADDED, added),
        ("meter-like add with a limit", METER, meter),
        ("port knocking", KNOCK, knock),
        ("a full set", FULL, full),
        ("meter", OLD_METER, old),
        ("counters in a set and in an element", COUNTED, counted),
        ("keys of an address and a service", PAIRS, pairs),
        (
            "knocks: a lookup and an add in one rule",
            KNOCK_STEPS,
            knock_steps,
        ),
    ]
}

#[test]
fn listings_read_back_equal() {
    for (name, text, _) in cases() {
        let rs = parse(text, "dynset.nft", Format::Nft).unwrap().ruleset;
        let listed = render::nft(&rs).unwrap_or_else(|e| panic!("{name}: {e}"));
        let back = parse(&listed, "listed.nft", Format::Nft)
            .unwrap_or_else(|e| panic!("{name}: {e:?}\n{listed}"))
            .ruleset;
        let rules = |rs: &Ruleset| -> Vec<Rule> {
            rs.tables
                .iter()
                .flat_map(|t| &t.chains)
                .flat_map(|c| c.rules.iter().cloned())
                .map(|mut r| {
                    r.origin = Origin::default();
                    r.counters = Counters::default();
                    r
                })
                .collect()
        };
        assert_eq!(rules(&rs), rules(&back), "{name}:\n{listed}");
    }
}

#[test]
fn clear_refusals() {
    for (text, want) in [
        (
            "table ip t {\n set s { type ipv4_addr . ipv4_addr; flags dynamic; }\n chain c { add @s { ip saddr . ip daddr } }\n}\n",
            "2:",
        ),
        (
            "table ip t {\n set s { type ipv4_addr; flags dynamic; }\n chain c { add @s { ip saddr quota 10 bytes } }\n}\n",
            "3:",
        ),
        (
            "table ip t {\n set s { type ipv4_addr; flags dynamic; }\n chain c { add @s { ip saddr } tcp dport 22 drop }\n}\n",
            "3:",
        ),
        (
            "table ip t {\n chain c {\n  tcp dport 22 ct count over 2 drop\n }\n}\n",
            "3:",
        ),
        (
            "table ip t {\n map m { type ipv4_addr : ipv4_addr; }\n chain c { update @m { ip saddr : ip daddr } }\n}\n",
            "3:",
        ),
        // Declared elements: of the wrong family, more than `size`, a
        // timeout in a set without timeouts, `expires` without a timeout,
        // a missing service, `expires` beyond the timeout, an `add
        // element` of the wrong family, a limit on a rule filling such a
        // set.
        (
            "table ip t {\n set s { type ipv4_addr; flags dynamic;\n elements = { 10.0.0.1, ::1 } }\n chain c { add @s { ip saddr } }\n}\n",
            "3:25:",
        ),
        (
            "table ip t {\n set s { type ipv4_addr; size 1; flags dynamic;\n elements = { 10.0.0.1, 10.0.0.1, 10.0.0.2 } }\n chain c { add @s { ip saddr } }\n}\n",
            "3:35:",
        ),
        (
            "table ip t {\n set s { type ipv4_addr; flags dynamic;\n elements = { 10.0.0.1 timeout 1m } }\n chain c { add @s { ip saddr } }\n}\n",
            "3:24:",
        ),
        (
            "table ip t {\n set s { type ipv4_addr; flags dynamic;\n elements = { 10.0.0.1 expires 1m } }\n chain c { add @s { ip saddr } }\n}\n",
            "3:15:",
        ),
        (
            "table ip t {\n set s { type ipv4_addr . inet_service; flags dynamic;\n elements = { 10.0.0.1 } }\n chain c { add @s { ip saddr . 22 } }\n}\n",
            "3:15:",
        ),
        (
            "table ip t {\n set s { type ipv4_addr; flags dynamic; timeout 1m;\n elements = { 10.0.0.1 timeout 0s, 10.0.0.2 expires 2m } }\n chain c { add @s { ip saddr } }\n}\n",
            "3:36:",
        ),
        (
            "table ip t {\n set s { type ipv4_addr; flags dynamic; }\n chain c { add @s { ip saddr } }\n}\nadd element ip t s { 10.0.0.1, ::1 }\n",
            "5:32:",
        ),
        (
            "table ip t {\n set s { type ipv4_addr; flags dynamic;\n elements = { 10.0.0.1 } }\n chain c { add @s { ip saddr limit rate 1/second } }\n}\n",
            "4:21:",
        ),
    ] {
        let e = parse(text, "bad.nft", Format::Nft).unwrap_err();
        let shown = format!("{}", e[0]);
        assert!(shown.contains(&format!("bad.nft:{want}")), "{shown}");
    }
}

#[test]
#[ignore = "needs root"]
fn dynamic_sets_agree_with_nft() {
    parapet_testbed::require_root();
    for (name, text, seq) in cases() {
        let ns = Netns::create("dynset-nft").unwrap();
        raw_out::load_nft(&ns, text);
        let rs = parse(text, "dynset.nft", Format::Nft).unwrap().ruleset;
        let kernel = paced::arrivals(&ns, &seq);
        let (spec, flat) = paced::engine_fates(&rs, &seq);
        assert_fates(name, &kernel, &spec);
        assert_fates(&format!("{name} (flattened)"), &kernel, &flat);
    }
}

/// A set declared with elements, loaded again (`nft -f` of the same file,
/// its chain flushed first so its rules are not doubled): the declared
/// element a rule deleted is there again, the one a rule added stays.
/// (Size 4: the kernel counts every declared element against the size
/// before it finds one already there, so a set holding 2 needs room for 2
/// more, or the whole file is refused, `ENFILE`.)
const REAPPLIED: &str = "table ip t {
\tset allowed {
\t\ttype ipv4_addr
\t\tsize 4
\t\tflags dynamic,timeout
\t\ttimeout 1h
\t\telements = { 127.0.0.2, 127.0.0.3 timeout 2h }
\t}

\tchain input {
\t\ttype filter hook input priority 0; policy accept;
\t\tiifname \"lo\" udp dport 9997 delete @allowed { ip saddr }
\t\tiifname \"lo\" udp dport 9998 add @allowed { ip saddr }
\t\tiifname \"lo\" udp dport 9999 ip saddr @allowed accept
\t\tiifname \"lo\" udp dport 9999 drop
\t}
}
";

/// The linear engine's fates of `seq` on `state`, datagram `i` at `base`
/// + `i` ms.
fn fates_on(
    engine: &LinearEngine,
    state: &mut StatefulState,
    seq: &[(u8, u16)],
    base: u64,
) -> Vec<bool> {
    seq.iter()
        .enumerate()
        .map(|(i, (h, port))| {
            let src = u32::from(std::net::Ipv4Addr::new(127, 0, 0, *h));
            let mut pkt = Packet::v4(src, 0x7f00_0001, 17, 40000, *port);
            pkt.iif = IfName::new("lo").unwrap();
            state.set_ns(base + 1_000_000 * (i as u64 + 1));
            engine.classify_with(&pkt, &NoSets, state).unwrap().verdict == Verdict::Accept
        })
        .collect()
}

#[test]
#[ignore = "needs root"]
fn reapplied_declarations_agree_with_nft() {
    parapet_testbed::require_root();
    let first = vec![
        (2, 9999),
        (2, 9997),
        (2, 9999),
        (4, 9998),
        (4, 9999),
        (3, 9999),
    ];
    let second = vec![
        (2, 9999),
        (4, 9999),
        (3, 9999),
        (3, 9997),
        (3, 9999),
        (5, 9999),
    ];
    let ns = Netns::create("dynset-reapply").unwrap();
    raw_out::load_nft(&ns, REAPPLIED);
    let rs = parse(REAPPLIED, "dynset.nft", Format::Nft).unwrap().ruleset;
    let engine = LinearEngine::new(&rs, rs.select_chain(None).unwrap()).unwrap();
    let clock = Clock {
        ns: 1_000_000,
        hz: 250,
    };
    let mut state = StatefulState::new(clock);
    let mut kernel = paced::arrivals(&ns, &first);
    let mut spec = fates_on(&engine, &mut state, &first, 0);
    raw_out::load_nft(&ns, &format!("flush chain ip t input\n{REAPPLIED}"));
    // parapetd's re-apply, in the specification's state.
    let now = Clock {
        ns: 1_000_000_000,
        hz: 250,
    };
    state.set_ns(now.ns);
    for d in DynsetDecl::with_elements(&rs) {
        state.dynset.reapply(d, now.jiffies(), now.hz);
    }
    kernel.extend(paced::arrivals(&ns, &second));
    spec.extend(fates_on(&engine, &mut state, &second, now.ns));
    assert_fates("a re-applied declaration", &kernel, &spec);
}
