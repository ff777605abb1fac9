//! Verdicts, counters, rate-limited logging and image slots, driven through
//! BPF_PROG_TEST_RUN on the real program.

mod common;

use std::net::{Ipv4Addr, Ipv6Addr};

use common::load_dataplane;
use parapet_dataplane::abi::{FRAG_LATER, HOOK_TC, HOOK_XDP};
use parapet_dataplane::frame::Frame;
use parapet_dataplane::{
    AttachPoint, Counter, Dataplane, Error, HookCount, KernelVerdict, LoadOptions, Stat,
};

const SRC: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
const DST: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);

fn udp(dport: u16, payload: usize) -> Vec<u8> {
    Frame::ipv4(SRC, DST)
        .udp(40000, dport)
        .payload(payload)
        .build()
}

fn passes(dp: &Dataplane, hook: AttachPoint, frame: &[u8]) -> bool {
    dp.test_run(hook, frame, 0, 1).expect("test run").passed
}

fn small(test: &str) -> Dataplane {
    load_dataplane(
        test,
        &LoadOptions {
            max_rules: 15,
            slot_pages: 2,
            debug: true,
        },
    )
}

#[test]
#[ignore = "needs root"]
fn verdicts_and_return_codes_follow_the_rules() {
    let mut dp = small("verdicts_and_return_codes_follow_the_rules");
    dp.set_policy(KernelVerdict::Drop).unwrap();
    dp.set_action(1, KernelVerdict::Accept, false).unwrap();
    dp.set_action(2, KernelVerdict::Reject, false).unwrap();
    dp.set_lite_rule(17, 53, 1).unwrap();
    dp.set_lite_rule(17, 0, 2).unwrap();

    // XDP: 2 = XDP_PASS, 1 = XDP_DROP; tc: 0 = TC_ACT_OK, 2 = TC_ACT_SHOT.
    let r = dp.test_run(AttachPoint::Xdp, &udp(53, 0), 0, 1).unwrap();
    assert_eq!((r.retval, r.passed), (2, true));
    // REJECT answers: 3 = XDP_TX, 7 = TC_ACT_REDIRECT (tests/reject.rs
    // checks the answers); with replies switched off it drops.
    let r = dp.test_run(AttachPoint::Xdp, &udp(54, 0), 0, 1).unwrap();
    assert_eq!((r.retval, r.passed), (3, false), "REJECT answers at XDP");
    let r = dp.test_run(AttachPoint::Tc, &udp(53, 0), 0, 1).unwrap();
    assert_eq!((r.retval, r.passed), (0, true));
    let r = dp.test_run(AttachPoint::Tc, &udp(54, 0), 0, 1).unwrap();
    assert_eq!((r.retval, r.passed), (7, false), "REJECT answers at tc");
    dp.set_reject_rate(0, 1).unwrap();
    let r = dp.test_run(AttachPoint::Xdp, &udp(54, 0), 0, 1).unwrap();
    assert_eq!(
        (r.retval, r.passed),
        (1, false),
        "unanswered REJECT drops at XDP"
    );
    let r = dp.test_run(AttachPoint::Tc, &udp(54, 0), 0, 1).unwrap();
    assert_eq!(
        (r.retval, r.passed),
        (2, false),
        "unanswered REJECT drops at tc"
    );

    let tcp = Frame::ipv4(SRC, DST).tcp(1, 53, 0x02).build();
    assert!(
        !passes(&dp, AttachPoint::Xdp, &tcp),
        "tcp/53 falls to the DROP policy"
    );
    let d = dp.last_decision().unwrap().unwrap();
    assert_eq!((d.rule_id, d.verdict), (0, KernelVerdict::Drop));

    // The any-protocol entry catches what nothing more specific does.
    dp.set_action(3, KernelVerdict::Accept, false).unwrap();
    dp.set_lite_rule(0, 0, 3).unwrap();
    assert!(passes(&dp, AttachPoint::Xdp, &tcp));
    assert_eq!(dp.last_decision().unwrap().unwrap().rule_id, 3);
    dp.remove_lite_rule(0, 0).unwrap();
    dp.remove_lite_rule(0, 0).unwrap(); // removing twice is fine
    assert!(!passes(&dp, AttachPoint::Xdp, &tcp));

    // A later fragment has no ports: the port rule cannot match it, the
    // any-port rule does (iptables semantics).
    let frag = Frame::ipv4(SRC, DST)
        .ipv4_frag(10, false)
        .udp(1, 53)
        .payload(20)
        .build();
    assert!(!passes(&dp, AttachPoint::Xdp, &frag));
    let d = dp.last_decision().unwrap().unwrap();
    assert_eq!(d.key.frag & FRAG_LATER, FRAG_LATER);
    assert_eq!(d.rule_id, 2);

    // Non-IP passes even under a DROP policy.
    assert!(passes(
        &dp,
        AttachPoint::Xdp,
        &Frame::non_ip(0x0806).payload(28).build()
    ));

    // Rule ids are bounded by max_rules.
    assert!(matches!(
        dp.set_action(16, KernelVerdict::Drop, false),
        Err(Error::RuleOutOfRange { rule: 16, max: 15 })
    ));
    assert!(dp.set_lite_rule(6, 1, 99).is_err());
}

