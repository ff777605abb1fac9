//! The stage profile's object (`parapet_stages.bpf.o`,
//! `bpf/lib/stage_stop.h`): each stop ends the program where it says, and
//! a later stop runs more of the program than an earlier one. Against the
//! production object on the same image and packet.

mod common;

use std::net::Ipv4Addr;

use parapet_dataplane::frame::Frame;
use parapet_dataplane::{AttachPoint, Dataplane, Features, LoadOptions, SetSizing, Stage, Stat};

/// Rule 1 drops TCP to port 9; the others give the image a tree to walk
/// and more than one candidate to merge.
const RULES: &str = "*filter
:INPUT ACCEPT [0:0]
-A INPUT -p tcp --dport 9 -j DROP
-A INPUT -s 10.0.0.0/8 -p udp --dport 53 -j DROP
-A INPUT -s 192.0.2.0/24 -p tcp --dport 1:100 -j ACCEPT
-A INPUT -d 198.51.100.0/24 -p tcp --dport 22 -j DROP
-A INPUT -p udp --sport 123 -j ACCEPT
COMMIT
";

const OPTS: LoadOptions = LoadOptions {
    max_rules: 15,
    slot_pages: 2,
    debug: false,
};

fn with_image(mut dp: Dataplane, image: &[u8]) -> Dataplane {
    dp.write_image(image).unwrap();
    dp.swap().unwrap();
    dp
}

fn xdp_insns(dp: &Dataplane) -> u32 {
    dp.verified_insns()
        .unwrap()
        .into_iter()
        .find(|(name, _)| name == "parapet_xdp")
        .expect("the XDP program is loaded")
        .1
}

#[test]
#[ignore = "needs root"]
fn each_stop_ends_the_program_where_it_says() {
    parapet_testbed::require_root();
    let image = common::iptables_image(RULES);
    let frame = Frame::ipv4(Ipv4Addr::new(192, 0, 2, 1), Ipv4Addr::new(192, 0, 2, 2))
        .tcp(40000, 9, 0x02)
        .build();

    // the production object: rule 1 drops the packet and counts it
    let full = with_image(Dataplane::load(&OPTS).expect("load"), &image);
    for hook in [AttachPoint::Xdp, AttachPoint::Tc] {
        assert!(!full.test_run(hook, &frame, 0, 1).unwrap().passed);
    }
    let stats = full.stats().unwrap();
    assert_eq!(stats.get(Stat::Packets), 2);
    assert_eq!(stats.get(Stat::Image), 2);
    assert_eq!(full.counter(1).unwrap().packets, 2);
    let full_insns = xdp_insns(&full);

    let mut last = 0;
    for stage in Stage::ALL {
        let dp = with_image(
            Dataplane::load_stopping_after(
                &OPTS,
                &SetSizing::default(),
                &Features::default(),
                stage,
            )
            .unwrap_or_else(|e| panic!("load stopping after {}: {e:?}", stage.name())),
            &image,
        );
        // every stop comes before the verdict: the packet passes, at
        // both hooks that stop
        for hook in [AttachPoint::Xdp, AttachPoint::Tc] {
            let r = dp.test_run(hook, &frame, 0, 1).unwrap();
            assert!(r.passed, "{}: {hook:?} passes", stage.name());
        }
        let stats = dp.stats().unwrap();
        // parapet_decide counts the packet on entry: after the parse stop
        let entered = if stage == Stage::Parse { 0 } else { 2 };
        assert_eq!(
            stats.get(Stat::Packets),
            entered,
            "{}: packets that reached parapet_decide",
            stage.name()
        );
        // nothing reaches image_finish, nor is a walk abandoned
        assert_eq!(stats.get(Stat::Image), 0, "{}", stage.name());
        assert_eq!(stats.get(Stat::ImageError), 0, "{}", stage.name());
        assert_eq!(dp.counter(1).unwrap().packets, 0, "{}", stage.name());
        // the verifier walks more of the program for each later stop,
        // and the last stop is still short of the whole program
        let insns = xdp_insns(&dp);
        assert!(
            insns > last,
            "{}: {insns} verified instructions, the stop before it {last}",
            stage.name()
        );
        last = insns;
    }
    assert!(
        last < full_insns,
        "merge stop {last} vs the whole program {full_insns}"
    );
}

#[test]
fn stage_names_round_trip_in_program_order() {
    let mut prev = None;
    for s in Stage::ALL {
        assert_eq!(Stage::from_name(s.name()).unwrap(), s);
        assert!(prev < Some(s));
        prev = Some(s);
    }
    assert!(Stage::from_name("walk").is_err());
}
