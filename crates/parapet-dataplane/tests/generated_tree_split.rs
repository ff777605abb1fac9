//! The tree form split over programs entered by tail calls
//! (src/codegen/tree/split.rs): random pure first-match lists forced into
//! several programs by a small budget, and ClassBench acl1, fw1 and ipc1
//! at 100k rules (more than one program holds), attached on the main
//! program's maps, must decide every frame as the linear engine does
//! (`DecisionList::classify` after the Rust parser) and count exactly as
//! the one-program tree form and the spec count: the deciding rule under
//! its rule id, the packets and non-IP statistics, the XDP hook row.

mod common;

use common::classbench::classbench;
use common::counted::{frames_of, run_counted, spec};
use common::eligible::{pure, random_pure_cases, RandomCase};
use common::lo::{dp_on_lo, dp_on_lo_counting, LO};
use common::wire::{frame_of, wire_packet};
use common::Rng;
use parapet_compile::{compile, CompileOptions};
use parapet_dataplane::codegen::{MAX_TREE_PROGRAMS, TREE_PROGRAM_BUDGET};
use parapet_dataplane::{Dataplane, LoadOptions};
use parapet_dataplane::{EngineWant, XdpEngine};
use parapet_gen::{packets_for, random_ruleset_with_header_fields, worst_case, RandomSpec};
use parapet_model::{flatten, DecisionList};

/// Loads `list`'s tree form whole and split over programs of at most
/// `budget` instructions, and checks the split one against the spec and
/// the whole one on `frames`; returns the split's programs.
fn check_split(
    dp: &mut Dataplane,
    what: &str,
    list: &DecisionList,
    frames: &[Vec<u8>],
    opts: &CompileOptions,
    budget: usize,
) -> usize {
    let (image, _) = compile(list, opts).unwrap();
    let (whole, whole_shape) = dp.load_xdp_generated_tree(list, &image).unwrap();
    assert_eq!(whole_shape.programs, 1, "{what}");
    let (split, shape) = dp
        .load_xdp_generated_tree_within(list, &image, budget)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let by_split = run_counted(dp, list, frames, &|f| {
        split.test_run(f, LO, 1).unwrap().passed
    });
    let (passed, rules) = spec(list, frames);
    assert_eq!(by_split.passed, passed, "{what}: verdicts ({shape:?})");
    assert_eq!(by_split.rules, rules, "{what}: the counters by rule id");
    let by_whole = run_counted(dp, list, frames, &|f| {
        whole.test_run(f, LO, 1).unwrap().passed
    });
    assert_eq!(by_split, by_whole, "{what}: as the one-program tree form");
    assert_eq!(by_split.packets, frames.len() as u64, "{what}");
    assert_eq!(by_split.hook.0, frames.len() as u64, "{what}");
    shape.programs
}

#[test]
#[ignore = "needs root"]
fn split_tree_programs_decide_and_count_as_the_linear_engine() {
    let mut dp = dp_on_lo("split_tree_programs_decide_and_count_as_the_linear_engine");
    dp.set_packet_stats(true).unwrap();
    let mut rng = Rng::new(0x7370_6c69);
    let (mut frames_run, mut most_programs, mut lists_split) = (0, 0, 0);
    for RandomCase { seed, rs, list } in random_pure_cases(0..12, |s| 40 + (s as usize * 41) % 140)
    {
        let opts = match seed % 2 {
            0 => CompileOptions::default(),
            _ => CompileOptions {
                leaf_size: 2,
                spfac: 8.0,
                ..CompileOptions::default()
            },
        };
        let (image, _) = compile(&list, &opts).unwrap();
        let whole = dp.load_xdp_generated_tree(&list, &image).unwrap().1;
        // programs of a third to a sixth of the whole: 2 and more
        let budget = whole.insns / (3 + seed as usize % 4);
        let frames = frames_of(&mut rng, packets_for(&rs, seed, 150));
        let what = format!(
            "seed {seed} ({} entries, budget {budget})",
            list.entries.len()
        );
        let programs = match dp.load_xdp_generated_tree_within(&list, &image, budget) {
            Err(e) if e.to_string().contains("more than the") => {
                // more programs than the tail calls allow: refused, not loaded
                println!("{what}: refused: {e}");
                continue;
            }
            _ => check_split(&mut dp, &what, &list, &frames, &opts, budget),
        };
        println!("{what}: {programs} programs, {} frames", frames.len());
        lists_split += usize::from(programs > 1);
        most_programs = most_programs.max(programs);
        frames_run += frames.len();
    }
    assert!(lists_split >= 8, "{lists_split} lists split");
    assert!(most_programs >= 4, "at most {most_programs} programs");
    // nf-HiPAC's worst case: one partition, cut into subtrees; the probe
    // and its neighbours
    let rs = worst_case(2560);
    let list = flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
    let probe = parapet_gen::worst_case_packet();
    let mut packets = vec![probe.clone()];
    for d in [1u16, 2, 100, 2000] {
        let mut p = probe.clone();
        p.dport = p.dport.wrapping_sub(d);
        packets.push(p);
    }
    let frames = frames_of(&mut rng, packets);
    let opts = CompileOptions::default();
    let programs = check_split(&mut dp, "worst case 2560", &list, &frames, &opts, 8_000);
    assert!(programs > 2, "{programs} programs");
    println!("{frames_run} random frames; at most {most_programs} programs");
}