#[test]
#[ignore = "needs root"]
fn counters_sum_packets_and_l3_bytes_per_rule() {
    let mut dp = small("counters_sum_packets_and_l3_bytes_per_rule");
    dp.set_action(4, KernelVerdict::Drop, false).unwrap();
    dp.set_lite_rule(17, 9999, 4).unwrap();
    // 10 runs of a 100-byte-payload datagram (L3 length 128) and 7 runs of
    // a 0-byte one (28), split across hooks; repeat runs count each time.
    // (At XDP the kernel's test run always reports loopback, index 1, as
    // the ingress interface; at tc, index 0 unless told.)
    dp.test_run(AttachPoint::Xdp, &udp(9999, 100), 1, 6)
        .unwrap();
    dp.test_run(AttachPoint::Tc, &udp(9999, 100), 0, 4).unwrap();
    dp.test_run(AttachPoint::Xdp, &udp(9999, 0), 0, 7).unwrap();
    dp.test_run(AttachPoint::Xdp, &udp(80, 0), 0, 3).unwrap();
    // An IPv6 packet is counted with its L3 length too (40 + 8 + 2).
    let v6 = Frame::ipv6(Ipv6Addr::LOCALHOST, Ipv6Addr::LOCALHOST)
        .udp(1, 9999)
        .payload(2)
        .build();
    dp.test_run(AttachPoint::Tc, &v6, 0, 1).unwrap();

    assert_eq!(
        dp.counter(4).unwrap(),
        Counter {
            packets: 18,
            bytes: 10 * 128 + 7 * 28 + 50
        }
    );
    assert_eq!(
        dp.counter(0).unwrap(),
        Counter {
            packets: 3,
            bytes: 3 * 28
        }
    );
    assert_eq!(dp.counter(5).unwrap(), Counter::default());
    let st = dp.stats().unwrap();
    assert_eq!(st.get(Stat::Packets), 21);
    assert_eq!(st.get(Stat::Truncated), 0);
    // Per hook and interface: loopback's XDP column, and at tc the column
    // of index 0 (no interface given); the policy accepts.
    let hook = |hook, ifindex, packets, bytes, dropped| HookCount {
        hook,
        ifindex,
        packets,
        bytes,
        dropped,
    };
    assert_eq!(
        dp.hook_counts(&[1, 2]).unwrap(),
        vec![
            hook(HOOK_XDP, 1, 16, 6 * 128 + 10 * 28, 13),
            hook(HOOK_TC, 0, 5, 4 * 128 + 50, 5),
        ]
    );
    // Interfaces not asked for are not read: loopback's column is left.
    assert_eq!(
        dp.hook_counts(&[]).unwrap(),
        vec![hook(HOOK_TC, 0, 5, 4 * 128 + 50, 5)]
    );

    // Malformed packets are dropped and counted in stats, not per rule.
    let bad = Frame::ipv4(SRC, DST).ihl(3).udp(1, 9999).build();
    assert!(!passes(&dp, AttachPoint::Xdp, &bad));
    assert_eq!(dp.stats().unwrap().get(Stat::Malformed), 1);
    assert_eq!(dp.counter(4).unwrap().packets, 18);
}

