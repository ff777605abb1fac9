//! The tree form as parapetd would attach it (src/codegen/tree/counted.rs,
//! `Dataplane::load_xdp_generated_tree`): loaded against the main
//! program's maps, it must decide random pure first-match lists and
//! nf-HiPAC's worst case frame by frame as the linear engine does
//! (`DecisionList::classify` after the Rust parser), and count exactly as
//! the attached linear program counts the same frames: every deciding
//! rule under its rule id in the main program's per-rule counters (read
//! with `Dataplane::counter`, the path `parapet counters` takes), the
//! policy under 0, the packets and non-IP frames in its statistics, the
//! XDP row of its hook statistics (packets, bytes, drops).

mod common;

use common::counted::{frames_of, run_counted, spec};
use common::eligible::{random_pure_cases, RandomCase};
use common::lo::{dp_on_lo, dp_on_lo_counting, LO};
use common::wire::{frame_of, wire_packet};
use common::Rng;
use parapet_compile::{compile, CompileOptions};
use parapet_dataplane::codegen::{
    choose_with_image, generate_tree_attached, ineligible, tree_ineligible, verifier_log,
    EngineWant, XdpEngine,
};
use parapet_dataplane::{Dataplane, Stat};
use parapet_gen::{packets_for, worst_case};
use parapet_model::{flatten, DecisionList, Verdict};

/// Checks the attached tree program of `list` (compiled with `opts`)
/// against the spec on `frames`, and against the attached linear program
/// when the list is short enough for it; returns the rules counted and
/// the frames dropped.
fn check(
    dp: &mut Dataplane,
    what: &str,
    list: &DecisionList,
    frames: &[Vec<u8>],
) -> (usize, usize) {
    check_with(dp, what, list, frames, &CompileOptions::default())
}

fn check_with(
    dp: &mut Dataplane,
    what: &str,
    list: &DecisionList,
    frames: &[Vec<u8>],
    opts: &CompileOptions,
) -> (usize, usize) {
    let (image, _) = compile(list, opts).unwrap();
    assert_eq!(tree_ineligible(list, &image), None, "{what}");
    let (tree, shape) = dp
        .load_xdp_generated_tree(list, &image)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let by_tree = run_counted(dp, list, frames, &|f| {
        tree.test_run(f, LO, 1).unwrap().passed
    });
    let (passed, rules) = spec(list, frames);
    assert_eq!(by_tree.passed, passed, "{what}: verdicts ({shape:?})");
    assert_eq!(by_tree.rules, rules, "{what}: the counters by rule id");
    // the linear program takes lists up to MAX_ENTRIES
    if ineligible(list).is_none() {
        let linear = dp.load_xdp_generated(list).unwrap();
        let by_linear = run_counted(dp, list, frames, &|f| {
            linear.test_run(f, LO, 1).unwrap().passed
        });
        assert_eq!(by_tree, by_linear, "{what}: as the attached linear program");
    }
    assert_eq!(by_tree.packets, frames.len() as u64, "{what}");
    let dropped = passed.iter().filter(|&&p| !p).count();
    assert_eq!(by_tree.hook.0, frames.len() as u64, "{what}");
    assert_eq!(by_tree.hook.2, dropped as u64, "{what}");
    (rules.len(), dropped)
}

#[test]
#[ignore = "needs root"]
fn the_attached_tree_program_decides_and_counts_as_the_linear_engine() {
    let mut dp = dp_on_lo("the_attached_tree_program_decides_and_counts_as_the_linear_engine");
    dp.set_packet_stats(true).unwrap();
    let mut rng = Rng::new(0x7472_6361);
    let (mut counted_rules, mut dropped, mut frames_run) = (0, 0, 0);
    for RandomCase { seed, rs, list } in random_pure_cases(0..12, |s| 5 + (s as usize * 37) % 150) {
        // small leaves and multi-way cuts too: deep, wide trees
        let opts = match seed % 2 {
            0 => CompileOptions::default(),
            _ => CompileOptions {
                leaf_size: 2,
                spfac: 8.0,
                ..CompileOptions::default()
            },
        };
        let frames = frames_of(&mut rng, packets_for(&rs, seed, 150));
        let (r, d) = check_with(&mut dp, &format!("seed {seed}"), &list, &frames, &opts);
        counted_rules += r;
        dropped += d;
        frames_run += frames.len();
    }
    assert!(counted_rules > 80, "{counted_rules} rules counted");
    assert!(
        dropped > frames_run / 10 && dropped < frames_run * 9 / 10,
        "{dropped} of {frames_run} dropped"
    );
    // nf-HiPAC's worst case past AUTO_MAX_JUMPS: the probe passes every
    // rule to the last, its neighbours stop at earlier ones or the policy
    let rs = worst_case(2560);
    let list = flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
    let probe = parapet_gen::worst_case_packet();
    let mut packets = vec![probe.clone()];
    for d in [1u16, 2, 100, 2000] {
        let mut p = probe.clone();
        p.dport = p.dport.wrapping_sub(d);
        packets.push(p);
        let mut p = probe.clone();
        p.sport = p.sport.wrapping_add(d);
        packets.push(p);
    }
    let frames = frames_of(&mut rng, packets);
    let (r, d) = check(&mut dp, "worst case 2560", &list, &frames);
    assert!(r >= 2 && d > 0, "{r} rules counted, {d} dropped");
    // with the statistics switched off the packets are not counted
    dp.set_packet_stats(false).unwrap();
    let (image, _) = compile(&list, &CompileOptions::default()).unwrap();
    let (tree, _) = dp.load_xdp_generated_tree(&list, &image).unwrap();
    let before = dp.stats().unwrap().get(Stat::Packets);
    tree.test_run(&frame_of(&wire_packet(probe)), LO, 5)
        .unwrap();
    assert_eq!(dp.stats().unwrap().get(Stat::Packets), before);
    println!("{frames_run} random frames, {dropped} dropped, {counted_rules} rules counted");
}

