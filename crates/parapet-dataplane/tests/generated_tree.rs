//! The tree form of generated programs (src/codegen/tree.rs): the
//! compiler's trees emitted as compare-and-branch, checked frame by frame
//! against the linear scan of the decision list (the spec) and against the
//! linear generated program — random pure first-match lists of both
//! families compiled with binary and multi-way cuts, their rule-edge
//! packets and frames the parser decides; ClassBench acl1, fw1 and ipc1
//! 10k with their traces; nf-HiPAC's worst case up to 25,600 rules. Also:
//! the kernel's stack liveness pass runs a few times per load, not once
//! per leaf (counted in its verifier log), and what the tree form cannot
//! do is refused.

mod common;

use common::classbench::classbench;
use common::eligible::{pure, random_pure_cases, RandomCase};
use common::lo::LO;
use common::wire::{frame_of, wire_packet};
use common::Rng;
use parapet_compile::{compile, CompileOptions};
use parapet_dataplane::codegen::{
    generate_tree, ineligible, tree_ineligible, verifier_log, GeneratedXdp,
};
use parapet_dataplane::frame::{parse_frame, Frame};
use parapet_dataplane::ParseStatus;
use parapet_gen::{packets_for, random_ruleset_with_header_fields, worst_case, RandomSpec};
use parapet_model::{flatten, DecisionList, EntryKind, Field, IfName, Verdict};

/// Whether `frame` passes by the spec: not IP passes, what the parser
/// refuses is dropped, the decision list decides the rest.
fn spec_passes(list: &DecisionList, frame: &[u8]) -> bool {
    let (status, key) = parse_frame(frame, frame.len() as u32, LO);
    match status {
        ParseStatus::NotIp => true,
        ParseStatus::Ok => {
            let p = key.to_packet(IfName::new("lo").unwrap()).expect("IP");
            list.classify(&p, &[]).verdict == Verdict::Accept
        }
        _ => false,
    }
}

/// Frames beyond well-formed ones: cut short, a header byte overwritten,
/// VLAN-tagged, fragments, non-IP.
fn odd_frames(rng: &mut Rng, base: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for f in base.iter().take(40) {
        let cut = 14 + rng.below((f.len() - 14) as u64) as usize;
        out.push(f[..cut].to_vec());
        let mut g = f.clone();
        let at = 12 + rng.below(70.min(g.len() as u64 - 12)) as usize;
        g[at] = rng.u8();
        out.push(g);
    }
    let (a, b) = ("10.0.0.1".parse().unwrap(), "192.0.2.7".parse().unwrap());
    for dport in [0u16, 22, 80, 1024, 65535] {
        let tcp = Frame::ipv4(a, b).tcp(40000, dport, 0x12);
        out.push(tcp.clone().vlan(0x8100, 5).build());
        out.push(tcp.clone().ipv4_frag(185, false).build());
        out.push(tcp.clone().ipv4_frag(0, true).build());
    }
    out.push(Frame::non_ip(0x0806).payload(28).build());
    out
}

/// The rules of seed `seed`'s random list: 5 to 154.
fn tree_rules(seed: u64) -> usize {
    5 + (seed as usize * 37) % 150
}

/// Compile options that make multi-way cuts and small leaves likely (so
/// the trees are deep and wide), or the defaults.
fn options(variant: u64) -> CompileOptions {
    match variant % 3 {
        0 => CompileOptions::default(),
        1 => CompileOptions {
            leaf_size: 2,
            spfac: 8.0,
            ..CompileOptions::default()
        },
        _ => CompileOptions {
            leaf_size: 2,
            spfac: 0.0,
            ..CompileOptions::default()
        },
    }
}