#[test]
#[ignore = "needs root"]
fn logging_is_rate_limited_per_rule() {
    let mut dp = small("logging_is_rate_limited_per_rule");
    dp.set_action(7, KernelVerdict::Drop, true).unwrap();
    dp.set_lite_rule(17, 514, 7).unwrap();
    dp.set_action(8, KernelVerdict::Accept, true).unwrap();
    dp.set_lite_rule(6, 22, 8).unwrap();

    // No rate configured: a LOG rule logs nothing.
    dp.test_run(AttachPoint::Xdp, &udp(514, 0), 0, 3).unwrap();
    assert!(dp.poll_log(100).is_empty());
    assert_eq!(dp.stats().unwrap().get(Stat::LogRateLimited), 3);

    // 1 event/s with a burst of 5: a flood of 2000 packets, which takes far
    // less than a second, yields the burst and at most one refill.
    dp.set_log_rate(7, 1, 5).unwrap();
    let t0 = std::time::Instant::now();
    dp.test_run(AttachPoint::Xdp, &udp(514, 0), 0, 2000)
        .unwrap();
    let elapsed = t0.elapsed();
    let ev = dp.poll_log(10_000);
    let allowed = 5 + elapsed.as_secs() as usize;
    assert!(
        (5..=allowed).contains(&ev.len()),
        "{} events in {elapsed:?}",
        ev.len()
    );
    for e in &ev {
        assert_eq!(e.rule_id, 7);
        assert_eq!(e.verdict, KernelVerdict::Drop);
        assert_eq!(e.hook, AttachPoint::Xdp);
        assert_eq!(e.key.dport, 514);
        assert_eq!(e.key.dst_ip(), Some(DST.into()));
    }
    assert!(ev.windows(2).all(|w| w[0].ts_ns <= w[1].ts_ns));
    let st = dp.stats().unwrap();
    assert_eq!(st.get(Stat::LogEmitted), ev.len() as u64);
    assert_eq!(st.get(Stat::LogRateLimited), 3 + 2000 - ev.len() as u64);

    // Rule 8's bucket is its own: rule 7 being exhausted does not matter.
    dp.set_log_rate(8, 1000, 2).unwrap();
    let tcp = Frame::ipv4(SRC, DST).tcp(1, 22, 0x02).build();
    dp.test_run(AttachPoint::Tc, &tcp, 0, 1).unwrap();
    let ev = dp.poll_log(10);
    assert_eq!(ev.len(), 1);
    assert_eq!((ev[0].rule_id, ev[0].hook), (8, AttachPoint::Tc));
    assert_eq!(ev[0].key.tcp_flags, 0x02);

    // Rate 0 turns logging off again.
    dp.set_log_rate(8, 0, 0).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(5));
    dp.test_run(AttachPoint::Tc, &tcp, 0, 5).unwrap();
    assert!(dp.poll_log(10).is_empty());
}