/// The counting costs the largest list a few instructions per decision:
/// nf-HiPAC's worst case at 25,600 rules still loads attached, and its
/// probe is decided (counted under the last rule's id) as the spec says.
#[test]
#[ignore = "needs root"]
fn the_attached_tree_program_loads_for_25600_worst_case_rules() {
    let test = "the_attached_tree_program_loads_for_25600_worst_case_rules";
    // counters for every rule id of the list
    let mut dp = dp_on_lo_counting(test, 32_767);
    let rs = worst_case(25_600);
    let list = flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
    let (image, _) = compile(&list, &CompileOptions::default()).unwrap();
    let started = std::time::Instant::now();
    let (tree, shape) = dp.load_xdp_generated_tree(&list, &image).unwrap();
    let load = started.elapsed();
    println!("loaded in {load:?}");
    let probe = wire_packet(parapet_gen::worst_case_packet());
    let d = list.classify(&probe, &[]);
    dp.reset_counters().unwrap();
    let passed = tree.test_run(&frame_of(&probe), LO, 3).unwrap().passed;
    assert_eq!(passed, d.verdict == Verdict::Accept);
    let c = dp.counter(d.rule_id).unwrap();
    assert_eq!((c.packets, c.bytes), (3, 3 * u64::from(probe.len)));
    println!(
        "worst case 25600 attached: {} instructions, {} verified, loaded in {load:?} \
         (compile not counted; measured while other work ran)",
        shape.insns,
        tree.verified_insns().unwrap()
    );
}

/// The counted exits keep the tree form's load near linear: the kernel's
/// stack liveness pass (6.17+) reruns a few times per load, not once per
/// leaf (a decision that read the stack, or wrote it, at its own
/// instruction would rerun it once per leaf: generated_tree.rs).
#[test]
#[ignore = "needs root"]
fn the_attached_tree_program_reruns_stack_liveness_a_few_times() {
    let dp = dp_on_lo("the_attached_tree_program_reruns_stack_liveness_a_few_times");
    let mut lists = Vec::new();
    let rs = worst_case(256);
    lists.push(flatten(&rs, rs.select_chain(None).unwrap()).unwrap());
    lists.extend(random_pure_cases([4, 5, 7, 8], |_| 150).map(|c| c.list));
    let (mut checks, mut any_pass) = (0, false);
    for (i, list) in lists.iter().enumerate() {
        let (image, _) = compile(list, &CompileOptions::default()).unwrap();
        let (prog, shape) = generate_tree_attached(list, &image, &dp.codegen_maps()).unwrap();
        let log = verifier_log(&prog, 2).unwrap();
        assert!(log.contains("processed"), "no verifier log: {log:.200}");
        let passes = log
            .lines()
            .filter(|l| l.contains("live stack update done"))
            .count();
        println!("list {i}: {passes} passes, {} checks", shape.checks);
        any_pass |= passes > 0;
        assert!(passes <= 16, "list {i}: {passes} passes, {shape:?}");
        checks += shape.checks;
    }
    if !any_pass {
        eprintln!("skipped: this kernel's verifier has no stack liveness pass (before 6.17)");
        return;
    }
    assert!(checks > 500, "{checks} checks");
}

/// `auto` with the image: the straight-line program up to its crossing,
/// the tree form past it (and past the linear program's entries), the
/// walker for what neither takes; asked for, the tree form whenever the
/// list and image are eligible.
#[test]
fn auto_picks_the_tree_form_past_the_linear_crossing() {
    let compiled = |list: DecisionList| {
        let (image, _) = compile(&list, &CompileOptions::default()).unwrap();
        (list, image)
    };
    let worst = |n: usize| {
        let rs = worst_case(n);
        compiled(flatten(&rs, rs.select_chain(None).unwrap()).unwrap())
    };
    let pick =
        |(l, i): &(DecisionList, parapet_image::Image), want| choose_with_image(l, Some(i), want);
    let (short, long, longest) = (worst(25), worst(200), worst(2560));
    assert_eq!(pick(&short, EngineWant::Auto).engine, XdpEngine::Generated);
    for l in [&long, &longest] {
        let c = pick(l, EngineWant::Auto);
        assert_eq!(c.engine, XdpEngine::GeneratedTree, "{}", c.reason);
        assert_eq!(c.engine.name(), "generated-tree");
    }
    assert_eq!(
        pick(&short, EngineWant::GeneratedTree).engine,
        XdpEngine::GeneratedTree
    );
    assert_eq!(pick(&long, EngineWant::Walker).engine, XdpEngine::Walker);
    assert_eq!(
        pick(&long, EngineWant::Generated).engine,
        XdpEngine::Generated
    );
    // without the image, or with another list's, the walker
    let c = choose_with_image(&long.0, None, EngineWant::Auto);
    assert_eq!(c.engine, XdpEngine::Walker);
    assert!(c.reason.contains("no compiled image"), "{}", c.reason);
    let c = choose_with_image(&long.0, Some(&short.1), EngineWant::Auto);
    assert_eq!(c.engine, XdpEngine::Walker, "{}", c.reason);
    // not pure first-match (a counter entry): the walker under auto
    let mut counted = long.0.clone();
    counted.entries[0].kind = parapet_model::EntryKind::Count;
    let c = pick(&compiled(counted), EngineWant::Auto);
    assert_eq!(c.engine, XdpEngine::Walker, "{}", c.reason);
    assert!(c.reason.contains("tree form"), "{}", c.reason);
}
