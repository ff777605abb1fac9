//! The generated program as parapetd attaches it (src/codegen/attached.rs,
//! src/xdp_engine.rs): loaded against the main program's maps, it must
//! decide random eligible lists frame by frame as the linear engine does
//! (`DecisionList::classify` after the Rust parser), count every rule in
//! the main program's per-rule counters under the rule's id (read back
//! with `Dataplane::counter`, the path `parapet counters` takes), the
//! packets in its statistics and in the XDP row of its hook statistics
//! (packets, drops). Also: which engine `choose` picks, and that the
//! verifier takes the longest list `--xdp-engine generated` may ask for.

mod common;

use std::collections::HashMap;

use common::eligible::{eligible, random_cases, RandomCase};
use common::lo::{dp_on_lo, LO};
use common::wire::{frame_of, wire_packet};
use common::Rng;
use parapet_dataplane::codegen::{choose, rule_jumps, EngineWant, XdpEngine, AUTO_MAX_JUMPS};
use parapet_dataplane::frame::parse_frame;
use parapet_dataplane::{ParseStatus, Stat};
use parapet_gen::{packets_for, worst_case};
use parapet_model::{flatten, DecisionList, IfName, Verdict};

/// The spec's fate of `frame`: `(passes, Some((rule ids counted, L3
/// length)) when the rules decided it, whether it is not IP)`.
fn spec(list: &DecisionList, frame: &[u8]) -> (bool, Option<(Vec<u32>, u64)>, bool) {
    let (status, key) = parse_frame(frame, frame.len() as u32, LO);
    match status {
        ParseStatus::NotIp => (true, None, true),
        ParseStatus::Ok => {
            let p = key.to_packet(IfName::new("lo").unwrap()).expect("IP");
            let d = list.classify(&p, &[]);
            let ids = std::iter::once(d.rule_id).chain(d.nonterminal).collect();
            (
                d.verdict == Verdict::Accept,
                Some((ids, u64::from(p.len))),
                false,
            )
        }
        _ => (false, None, false),
    }
}

/// The hook statistics' XDP row in loopback's column.
fn xdp_row(dp: &parapet_dataplane::Dataplane) -> parapet_dataplane::HookCount {
    dp.hook_counts(&[LO])
        .unwrap()
        .into_iter()
        .find(|h| h.hook == 1 && h.ifindex == LO)
        .unwrap_or_default()
}

