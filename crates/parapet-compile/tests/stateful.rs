//! Stateful conditions (`limit`) in three engines on the same timed packet
//! sequences: the linear engine over the ruleset (the specification, with
//! `StatefulState`), the flattened decision list, and the Rust walker of the
//! compiled image (linear and tree backends, with `ImageState`). Every
//! packet's rule id, verdict and non-terminal rules must agree, and the
//! limits must really limit (some packets pass, some are held back).

use parapet_compile::{compile, Backend, CompileOptions, ImageState, KeyWords, Walker};
use parapet_gen::{packets_for, random_ruleset, with_random_limits, RandomSpec};
use parapet_model::*;

/// A deterministic stream of numbers (no clock, no OS randomness).
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n.max(1)
    }
}

#[test]
fn three_engines_agree_on_timed_sequences() {
    let (mut checked, mut limited) = (0, 0);
    for seed in 0..16u64 {
        let mut rng = Lcg(seed);
        let spec = RandomSpec {
            rules: 10 + (seed as usize * 13) % 60,
            ipv6: seed % 2 == 1,
            ..RandomSpec::default()
        };
        let rs = with_random_limits(random_ruleset(seed, &spec), seed);
        let start = rs.select_chain(None).unwrap();
        let linear = LinearEngine::new(&rs, start).unwrap();
        let list = match flatten(&rs, start) {
            Ok(l) => l,
            Err(e) => panic!("seed {seed}: {e}"),
        };
        let pkts = packets_for(&rs, seed, 60);
        for backend in [Backend::Linear, Backend::Tree] {
            let opts = CompileOptions {
                backend,
                ..CompileOptions::default()
            };
            let (image, _) = compile(&list, &opts).unwrap();
            let walker = Walker::new(image.clone());
            let clock = Clock { ns: 1_000, hz: 250 };
            let mut spec_state = StatefulState::new(clock);
            let mut list_state = StatefulState::new(clock);
            let mut image_state = ImageState::new(&image, clock);
            let mut ns = clock.ns;
            // Bursts of one packet, then a pause: buckets empty and refill.
            for step in 0..600 {
                ns += rng.below(if step % 7 == 0 {
                    400_000_000
                } else {
                    3_000_000
                });
                let p = &pkts[rng.below(pkts.len() as u64) as usize];
                spec_state.set_ns(ns);
                list_state.set_ns(ns);
                image_state.set_ns(ns);
                let want = linear.classify_with(p, &NoSets, &mut spec_state).unwrap();
                let flat = list.classify_stateful(p, &[], &mut list_state);
                let got = walker.decide_stateful(&KeyWords::new(p, 0), &mut image_state);
                assert_eq!(flat, want, "seed {seed} step {step}: list vs linear, {p:?}");
                assert_eq!(
                    got, want,
                    "seed {seed} step {step} {backend:?}: walker vs linear"
                );
                let assumed = linear.classify(p, &NoSets).unwrap();
                limited += (assumed != want) as usize;
                checked += 1;
            }
        }
    }
    assert!(checked >= 16 * 2 * 600);
    // The limits decided something: with every limit assumed to match,
    // some packets would have had another fate.
    assert!(
        limited > 100,
        "only {limited} packets were held back by a limit"
    );
}

#[test]
fn burst_of_five_in_an_hour_then_nothing() {
    // `udp dport 9` limited to 1/hour, burst 5 (`-m limit --limit 1/hour
    // --limit-burst 5`, nft `limit rate 1/hour burst 5 packets`); the
    // kernel's own answer is checked by the dataplane's kernel tests.
    for flavor in [LimitFlavor::Xt, LimitFlavor::Nft] {
        let rs = limited_udp_rule(flavor);
        let start = rs.select_chain(None).unwrap();
        let list = flatten(&rs, start).unwrap();
        let (image, _) = compile(&list, &CompileOptions::default()).unwrap();
        let walker = Walker::new(image.clone());
        let clock = Clock { ns: 5, hz: 250 };
        let mut state = ImageState::new(&image, clock);
        let p = Packet::v4(0x0a00_0001, 0x0a00_0002, 17, 1000, 9);
        let accepted = (0..20u64)
            .filter(|i| {
                state.set_ns(5 + i * 1_000_000);
                walker
                    .decide_stateful(&KeyWords::new(&p, 0), &mut state)
                    .rule_id
                    == 1
            })
            .count();
        assert_eq!(accepted, 5, "{flavor:?}");
    }
}