/// A budget that needs more programs than the tail calls allow is refused
/// before anything is loaded.
#[test]
#[ignore = "needs root"]
fn more_programs_than_the_tail_calls_allow_is_refused() {
    let dp = dp_on_lo("more_programs_than_the_tail_calls_allow_is_refused");
    let rs = random_ruleset_with_header_fields(
        3,
        &RandomSpec {
            rules: 150,
            ..RandomSpec::default()
        },
    );
    let list = pure(flatten(&rs, rs.select_chain(None).unwrap()).unwrap());
    let opts = CompileOptions {
        leaf_size: 2,
        ..CompileOptions::default()
    };
    let (image, _) = compile(&list, &opts).unwrap();
    let e = dp
        .load_xdp_generated_tree_within(&list, &image, 1)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&format!("more than the {MAX_TREE_PROGRAMS}")),
        "{e}"
    );
}

/// ClassBench at 100k rules: more than one program holds (acl1 100k is
/// 1.9 million instructions), so split; every trace packet sampled must
/// be decided as the spec decides, and the counters by rule id must be
/// the spec's.
#[test]
#[ignore = "needs root"]
fn classbench_100k_split_tree_programs_agree_with_the_spec() {
    let test = "classbench_100k_split_tree_programs_agree_with_the_spec";
    // counters for every rule id of the lists
    let mut dp = dp_on_lo_counting(test, 131_071);
    dp.set_packet_stats(true).unwrap();
    let only = std::env::var("PARAPET_SPLIT_SETS").ok();
    for name in ["acl1_100k", "fw1_100k", "ipc1_100k"] {
        if only
            .as_deref()
            .is_some_and(|o| !o.split(',').any(|s| s == name))
        {
            continue;
        }
        let Some((list, packets)) = classbench(name) else {
            continue;
        };
        let started = std::time::Instant::now();
        let (image, _) = compile(&list, &CompileOptions::default()).unwrap();
        let compiled = started.elapsed();
        let (prog, shape) = dp
            .load_xdp_generated_tree(&list, &image)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let load = started.elapsed() - compiled;
        assert!(shape.programs > 1, "{name}: {shape:?}");
        assert!(
            shape.largest <= TREE_PROGRAM_BUDGET + 1_000,
            "{name}: {shape:?}"
        );
        let step = (packets.len() / 3000).max(1);
        let frames: Vec<Vec<u8>> = packets
            .iter()
            .step_by(step)
            .map(|p| frame_of(&wire_packet(p.clone())))
            .collect();
        let by_split = run_counted(&mut dp, &list, &frames, &|f| {
            prog.test_run(f, LO, 1).unwrap().passed
        });
        let (passed, rules) = spec(&list, &frames);
        let dropped = passed.iter().filter(|&&p| !p).count();
        assert_eq!(by_split.passed, passed, "{name}: verdicts");
        assert_eq!(by_split.rules, rules, "{name}: the counters by rule id");
        assert_eq!(by_split.packets, frames.len() as u64, "{name}");
        assert!(dropped > frames.len() / 20 && dropped < frames.len() * 19 / 20);
        println!(
            "{name}: {} entries, {} programs, {} instructions (largest {}), {} verified, \
             compiled in {compiled:?}, generated and loaded in {load:?}; \
             {} frames, {dropped} dropped, {} rules counted",
            list.entries.len(),
            shape.programs,
            shape.insns,
            shape.largest,
            prog.verified_insns().unwrap(),
            frames.len(),
            rules.len()
        );
    }
}

/// The pin directory of a test, removed with its pins at the end.
struct PinDir(std::path::PathBuf);

impl Drop for PinDir {
    fn drop(&mut self) {
        let _ = parapet_dataplane::pin::remove_pins(&self.0);
    }
}

/// The kernel empties a prog array when its last descriptor and pin are
/// gone: the split form parapetd swaps in pins its array in the pin
/// directory (`xdp-tree/progs-<id>`), and a swap to the walker unpins it.
#[test]
#[ignore = "needs root"]
fn the_split_form_pins_its_prog_array_until_swapped_out() {
    parapet_testbed::require_root();
    let Some((list, _)) = classbench("acl1_100k") else {
        return;
    };
    let dir = PinDir(std::path::PathBuf::from(format!(
        "/sys/fs/bpf/parapet-test-split-{}",
        std::process::id()
    )));
    parapet_dataplane::pin::ensure_bpffs(&dir.0).unwrap();
    let opts = LoadOptions {
        debug: true,
        slot_pages: 64,
        max_rules: 131_071,
    };
    let mut dp = Dataplane::load_pinned(
        &opts,
        &Default::default(),
        &Default::default(),
        Some(&dir.0),
    )
    .unwrap();
    dp.finish_adoption().unwrap();
    let (image, _) = compile(&list, &CompileOptions::default()).unwrap();
    let pins = || -> Vec<String> {
        std::fs::read_dir(dir.0.join("xdp-tree"))
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    // auto takes the split form at this size (up to
    // AUTO_MAX_TREE_ENTRIES; parapetd loads it in the background)
    assert!(list.entries.len() <= parapet_dataplane::codegen::AUTO_MAX_TREE_ENTRIES);
    let choice = dp.set_xdp_engine_with_image(Some((&list, &image)), EngineWant::Auto);
    assert_eq!(choice.engine, XdpEngine::GeneratedTree, "{}", choice.reason);
    assert!(choice.reason.contains("programs of"), "{}", choice.reason);
    let pinned = pins();
    assert_eq!(pinned.len(), 1, "{pinned:?}");
    assert!(pinned[0].starts_with("progs-"), "{pinned:?}");
    let choice = dp.set_xdp_engine(None, EngineWant::Auto);
    assert_eq!(choice.engine, XdpEngine::Walker, "{}", choice.reason);
    assert!(pins().is_empty(), "{:?}", pins());
}