#[test]
#[ignore = "needs root"]
fn the_attached_program_decides_and_counts_as_the_linear_engine() {
    let mut dp = dp_on_lo("the_attached_program_decides_and_counts_as_the_linear_engine");
    dp.set_packet_stats(true).unwrap();
    let mut rng = Rng::new(0x6174_7461);
    let (mut frames_run, mut counted_rules, mut dropped, mut lists) = (0usize, 0, 0, 0);
    for RandomCase { seed, rs, list } in
        random_cases(0..16, |s| 5 + (s as usize * 17) % 90, eligible)
    {
        let prog = dp
            .load_xdp_generated(&list)
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        dp.reset_counters().unwrap();
        let before = dp.stats().unwrap();
        let hook_before = xdp_row(&dp);
        let mut frames: Vec<Vec<u8>> = packets_for(&rs, seed, 150)
            .into_iter()
            .map(|p| frame_of(&wire_packet(p)))
            .collect();
        // cut short (the parser drops them) and a frame that is not IP
        for i in 0..30 {
            let f = &frames[i % frames.len()];
            let cut = 14 + rng.below((f.len() - 14) as u64) as usize;
            frames.push(f[..cut].to_vec());
        }
        let mut arp = frames[0][..42.min(frames[0].len())].to_vec();
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        frames.push(arp);
        let mut want: HashMap<u32, (u64, u64)> = HashMap::new();
        let (mut not_ip, mut list_dropped, mut decided_bytes) = (0, 0, 0);
        for (i, f) in frames.iter().enumerate() {
            let (passes, counted, is_not_ip) = spec(&list, f);
            let got = prog.test_run(f, LO, 1).unwrap().passed;
            assert_eq!(got, passes, "seed {seed} frame {i}: {f:02x?}");
            if let Some((ids, len)) = counted {
                decided_bytes += len;
                for id in ids {
                    let c = want.entry(id).or_default();
                    *c = (c.0 + 1, c.1 + len);
                }
            }
            not_ip += u64::from(is_not_ip);
            list_dropped += u64::from(!passes);
            dropped += usize::from(!passes);
        }
        // every rule id of the list, and the policy's 0, read as `parapet
        // counters` reads them
        let mut got: HashMap<u32, (u64, u64)> = HashMap::new();
        for id in list.entries.iter().map(|e| e.rule_id).chain([0]) {
            let c = dp.counter(id).unwrap();
            if c.packets > 0 {
                got.insert(id, (c.packets, c.bytes));
            }
        }
        assert_eq!(got, want, "seed {seed}: the counters by rule id");
        let after = dp.stats().unwrap();
        let delta = |s: Stat| after.get(s) - before.get(s);
        assert_eq!(delta(Stat::Packets), frames.len() as u64, "seed {seed}");
        assert_eq!(delta(Stat::NotIp), not_ip, "seed {seed}");
        // the XDP row of the hook statistics, loopback's column
        let hook = xdp_row(&dp);
        assert_eq!(hook.packets - hook_before.packets, frames.len() as u64);
        assert_eq!(hook.dropped - hook_before.dropped, list_dropped);
        assert!(
            hook.bytes - hook_before.bytes >= decided_bytes,
            "seed {seed}"
        );
        counted_rules += got.len();
        frames_run += frames.len();
        lists += 1;
    }
    // with the statistics switched off the packets are not counted
    dp.set_packet_stats(false).unwrap();
    let rs = worst_case(3);
    let list = flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
    let prog = dp.load_xdp_generated(&list).unwrap();
    let before = dp.stats().unwrap().get(Stat::Packets);
    let probe = frame_of(&parapet_gen::worst_case_packet());
    prog.test_run(&probe, LO, 5).unwrap();
    assert_eq!(dp.stats().unwrap().get(Stat::Packets), before);
    // the longest eligible list loads as the attached program too
    let rs = worst_case(parapet_dataplane::codegen::MAX_BRANCHES / 9 - 1);
    let worst = flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
    assert_eq!(parapet_dataplane::codegen::ineligible(&worst), None);
    let prog = dp.load_xdp_generated(&worst).unwrap();
    assert!(prog.test_run(&probe, LO, 1).unwrap().passed);
    assert!(
        counted_rules > 80,
        "{counted_rules} rules counted something"
    );
    assert!(
        dropped > frames_run / 10 && dropped < frames_run * 9 / 10,
        "{dropped} of {frames_run} dropped"
    );
    println!(
        "{lists} lists, {frames_run} frames, {dropped} dropped, {counted_rules} rules counted"
    );
}

/// `auto` takes the generated program while the rules' comparisons stay
/// within AUTO_MAX_JUMPS (nf-HiPAC's worst case: eight a rule), the
/// walker beyond; asked for, each is taken when it can be.
#[test]
fn auto_picks_the_generated_program_for_short_lists_only() {
    let list = |n: usize| {
        let rs = worst_case(n);
        flatten(&rs, rs.select_chain(None).unwrap()).unwrap()
    };
    let (one, quarter, long) = (list(1), list(25), list(200));
    assert!(rule_jumps(&quarter) <= AUTO_MAX_JUMPS);
    assert!(rule_jumps(&long) > AUTO_MAX_JUMPS);
    assert_eq!(choose(&one, EngineWant::Auto).engine, XdpEngine::Generated);
    assert_eq!(
        choose(&quarter, EngineWant::Auto).engine,
        XdpEngine::Generated
    );
    let c = choose(&long, EngineWant::Auto);
    assert_eq!(c.engine, XdpEngine::Walker);
    assert!(c.reason.contains("comparisons"), "{}", c.reason);
    assert_eq!(
        choose(&long, EngineWant::Generated).engine,
        XdpEngine::Generated
    );
    assert_eq!(choose(&one, EngineWant::Walker).engine, XdpEngine::Walker);
    // the crossing, as AUTO_MAX_JUMPS places it: about 64 worst-case rules
    // of eight comparisons (the list's own entries add a few)
    let last = (1..200)
        .take_while(|&n| choose(&list(n), EngineWant::Auto).engine == XdpEngine::Generated)
        .last()
        .unwrap();
    assert!((56..=64).contains(&last), "{last}");
}