/// INPUT, policy DROP: rule 1 accepts `udp dport 9` under a 1/hour, burst
/// 5 limit.
fn limited_udp_rule(flavor: LimitFlavor) -> Ruleset {
    let nft = flavor == LimitFlavor::Nft;
    let mut m = Matches::any();
    m.constrain(Field::Proto, IntervalSet::point(17));
    m.constrain(Field::DstPort, IntervalSet::point(9));
    if !nft {
        m.constrain(Field::Family, IntervalSet::point(4));
    }
    let mut r = Rule::new(1, m, Action::Verdict(Verdict::Accept));
    r.limit = Some(Limit {
        rate: 1,
        per: TimeUnit::Hour,
        burst: 5,
        flavor: if nft {
            LimitFlavor::Nft
        } else {
            LimitFlavor::Xt
        },
        over: false,
        object: None,
    });
    let mut rs = parapet_gen::one_chain(vec![r], Verdict::Drop);
    if nft {
        rs.tables[0].family = TableFamily::Inet;
    }
    rs
}

#[test]
fn a_time_window_is_a_row_and_refused_with_another_condition() {
    // A window alone is a time row: the Rust walker opens it as the
    // linear engine does (01:00-02:00 UTC: closed at 00:59:59, open at
    // 01:00:00).
    let window = TimeWindow {
        daytime_start: 3600,
        daytime_stop: 7200,
        ..TimeWindow::default()
    };
    let mut r = Rule::new(1, Matches::any(), Action::Verdict(Verdict::Drop));
    r.time = Some(window.clone());
    let rs = parapet_gen::one_chain(vec![r.clone()], Verdict::Accept);
    let list = flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
    assert!(list.entries[0].time.is_some(), "flatten keeps the window");
    let (image, _) = compile(&list, &CompileOptions::default()).unwrap();
    let walker = Walker::new(image.clone());
    let p = Packet::v4(1, 2, 17, 3, 4);
    for (secs, rule) in [(3599i64, 0u32), (3600, 1), (7200, 1), (7201, 0)] {
        let mut state = ImageState::new(&image, Clock { ns: 0, hz: 250 });
        state.wall_offset_ns = secs * 1_000_000_000;
        let got = walker.decide_stateful(&KeyWords::new(&p, 0), &mut state);
        assert_eq!(got.rule_id, rule, "at {secs} s");
    }
    // Without a wall clock (offset 0, as in the kernel before the loader
    // wrote it) a window is closed.
    let mut state = ImageState::new(&image, Clock { ns: 0, hz: 250 });
    let got = walker.decide_stateful(&KeyWords::new(&p, 0), &mut state);
    assert_eq!(got.rule_id, 0);
    // With a limit too: one row per entry, so refused rather than one of
    // the two dropped.
    r.limit = Some(Limit {
        rate: 1,
        per: TimeUnit::Second,
        burst: 5,
        flavor: LimitFlavor::Xt,
        over: false,
        object: None,
    });
    let rs = parapet_gen::one_chain(vec![r], Verdict::Accept);
    let list = flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
    let e = compile(&list, &CompileOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("rule 1 has a time condition"), "{e}");
}

