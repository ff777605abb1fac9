//! The conntrack state the kernel gives the image, through
//! `BPF_PROG_TEST_RUN`: packets of no known connection get NEW or INVALID
//! the way conntrack would judge them, lookups are made and counted, and
//! an image that accepts only ESTABLISHED,RELATED drops them. With the
//! lookup off every packet is UNTRACKED. (Connections that exist are
//! covered end to end in `e2e_reject_ct.rs`.) Needs root.

mod common;

use std::net::{Ipv4Addr, Ipv6Addr};

use common::{iptables_image, load_dataplane};

use parapet_dataplane::frame::{Frame, L4};
use parapet_dataplane::{
    AttachPoint, Dataplane, Features, KernelVerdict, LoadOptions, SetSizing, Stat,
};
use parapet_image::ct::{INVALID as CT_INVALID, NEW as CT_NEW, UNTRACKED as CT_UNTRACKED};

const A4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
const B4: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 7);
const A6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
const B6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 1, 0, 0, 0, 2);

const OPTS: LoadOptions = LoadOptions {
    max_rules: 15,
    slot_pages: 16,
    debug: true,
};

/// The dataplane with the conntrack lookup on; fails when this is not
/// root or the kernel lacks the kfuncs.
fn load_ct(test: &str) -> Dataplane {
    // the privilege check and its message
    drop(load_dataplane(test, &OPTS));
    let dp = Dataplane::load_with(
        &OPTS,
        &SetSizing::default(),
        &Features {
            conntrack: true,
            ..Features::default()
        },
    )
    .expect("load with conntrack");
    assert!(
        dp.conntrack(),
        "{test}: {}",
        dp.conntrack_note().unwrap_or("no conntrack")
    );
    dp
}