#[test]
#[ignore = "needs root"]
fn image_slots_swap_by_generation() {
    let mut dp = small("image_slots_swap_by_generation");
    assert_eq!(dp.slot_capacity(), 2 * 4096);
    assert_eq!(dp.generation(), 0);
    assert!(matches!(dp.swap(), Err(Error::NothingToSwap)));

    let a: Vec<u8> = (0..5000u32).map(|i| i as u8).collect();
    let b: Vec<u8> = (0..300u32).map(|i| (i * 7) as u8).collect();
    dp.write_image_unchecked(&a).unwrap();
    assert_eq!(dp.generation(), 0, "writing does not make an image live");
    assert_eq!(dp.swap().unwrap(), 1);
    assert_eq!(dp.read_live_image(a.len()).unwrap(), a);

    dp.write_image_unchecked(&b).unwrap();
    assert_eq!(
        dp.read_live_image(a.len()).unwrap(),
        a,
        "live slot untouched"
    );
    assert_eq!(dp.swap().unwrap(), 2);
    assert_eq!(dp.read_live_image(b.len()).unwrap(), b);

    let too_big = vec![0u8; 2 * 4096 + 1];
    assert!(matches!(
        dp.write_image_unchecked(&too_big),
        Err(Error::ImageTooLarge { .. })
    ));
    assert!(matches!(dp.write_image(&b), Err(Error::BadImage(_))));
    assert_eq!(dp.generation(), 2);
    assert!(matches!(dp.swap(), Err(Error::NothingToSwap)));

    // An image that is not a valid classifier falls back to the interim
    // classifier; packets are still decided.
    dp.set_action(1, KernelVerdict::Drop, false).unwrap();
    dp.set_lite_rule(17, 53, 1).unwrap();
    assert!(!passes(&dp, AttachPoint::Xdp, &udp(53, 0)));
    assert!(passes(&dp, AttachPoint::Xdp, &udp(54, 0)));
    let st = dp.stats().unwrap();
    assert_eq!(
        st.get(Stat::ImageError),
        2,
        "the walker refused the garbage"
    );
    assert_eq!(st.get(Stat::Image), 0);
    assert!(!dp.last_decision().unwrap().unwrap().by_image);
}

/// The per-packet statistics switch (`PARAPET_CFG_STATS_OFF`): off, the
/// packets and image-decided statistics and the per-hook table stay
/// still while every verdict and rule counter stays what it was; on again,
/// they count. Covers the interim classifier and an image, XDP and tc.
#[test]
#[ignore = "needs root"]
fn the_statistics_switch_stops_only_the_per_packet_statistics() {
    let mut dp = small("the_statistics_switch_stops_only_the_per_packet_statistics");
    assert!(dp.packet_stats().unwrap(), "on by default");
    dp.set_action(4, KernelVerdict::Drop, false).unwrap();
    dp.set_lite_rule(17, 9999, 4).unwrap();
    let frames = [udp(9999, 100), udp(80, 0)];
    let hooks = [AttachPoint::Xdp, AttachPoint::Tc];
    // (hook, frame) -> passed, 4 runs each: interim classifier, then image
    let round = |dp: &Dataplane| -> Vec<bool> {
        let mut v = Vec::new();
        for h in hooks {
            for f in &frames {
                v.push(dp.test_run(h, f, 1, 4).unwrap().passed);
            }
        }
        v
    };
    let lite_on = round(&dp);
    assert_eq!(lite_on, vec![false, true, false, true]);
    let st = dp.stats().unwrap();
    assert_eq!(st.get(Stat::Packets), 16);
    let hooks_on = dp.hook_counts(&[1]).unwrap();
    assert_eq!(hooks_on.iter().map(|h| h.packets).sum::<u64>(), 16);

    dp.set_packet_stats(false).unwrap();
    assert!(!dp.packet_stats().unwrap());
    assert_eq!(round(&dp), lite_on, "verdicts do not depend on the switch");
    assert_eq!(dp.stats().unwrap().get(Stat::Packets), 16);
    assert_eq!(dp.hook_counts(&[1]).unwrap(), hooks_on);
    assert_eq!(
        dp.counter(4).unwrap().packets,
        16,
        "rule counters still count"
    );
    assert_eq!(dp.counter(0).unwrap().packets, 16);
    // malformed packets are still counted: errors are not per-packet noise
    let bad = Frame::ipv4(SRC, DST).ihl(3).udp(1, 9999).build();
    assert!(!passes(&dp, AttachPoint::Xdp, &bad));
    assert_eq!(dp.stats().unwrap().get(Stat::Malformed), 1);

    // an image: accept port 9999, drop the rest
    dp.write_image(&common::iptables_image(
        "*filter\n:INPUT DROP [0:0]\n-A INPUT -p udp --dport 9999 -j ACCEPT\nCOMMIT\n",
    ))
    .unwrap();
    dp.swap().unwrap();
    let image_off = round(&dp);
    assert_eq!(image_off, vec![true, false, true, false]);
    assert_eq!(dp.stats().unwrap().get(Stat::Image), 0);
    dp.set_packet_stats(true).unwrap();
    assert_eq!(round(&dp), image_off);
    let st = dp.stats().unwrap();
    assert_eq!(st.get(Stat::Image), 16);
    // the malformed packet came while off: in neither
    assert_eq!(st.get(Stat::Packets), 16 + 16);
    let after: u64 = dp
        .hook_counts(&[1])
        .unwrap()
        .iter()
        .map(|h| h.packets)
        .sum();
    assert_eq!(after, 16 + 16);
}