/// A rule with two stateful conditions (`-m recent --update … -m limit …`
/// and the reverse, `-m limit … -m recent --set`, as in the corpus's
/// `cfg_AG7GN_rmsgw_rules.v4`): flattened into one guard per condition,
/// each with its own stateful row, the Rust walker (both backends) decides
/// every packet of a timed sequence as the linear engine does, and the
/// order matters (reversing it changes the fates).
#[test]
fn two_conditions_in_one_rule_keep_their_order_in_every_engine() {
    let limit = Limit {
        rate: 1,
        per: TimeUnit::Hour,
        burst: 2,
        flavor: LimitFlavor::Xt,
        over: false,
        object: None,
    };
    let udp_to = |port: u128| {
        let mut m = Matches::any();
        m.constrain(Field::Family, IntervalSet::point(4));
        m.constrain(Field::Proto, IntervalSet::point(17));
        m.constrain(Field::DstPort, IntervalSet::point(port));
        m
    };
    let mut set = Rule::new(1, udp_to(9301), Action::Count);
    set.recent = Some(Recent::new("P", RecentCommand::Set));
    let mut update = Rule::new(2, udp_to(9301), Action::Verdict(Verdict::Drop));
    update.recent = Some(Recent {
        seconds: 60,
        hitcount: 2,
        ..Recent::new("P", RecentCommand::Update)
    });
    update.limit = Some(limit.clone());
    update.stateful_order = vec![StatefulKind::Recent, StatefulKind::Limit];
    let mut limited_set = Rule::new(3, udp_to(9302), Action::Verdict(Verdict::Drop));
    limited_set.limit = Some(limit);
    limited_set.recent = Some(Recent::new("Q", RecentCommand::Set));
    limited_set.stateful_order = vec![StatefulKind::Limit, StatefulKind::Recent];
    let mut check = Rule::new(4, udp_to(9303), Action::Verdict(Verdict::Drop));
    check.recent = Some(Recent::new("Q", RecentCommand::Rcheck));
    let rules = vec![set, update, limited_set, check];
    let seq: Vec<Packet> = [
        (2, 9301),
        (2, 9301),
        (2, 9301),
        (2, 9301),
        (3, 9301),
        (3, 9301),
        (2, 9302),
        (4, 9303),
        (3, 9302),
        (4, 9302),
        (4, 9303),
        (3, 9303),
        (2, 9303),
        (5, 9302),
        (5, 9303),
    ]
    .iter()
    .map(|&(h, port)| Packet::v4(0x7f00_0000 | h, 0x7f00_0001, 17, 40000, port))
    .collect();
    let fates = |rules: Vec<Rule>| -> Vec<u32> {
        let rs = parapet_gen::one_chain(rules, Verdict::Accept);
        let linear = LinearEngine::new(&rs, rs.select_chain(None).unwrap()).unwrap();
        let list = flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
        let clock = Clock { ns: 1_000, hz: 250 };
        let mut spec_state = StatefulState::new(clock);
        let want: Vec<Decision> = seq
            .iter()
            .map(|p| linear.classify_with(p, &NoSets, &mut spec_state).unwrap())
            .collect();
        for backend in [Backend::Linear, Backend::Tree] {
            let opts = CompileOptions {
                backend,
                ..CompileOptions::default()
            };
            let (image, _) = compile(&list, &opts).unwrap();
            let walker = Walker::new(image.clone());
            let mut image_state = ImageState::new(&image, clock);
            let mut list_state = StatefulState::new(clock);
            for (i, p) in seq.iter().enumerate() {
                let flat = list.classify_stateful(p, &[], &mut list_state);
                assert_eq!(flat, want[i], "packet {i}: list vs linear");
                let got = walker.decide_stateful(&KeyWords::new(p, 0), &mut image_state);
                assert_eq!(got, want[i], "packet {i} {backend:?}: walker vs linear");
            }
        }
        want.iter().map(|d| d.rule_id).collect()
    };
    // 0: the policy accepted it; 2, 3, 4: dropped by that rule
    let want = [0, 2, 2, 0, 0, 0, 3, 0, 3, 0, 0, 4, 4, 0, 0];
    assert_eq!(fates(rules.clone()), want);
    let mut reversed = rules;
    for r in &mut reversed {
        r.stateful_order.reverse();
    }
    assert_ne!(fates(reversed), want, "the order changes the fates");
}

/// `-m recent --hitcount` above 255 (Linux 6.11 and later accept up to
/// 65,535): the image's row and the BPF ring hold 255, so the compiled
/// engines refuse it by rule rather than count short; 255 compiles.
#[test]
fn a_recent_hitcount_above_255_is_refused_not_clamped() {
    for (hitcount, refused) in [(255u32, false), (256, true), (348, true)] {
        let mut upd = Recent::new("SSH", RecentCommand::Rcheck);
        upd.hitcount = hitcount;
        let mut r = Rule::new(1, Matches::any(), Action::Verdict(Verdict::Drop));
        r.recent = Some(upd);
        let rs = parapet_gen::one_chain(vec![r], Verdict::Accept);
        let list = flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
        match compile(&list, &CompileOptions::default()) {
            Ok(_) => assert!(!refused, "--hitcount {hitcount} compiled"),
            Err(e) => {
                let e = e.to_string();
                assert!(refused, "--hitcount {hitcount}: {e}");
                assert!(
                    e.starts_with(&format!("rule 1 has -m recent --hitcount {hitcount}:")),
                    "{e}"
                );
            }
        }
    }
}