#[test]
#[ignore = "needs root"]
fn tree_programs_agree_with_the_spec_and_the_linear_program() {
    parapet_testbed::require_root();
    let mut rng = Rng::new(0x7472_6565);
    let (mut frames_checked, mut dropped, mut lists) = (0usize, 0usize, 0usize);
    let (mut nodes, mut elided, mut implied, mut multi_lists) = (0, 0, 0, 0);
    let (mut common, mut spilled_lists, mut guarded_lists) = (0, 0, 0);
    for RandomCase { seed, rs, list } in random_pure_cases(0..20, tree_rules) {
        let opts = options(seed);
        let (image, stats) = compile(&list, &opts).unwrap();
        assert_eq!(tree_ineligible(&list, &image), None, "seed {seed}");
        let (prog, shape) =
            GeneratedXdp::load_tree(&list, &image).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        let linear = match ineligible(&list) {
            None => Some(GeneratedXdp::load(&list, false).unwrap()),
            Some(_) => None,
        };
        println!("seed {seed}: {} entries, {shape:?}", list.entries.len());
        lists += 1;
        nodes += shape.nodes;
        elided += shape.elided;
        implied += shape.implied;
        common += shape.common;
        spilled_lists += usize::from(shape.on_stack > 0);
        guarded_lists += usize::from(shape.guarded_exits);
        multi_lists +=
            usize::from(opts.spfac > 0.0 && stats.partitions.iter().any(|p| p.nodes > 0));
        let frames: Vec<Vec<u8>> = packets_for(&rs, seed, 300)
            .into_iter()
            .map(|p| frame_of(&wire_packet(p)))
            .collect();
        let odd = odd_frames(&mut rng, &frames);
        for (i, f) in frames.iter().chain(&odd).enumerate() {
            let want = spec_passes(&list, f);
            let got = prog.test_run(f, LO, 1).unwrap().passed;
            assert_eq!(
                got, want,
                "seed {seed} frame {i}: tree program against the spec: {f:02x?}"
            );
            if let Some(l) = &linear {
                assert_eq!(
                    l.test_run(f, LO, 1).unwrap().passed,
                    want,
                    "seed {seed} frame {i}: linear"
                );
            }
            frames_checked += 1;
            dropped += usize::from(!want);
        }
    }
    println!(
        "{lists} lists, {frames_checked} frames, {dropped} dropped; {nodes} nodes, \
         {elided} candidates and {implied} comparisons left out by the path, \
         {common} made once at a root; {spilled_lists} lists with fields on the stack, \
         {guarded_lists} with guarded exits"
    );
    // both homes of a field are tried, registers and the stack past them,
    // and the stack's fields read in the leaves (the guarded exits) or not
    assert!(
        guarded_lists >= 3 && guarded_lists < spilled_lists,
        "{spilled_lists} lists with fields on the stack, {guarded_lists} with guarded exits"
    );
    assert!(common > 0, "no comparison made once at a root");
    assert!(
        lists >= 20 && multi_lists >= 5,
        "{lists} lists, {multi_lists} with cuts"
    );
    assert!(nodes > 200, "{nodes} nodes: the trees were not trees");
    // (the compiler's leaves hold only entries that meet their region, so
    // candidates are rarely left out; comparisons the path decided are)
    assert!(implied > 100, "the path's regions left nothing out");
    assert!(
        dropped > frames_checked / 10 && dropped < frames_checked * 9 / 10,
        "{dropped} of {frames_checked} frames dropped"
    );
}

#[test]
#[ignore = "needs root"]
fn classbench_10k_tree_programs_agree_with_the_spec() {
    parapet_testbed::require_root();
    for name in ["acl1_10k", "fw1_10k", "ipc1_10k"] {
        let Some((list, packets)) = classbench(name) else {
            continue;
        };
        let (image, _) = compile(&list, &CompileOptions::default()).unwrap();
        let started = std::time::Instant::now();
        generate_tree(&list, &image).unwrap();
        let generated = started.elapsed();
        let (prog, shape) = GeneratedXdp::load_tree(&list, &image).unwrap();
        let load = started.elapsed() - 2 * generated;
        let (mut checked, mut dropped) = (0, 0);
        // every trace packet is checked: 4,000 a set at most, spread over the trace
        let step = (packets.len() / 4000).max(1);
        for p in packets.iter().step_by(step) {
            let p = wire_packet(p.clone());
            let want = list.classify(&p, &[]).verdict == Verdict::Accept;
            let f = frame_of(&p);
            assert_eq!(
                prog.test_run(&f, LO, 1).unwrap().passed,
                want,
                "{name}: {p:?}"
            );
            checked += 1;
            dropped += usize::from(!want);
        }
        println!(
            "{name}: {} entries, {shape:?}, {} verified, generated in {generated:?}, loaded in {load:?}; {checked} packets, {dropped} dropped",
            list.entries.len(),
            prog.verified_insns().unwrap()
        );
        assert!(checked >= 1000 && dropped > checked / 20 && dropped < checked * 19 / 20);
    }
}

/// The worst-case sizes tried: `PARAPET_TREE_WORST` (comma-separated), or
/// 25, 256, 2,560 and 25,600 (which loads in seconds since the rules'
/// shared constraints are checked once at the root: before, it did not
/// load in 20 minutes, docs/dataplane.md, "The tree form").
fn worst_case_sizes() -> Vec<usize> {
    match std::env::var("PARAPET_TREE_WORST") {
        Ok(v) => v.split(',').map(|n| n.trim().parse().unwrap()).collect(),
        Err(_) => vec![25, 256, 2560, 25600],
    }
}