/// `counter_range` reads what `counter` reads, rule by rule, with one
/// batch lookup per 8,192 rules: across batch edges, from an id other than
/// 0, and cut at `max_rules`; `reset_counters` (batched too) zeroes every
/// rule on every CPU.
#[test]
#[ignore = "needs root"]
fn counter_ranges_read_every_rule_as_single_lookups() {
    let max_rules = 20_000;
    let mut dp = load_dataplane(
        "counter_ranges_read_every_rule_as_single_lookups",
        &LoadOptions {
            max_rules,
            slot_pages: 2,
            debug: true,
        },
    );
    // rules 1, 8191, 8192, 8193 and 20000 count 1..=5 packets of their
    // own destination port; the policy the rest
    let counted = [(1u32, 1u32), (8191, 2), (8192, 3), (8193, 4), (20_000, 5)];
    for (i, &(rule, runs)) in counted.iter().enumerate() {
        let port = 1000 + i as u16;
        dp.set_action(rule, KernelVerdict::Drop, false).unwrap();
        dp.set_lite_rule(17, port, rule).unwrap();
        dp.test_run(AttachPoint::Xdp, &udp(port, 10), 0, runs)
            .unwrap();
    }
    dp.test_run(AttachPoint::Tc, &udp(80, 0), 0, 2).unwrap();
    let single: Vec<Counter> = (0..=max_rules).map(|r| dp.counter(r).unwrap()).collect();
    for &(rule, runs) in &counted {
        assert_eq!(
            single[rule as usize].packets,
            u64::from(runs),
            "rule {rule}"
        );
    }
    assert_eq!(single[0].packets, 2);
    let all = dp.counter_range(0, max_rules as usize + 1).unwrap();
    assert_eq!(all, single);
    let mid = dp.counter_range(8190, 5).unwrap();
    assert_eq!(mid, single[8190..8195]);
    // past max_rules: cut
    let tail = dp.counter_range(19_998, 10).unwrap();
    assert_eq!(tail, single[19_998..]);
    assert!(dp.counter_range(max_rules + 1, 3).unwrap().is_empty());

    dp.reset_counters().unwrap();
    let zeroed = dp.counter_range(0, max_rules as usize + 1).unwrap();
    assert_eq!(zeroed.len(), max_rules as usize + 1);
    assert!(zeroed.iter().all(|c| *c == Counter::default()));
    assert_eq!(dp.counter(8192).unwrap(), Counter::default());
}