/// An ICMP error quoting a UDP datagram `from` → `to`.
fn icmp_error_quoting(from: Ipv4Addr, to: Ipv4Addr) -> Vec<u8> {
    let quoted = Frame::ipv4(from, to).udp(33000, 53).build();
    let mut f = Frame::ipv4(B4, A4).l4(L4::Icmp { ty: 3, code: 3 }).build();
    f.extend_from_slice(&quoted[14..14 + 28]);
    let tot = (f.len() - 14) as u16;
    f[16..18].copy_from_slice(&tot.to_be_bytes());
    f[24..26].copy_from_slice(&[0, 0]);
    let c = parapet_dataplane::frame::ipv4_checksum(&f[14..34]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
    f
}

#[test]
#[ignore = "needs root"]
fn packets_without_a_connection_are_new_or_invalid() {
    let mut dp = load_ct("packets_without_a_connection_are_new_or_invalid");
    let text = "*filter\n:INPUT DROP [0:0]\n\
        -A INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT\n\
        COMMIT\n";
    dp.write_image(&iptables_image(text)).unwrap();
    dp.swap().unwrap();
    // Addresses of TEST-NET ranges: no connection of this host uses them.
    let tcp = |f: u8| Frame::ipv4(A4, B4).tcp(40001, 80, f).build();
    let cases: Vec<(&str, Vec<u8>, u32, bool)> = vec![
        ("TCP SYN", tcp(0x02), CT_NEW, true),
        ("TCP bare ACK (loose pickup)", tcp(0x10), CT_NEW, true),
        ("TCP PSH+ACK", tcp(0x18), CT_NEW, true),
        ("TCP SYN+ACK", tcp(0x12), CT_INVALID, true),
        ("TCP FIN+ACK", tcp(0x11), CT_INVALID, true),
        ("TCP RST", tcp(0x04), CT_INVALID, true),
        ("TCP SYN+FIN", tcp(0x03), CT_INVALID, false),
        ("TCP no flags", tcp(0x00), CT_INVALID, false),
        (
            "UDP",
            Frame::ipv4(A4, B4).udp(5000, 53).build(),
            CT_NEW,
            true,
        ),
        (
            "UDP v6",
            Frame::ipv6(A6, B6).udp(5000, 53).build(),
            CT_NEW,
            true,
        ),
        (
            "TCP SYN v6",
            Frame::ipv6(A6, B6).tcp(1, 2, 0x02).build(),
            CT_NEW,
            true,
        ),
        (
            "ICMP echo",
            Frame::ipv4(A4, B4).l4(L4::Icmp { ty: 8, code: 0 }).build(),
            CT_NEW,
            false,
        ),
        (
            "ICMP error, unknown quote",
            icmp_error_quoting(A4, B4),
            CT_INVALID,
            true,
        ),
        (
            "later fragment",
            Frame::ipv4(A4, B4)
                .ipv4_frag(100, false)
                .udp(1, 2)
                .payload(8)
                .build(),
            CT_NEW,
            false,
        ),
        (
            "GRE",
            Frame::ipv4(A4, B4)
                .l4(L4::Raw {
                    proto: 47,
                    header: vec![0; 4],
                })
                .build(),
            CT_NEW,
            false,
        ),
    ];
    let mut lookups = 0;
    for (name, frame, want, looked_up) in cases {
        for hook in [AttachPoint::Xdp, AttachPoint::Tc] {
            let before = dp.stats().unwrap().get(Stat::CtLookup);
            let r = dp.test_run(hook, &frame, 0, 1).unwrap();
            let d = dp.last_decision().unwrap().unwrap();
            assert_eq!(d.ctstate, want, "{name} at {hook:?}");
            assert!(d.by_image);
            // only ESTABLISHED,RELATED is accepted
            assert!(!r.passed, "{name} at {hook:?} passed");
            assert_eq!(d.verdict, KernelVerdict::Drop);
            let made = dp.stats().unwrap().get(Stat::CtLookup) - before;
            assert_eq!(made, u64::from(looked_up), "{name} at {hook:?}: lookups");
            lookups += made;
        }
    }
    let st = dp.stats().unwrap();
    assert_eq!(st.get(Stat::CtLookup), lookups);
    assert_eq!(st.get(Stat::CtFound), 0);
}

#[test]
#[ignore = "needs root"]
fn without_the_lookup_packets_are_untracked() {
    let mut dp = load_dataplane("without_the_lookup_packets_are_untracked", &OPTS);
    assert!(!dp.conntrack());
    let text = "*filter\n:INPUT DROP [0:0]\n\
        -A INPUT -m conntrack --ctstate UNTRACKED -j ACCEPT\n\
        COMMIT\n";
    dp.write_image(&iptables_image(text)).unwrap();
    dp.swap().unwrap();
    let f = Frame::ipv4(A4, B4).tcp(1, 80, 0x02).build();
    for hook in [AttachPoint::Xdp, AttachPoint::Tc] {
        assert!(dp.test_run(hook, &f, 0, 1).unwrap().passed);
        assert_eq!(dp.last_decision().unwrap().unwrap().ctstate, CT_UNTRACKED);
    }
    assert_eq!(dp.stats().unwrap().get(Stat::CtLookup), 0);
}

/// The runtime switch: off gives UNTRACKED without a lookup, on gives the
/// lookup's NEW again, both without reloading; a load without the lookup
/// refuses to turn it on.
#[test]
#[ignore = "needs root"]
fn the_lookup_switches_at_run_time() {
    let mut dp = load_ct("the_lookup_switches_at_run_time");
    let text = "*filter\n:INPUT DROP [0:0]\n\
        -A INPUT -m conntrack --ctstate UNTRACKED -j ACCEPT\n\
        COMMIT\n";
    dp.write_image(&iptables_image(text)).unwrap();
    dp.swap().unwrap();
    let f = Frame::ipv4(A4, B4).tcp(1, 80, 0x02).build();
    for (on, want, passed) in [
        (false, CT_UNTRACKED, true),
        (true, CT_NEW, false),
        (false, CT_UNTRACKED, true),
    ] {
        dp.set_conntrack(on).unwrap();
        assert_eq!(dp.conntrack(), on);
        assert!(dp.conntrack_available());
        for hook in [AttachPoint::Xdp, AttachPoint::Tc] {
            let before = dp.stats().unwrap().get(Stat::CtLookup);
            assert_eq!(dp.test_run(hook, &f, 0, 1).unwrap().passed, passed);
            let d = dp.last_decision().unwrap().unwrap();
            assert_eq!(d.ctstate, want, "on={on} at {hook:?}");
            let made = dp.stats().unwrap().get(Stat::CtLookup) - before;
            assert_eq!(made, u64::from(on), "on={on} at {hook:?}: lookups");
        }
    }
    drop(dp);
    let mut plain = Dataplane::load(&OPTS).unwrap();
    assert!(!plain.conntrack_available());
    assert!(plain.set_conntrack(true).is_err());
    assert!(!plain.conntrack());
    plain.set_conntrack(false).unwrap();
}

/// The shared install path switches the lookup with the ruleset: on for
/// one that matches ctstate (through a jump), off for one that does not,
/// and unchanged when the install fails.
#[test]
#[ignore = "needs root"]
fn installing_a_ruleset_switches_the_lookup() {
    let mut dp = load_ct("installing_a_ruleset_switches_the_lookup");
    dp.set_conntrack(false).unwrap();
    let parse = |text: &str| {
        parapet_parse::parse(text, "test", parapet_parse::Format::IptablesSave)
            .unwrap()
            .ruleset
    };
    let with_ct = parse(
        "*filter\n:INPUT DROP [0:0]\n:sub - [0:0]\n\
         -A INPUT -p tcp -j sub\n\
         -A sub -m conntrack --ctstate NEW -j ACCEPT\n\
         COMMIT\n",
    );
    let without = parse("*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -p udp -j DROP\nCOMMIT\n");
    let input = |rs: &parapet_model::Ruleset| rs.select_chain(Some("INPUT")).unwrap();
    assert!(parapet_dataplane::ruleset::needs_conntrack(
        &with_ct,
        input(&with_ct)
    ));
    assert!(!parapet_dataplane::ruleset::needs_conntrack(
        &without,
        input(&without)
    ));
    let install = |dp: &mut Dataplane, rs: &parapet_model::Ruleset, image: &[u8]| {
        let needs = parapet_dataplane::ruleset::needs_conntrack(rs, input(rs));
        dp.install_ruleset_ct(
            &parapet_dataplane::ruleset::Install {
                ruleset: rs,
                policy: &parapet_model::Verdict::Accept,
                image,
                sets: None,
                log_rate: 1,
            },
            needs,
        )
    };
    let syn = Frame::ipv4(A4, B4).tcp(1, 80, 0x02).build();
    let img = iptables_image(
        "*filter\n:INPUT DROP [0:0]\n:sub - [0:0]\n\
         -A INPUT -p tcp -j sub\n\
         -A sub -m conntrack --ctstate NEW -j ACCEPT\n\
         COMMIT\n",
    );
    // too large for the slot: nothing changes, the lookup stays off
    let huge = vec![0u8; dp.slot_capacity() + 1];
    assert!(install(&mut dp, &with_ct, &huge).is_err());
    assert!(!dp.conntrack());
    install(&mut dp, &with_ct, &img).unwrap();
    assert!(dp.conntrack());
    assert!(dp.test_run(AttachPoint::Xdp, &syn, 0, 1).unwrap().passed);
    assert_eq!(dp.last_decision().unwrap().unwrap().ctstate, CT_NEW);
    // a failed install of a ruleset without ctstate leaves it on
    assert!(install(&mut dp, &without, &huge).is_err());
    assert!(dp.conntrack());
    let img2 = iptables_image("*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -p udp -j DROP\nCOMMIT\n");
    install(&mut dp, &without, &img2).unwrap();
    assert!(!dp.conntrack());
    assert!(dp.test_run(AttachPoint::Xdp, &syn, 0, 1).unwrap().passed);
    assert_eq!(dp.last_decision().unwrap().unwrap().ctstate, CT_UNTRACKED);
}

/// Every program verifies with the conntrack lookup linked in, as parapetd
/// loads them (daemon's default options, with and without the debug
/// build): the tc placement's ingress program once went past the
/// verifier's million instructions with it, and parapetd then loaded
/// without the lookup and refused ctstate rulesets in the tc placement.
#[test]
#[ignore = "needs root"]
fn the_tc_placement_programs_verify_with_the_lookup() {
    drop(load_dataplane(
        "the_tc_placement_programs_verify_with_the_lookup",
        &OPTS,
    ));
    for debug in [false, true] {
        let opts = LoadOptions {
            debug,
            ..LoadOptions::default()
        };
        let mut dp = Dataplane::load_with(
            &opts,
            &SetSizing::default(),
            &Features {
                conntrack: true,
                ..Features::default()
            },
        )
        .unwrap_or_else(|e| panic!("debug {debug}: load with conntrack: {e}"));
        assert!(dp.conntrack(), "{:?}", dp.conntrack_note());
        dp.load_tc_hook_programs()
            .unwrap_or_else(|e| panic!("debug {debug}: tc placement programs: {e:?}"));
    }
}