#[test]
#[ignore = "needs root"]
fn the_worst_case_up_to_25600_rules_verifies_and_decides() {
    parapet_testbed::require_root();
    for n in worst_case_sizes() {
        let rs = worst_case(n);
        let list = flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
        let (image, _) = compile(&list, &CompileOptions::default()).unwrap();
        let started = std::time::Instant::now();
        generate_tree(&list, &image).unwrap();
        let generated = started.elapsed();
        let (prog, shape) = GeneratedXdp::load_tree(&list, &image).unwrap();
        let load = started.elapsed() - 2 * generated;
        // the probe passes every rule to the last; packets near it too
        let probe = parapet_gen::worst_case_packet();
        let mut packets = vec![probe.clone()];
        for d in [0u16, 1, 2, 100] {
            let mut p = probe.clone();
            p.dport = p.dport.wrapping_sub(d);
            packets.push(p);
            let mut p = probe.clone();
            p.sport = p.sport.wrapping_add(d);
            packets.push(p);
        }
        for p in packets {
            let p = wire_packet(p);
            let want = list.classify(&p, &[]).verdict == Verdict::Accept;
            assert_eq!(
                prog.test_run(&frame_of(&p), LO, 1).unwrap().passed,
                want,
                "{n}: {p:?}"
            );
        }
        println!(
            "worst case {n}: {shape:?}, {} verified, generated in {generated:?}, loaded in {load:?}",
            prog.verified_insns().unwrap()
        );
    }
}

#[test]
fn what_the_tree_form_cannot_do_is_refused() {
    let spec = RandomSpec {
        rules: 60,
        ..RandomSpec::default()
    };
    let rs = random_ruleset_with_header_fields(5, &spec);
    let list = pure(flatten(&rs, rs.select_chain(None).unwrap()).unwrap());
    let (image, _) = compile(&list, &CompileOptions::default()).unwrap();
    assert_eq!(tree_ineligible(&list, &image), None);
    assert!(generate_tree(&list, &image).is_ok());
    let mut counter = list.clone();
    counter.entries[0].kind = EntryKind::Count;
    let (counter_image, _) = compile(&counter, &CompileOptions::default()).unwrap();
    assert!(tree_ineligible(&counter, &counter_image)
        .unwrap()
        .contains("first-match"));
    let mut shorter = list.clone();
    shorter.entries.pop();
    assert!(tree_ineligible(&shorter, &image)
        .unwrap()
        .contains("not this list"));
    let mut iface = list.clone();
    iface.entries[0]
        .matches
        .constrain(Field::InIface, parapet_model::IntervalSet::point(1));
    assert!(generate_tree(&iface, &image).is_err());
}

/// The most stack liveness passes a tree program's load may take. On
/// kernel 6.17+ the verifier reruns the pass (`bpf_update_live_stack`)
/// over the whole program at the end of each path that read a stack
/// slot at an instruction where the slot was not yet known live, or
/// wrote one at an instruction not seen before (docs/dataplane.md, "The
/// tree form"). With the fields in registers, the best entry in a
/// register and the rest of the stack's reads kept live, a program
/// takes 6–30 passes whatever its size; with the fields and the best
/// entry on the stack it took one per leaf candidate (262 for the
/// worst case at 256 rules, 2,718 for a random list of 2,684 checks),
/// and its load grew with the square of its size.
const MAX_LIVENESS_PASSES: usize = 40;

/// The passes of the stack liveness analysis the kernel ran to load
/// `prog` (its level-2 log prints a line at the end of each).
fn liveness_passes(prog: &[[u8; 8]]) -> usize {
    let log = verifier_log(prog, 2).unwrap();
    assert!(log.contains("processed"), "no verifier log: {log:.200}");
    log.lines()
        .filter(|l| l.contains("live stack update done"))
        .count()
}

#[test]
#[ignore = "needs root"]
fn the_verifier_recomputes_stack_liveness_a_few_times_not_once_per_leaf() {
    parapet_testbed::require_root();
    let mut programs = Vec::new();
    let rs = worst_case(256);
    let list = flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
    let (image, _) = compile(&list, &CompileOptions::default()).unwrap();
    programs.push((
        "worst case 256".to_string(),
        generate_tree(&list, &image).unwrap(),
    ));
    for RandomCase { seed, list, .. } in random_pure_cases(0..20, tree_rules) {
        let (image, _) = compile(&list, &options(seed)).unwrap();
        programs.push((
            format!("seed {seed}"),
            generate_tree(&list, &image).unwrap(),
        ));
    }
    let (mut most, mut spilled_checks, mut any_pass) = (0, 0, false);
    for (name, (prog, shape)) in &programs {
        let passes = liveness_passes(prog);
        println!("{name}: {passes} passes, {shape:?}");
        any_pass |= passes > 0;
        assert!(
            passes <= MAX_LIVENESS_PASSES,
            "{name}: {passes} stack liveness passes for {} leaves, {} checks",
            shape.leaves,
            shape.checks
        );
        most = most.max(shape.checks);
        if shape.on_stack > 0 {
            spilled_checks = spilled_checks.max(shape.checks);
        }
    }
    if !any_pass {
        eprintln!("skipped: this kernel's verifier has no stack liveness pass (before 6.17)");
        return;
    }
    // the bound means something: lists with far more checks than passes,
    // some with fields left on the stack
    assert!(most > 2000, "at most {most} checks");
    assert!(
        spilled_checks > 300,
        "fields on the stack in lists of at most {spilled_checks} checks"
    );
}
