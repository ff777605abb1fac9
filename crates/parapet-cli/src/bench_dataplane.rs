//! `parapet bench dataplane`: kernel-timed ns per packet of the real
//! program (parse, classify, count, verdict) through `BPF_PROG_TEST_RUN`,
//! against the floor: a trivial program of the same hook's type that
//! returns "pass", run interleaved with parapet's on the same frames with
//! the same context, so the kernel's own cost of a test run cancels out of
//! "ns above the floor".
//!
//! Two forms (docs/dataplane.md, "Profile", says which is which):
//! - **repeated** (default): each sampled packet `--repeat` times in one
//!   call, the kernel averaging; image, counters and branch history stay
//!   hot for that packet.
//! - **distinct** (`--distinct`): one call per packet with repeat 1,
//!   cycling through the sample, so consecutive runs take different paths
//!   through the image, different counters and different set entries.
//!
//! `--engine generated` times the generated straight-line program of the
//! chain's decision list (`parapet_dataplane::codegen`, XDP only, for the
//! lists it takes; with per-rule counters as the walker keeps them,
//! `generated-nocount` without) instead of the main program's image
//! walker; `generated-attached` the program as parapetd attaches it
//! (`Dataplane::load_xdp_generated`: counting in the main program's maps,
//! its statistics and hook rows included); `generated-tree` the compiled
//! decision tree emitted as code (`codegen::generate_tree`: the tree
//! engine's image, no counters), `generated-tree-attached` the same as
//! parapetd attaches it (`Dataplane::load_xdp_generated_tree`: counting
//! as `generated-attached` does); the other engines time the walker on
//! that engine's image.

use crate::engine::{self, EngineArgs};
use crate::load;
use crate::run::{kernel_sets, load_dataplane, Running};
use anyhow::{bail, Result};
use clap::{Args, ValueEnum};
use parapet_dataplane::codegen::GeneratedXdp;
use parapet_dataplane::GeneratedOnMaps;
use parapet_dataplane::{
    AttachPoint, NfFamily, NfFloor, NfHook, PassFloor, TestRunOutcome, TestRunner,
};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Barrier;

/// Arguments of `parapet bench dataplane`.
#[derive(Args)]
pub struct BenchArgs {
    /// Ruleset file.
    rules: PathBuf,
    /// Trace file: the packets to time (up to --sample distinct ones).
    trace: PathBuf,
    /// Where to run the program: xdp, tc, or a netfilter hook (input,
    /// forward, output: the chain of that hook unless --chain says
    /// another). The floor is a program of the same type that only passes.
    #[arg(long, value_enum, default_value_t = BenchHook::Xdp)]
    hook: BenchHook,
    /// Packets taken from the trace.
    #[arg(long, default_value_t = 256)]
    sample: usize,
    /// BPF_PROG_TEST_RUN repetitions per packet (the kernel averages them);
    /// 1 with --distinct.
    #[arg(long, default_value_t = 200)]
    repeat: u32,
    /// Timed runs over the sample (at least 5).
    #[arg(long, default_value_t = 7)]
    runs: usize,
    /// One test run per packet (repeat 1), cycling through the sample:
    /// distinct packets back to back instead of one packet repeated.
    #[arg(long)]
    distinct: bool,
    /// Also time the program on one CPU (0, then 1) and on two at once
    /// (threads pinned to CPUs 0 and 1, each over the whole sample):
    /// packets per second of each and their ratio (XDP and tc only).
    #[arg(long)]
    scale: bool,
    /// Also time the program with the per-packet statistics off
    /// (`parapet_config`'s stats switch), each packet on, off and the floor
    /// interleaved; reported as a second figure above the floor.
    #[arg(long)]
    stats_off_too: bool,
    /// Also time the stage profile (XDP and tc): the program stopped after
    /// parse, decide, key, descent and merge, each on the same packets in
    /// the same runs; reported as ns above the floor per stop and each
    /// stage's price (docs/dataplane.md, "Profile").
    #[arg(long)]
    stages: bool,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
    /// With `--engine generated-tree-attached`: split the tree form over
    /// programs of at most INSNS instructions (default: only past what one
    /// program holds), to price the tail calls against the one program.
    #[arg(long, value_name = "INSNS")]
    tree_budget: Option<usize>,
    /// The input interface the test runs report for the program and its
    /// floor (XDP and tc; default lo): a device of this namespace. A
    /// reverse-path check (fib saddr [. iif] oif) looks routes up only for
    /// a packet that did not come from lo.
    #[arg(long, value_name = "IFACE")]
    iif: Option<String>,
    #[command(flatten)]
    opts: EngineArgs,
}

/// The index of `--iif` (1, loopback, without it).
fn iif_index(iif: Option<&str>) -> Result<u32> {
    let Some(name) = iif else {
        return Ok(1);
    };
    let c = std::ffi::CString::new(name).map_err(|_| anyhow::anyhow!("--iif {name:?}"))?;
    // SAFETY: a NUL-terminated name this function owns.
    let index = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if index == 0 {
        bail!("--iif {name}: no such interface in this namespace");
    }
    Ok(index)
}

/// Where `parapet bench dataplane` runs the program.
#[derive(Copy, Clone, ValueEnum)]
enum BenchHook {
    Xdp,
    Tc,
    Input,
    Forward,
    Output,
}

impl BenchHook {
    fn name(self) -> &'static str {
        match self {
            BenchHook::Xdp => "xdp",
            BenchHook::Tc => "tc",
            BenchHook::Input => "input",
            BenchHook::Forward => "forward",
            BenchHook::Output => "output",
        }
    }

    fn netfilter(self) -> Option<NfHook> {
        match self {
            BenchHook::Xdp | BenchHook::Tc => None,
            BenchHook::Input => Some(NfHook::Input),
            BenchHook::Forward => Some(NfHook::Forward),
            BenchHook::Output => Some(NfHook::Output),
        }
    }
}

/// The trivial program a hook's figures are measured against.
enum Floor {
    Netfilter(NfFloor, NfHook),
    Pass(PassFloor),
}

/// A generated program timed instead of the main one: on its own
/// (`generated`, `generated-nocount`, `generated-tree`) or as parapetd attaches it
/// (`generated-attached`, `generated-tree-attached`).
enum Generated {
    Standalone(GeneratedXdp),
    Attached(GeneratedOnMaps),
}

impl Generated {
    fn test_run(&self, frame: &[u8], ifindex: u32, repeat: u32) -> Result<TestRunOutcome> {
        Ok(match self {
            Generated::Standalone(g) => g.test_run(frame, ifindex, repeat)?,
            Generated::Attached(g) => g.test_run(frame, ifindex, repeat)?,
        })
    }

    fn insn_count(&self) -> usize {
        match self {
            Generated::Standalone(g) => g.insn_count(),
            Generated::Attached(g) => g.insn_count(),
        }
    }

    fn verified_insns(&self) -> Result<u32> {
        Ok(match self {
            Generated::Standalone(g) => g.verified_insns()?,
            Generated::Attached(g) => g.verified_insns()?,
        })
    }
}

/// Median, min and max of `v` (sorted in place; not empty).
fn spread(v: &mut [f64]) -> (f64, f64, f64) {
    v.sort_by(|a, b| a.total_cmp(b));
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

/// `parapet bench dataplane`.
pub fn bench(mut args: BenchArgs) -> Result<ExitCode> {
    let nf = args.hook.netfilter();
    // the generated program is timed; the meta-engine's classifier checks
    // its verdicts
    // `generated` counts per rule as the walker does; `generated-nocount`
    // leaves the counters out
    let flavour = args.opts.engine.clone();
    let generated = matches!(
        flavour.as_str(),
        "generated"
            | "generated-nocount"
            | "generated-attached"
            | "generated-tree"
            | "generated-tree-attached"
    );
    let counted = flavour != "generated-nocount";
    let tree_form = matches!(
        flavour.as_str(),
        "generated-tree" | "generated-tree-attached"
    );
    if generated {
        if !matches!(args.hook, BenchHook::Xdp) {
            bail!("--engine generated is an XDP program: use --hook xdp");
        }
        if args.scale || args.stats_off_too || args.stages {
            bail!("--scale, --stats-off-too and --stages time the main program, not --engine generated");
        }
        args.opts.engine = "auto".into();
    }
    let parsed = load::ruleset(&args.rules, &args.opts.format)?;
    let rs = &parsed.ruleset;
    if let (Some(h), None) = (nf, &args.opts.chain) {
        if rs.select_chain(Some(h.chain())).is_ok() {
            args.opts.chain = Some(h.chain().to_string());
        }
    }
    let store = kernel_sets(&args.opts, &parsed)?;
    let packets = load::trace(&args.trace)?;
    let sample: Vec<_> = packets.iter().take(args.sample.max(1)).cloned().collect();
    if sample.is_empty() {
        bail!("{}: the trace has no packets", args.trace.display());
    }
    let Running {
        mut dp,
        classifier,
        image_len,
        ..
    } = load_dataplane(rs, &args.opts, 10, store.as_ref())?;
    let hook = match args.hook {
        BenchHook::Xdp => AttachPoint::Xdp,
        BenchHook::Tc => AttachPoint::Tc,
        _ => AttachPoint::Netfilter,
    };
    let floor = match nf {
        Some(h) => {
            // the same chain's image, as that hook's image
            dp.write_hook_image(h, &classifier.image().to_bytes())?;
            dp.swap()?;
            Floor::Netfilter(NfFloor::load()?, h)
        }
        None => Floor::Pass(PassFloor::load(hook)?),
    };
    // the tree form's shape, and the generated program's generation and
    // load (the verifier's) time
    let mut tree_shape = None;
    let mut load_ms = 0.0;
    let program = if generated {
        let chain = rs
            .select_chain(args.opts.chain.as_deref())
            .map_err(anyhow::Error::msg)?;
        let list = parapet_model::flatten(rs, chain)?;
        let started = std::time::Instant::now();
        let g = if tree_form {
            let opts = parapet_compile::CompileOptions::default();
            let (image, _) = parapet_compile::compile(&list, &opts)?;
            if flavour == "generated-tree-attached" {
                let budget = args
                    .tree_budget
                    .unwrap_or(parapet_dataplane::codegen::TREE_PROGRAM_BUDGET);
                let (g, shape) = dp.load_xdp_generated_tree_within(&list, &image, budget)?;
                tree_shape = Some(shape);
                Generated::Attached(g)
            } else {
                let (g, shape) = GeneratedXdp::load_tree(&list, &image)?;
                tree_shape = Some(shape);
                Generated::Standalone(g)
            }
        } else if flavour == "generated-attached" {
            Generated::Attached(dp.load_xdp_generated(&list)?)
        } else {
            Generated::Standalone(GeneratedXdp::load(&list, counted)?)
        };
        load_ms = started.elapsed().as_secs_f64() * 1e3;
        Some(g)
    } else {
        None
    };
    let frames: Vec<Vec<u8>> = sample
        .iter()
        .map(parapet_dataplane::frame::frame_of_packet)
        .collect();
    let families: Vec<NfFamily> = sample
        .iter()
        .map(|p| match p.family {
            parapet_model::Family::V4 => NfFamily::Ipv4,
            parapet_model::Family::V6 => NfFamily::Ipv6,
        })
        .collect();
    // one BPF_PROG_TEST_RUN of packet i, `repeat` times: parapet's program
    // (ingress interface --iif, else 1, loopback) and the floor with the
    // same context
    let iif = iif_index(args.iif.as_deref())?;
    let run =
        |dp: &parapet_dataplane::Dataplane, i: usize, repeat: u32| -> Result<TestRunOutcome> {
            Ok(match (nf, &program) {
                (Some(h), _) => dp.test_run_netfilter(h, families[i], &frames[i], repeat)?,
                (None, Some(g)) => g.test_run(&frames[i], iif, repeat)?,
                (None, None) => dp.test_run(hook, &frames[i], iif, repeat)?,
            })
        };
    let run_floor = |i: usize, repeat: u32| -> Result<TestRunOutcome> {
        Ok(match &floor {
            Floor::Netfilter(f, h) => f.test_run(*h, families[i], &frames[i], repeat)?,
            Floor::Pass(f) => f.test_run(&frames[i], iif, repeat)?,
        })
    };
    // the stage profile's programs, each with the same image live
    let mut stages = match (args.stages, nf) {
        (false, _) => crate::bench_stages::Stages::none(),
        (true, Some(_)) => bail!("--stages is for --hook xdp or tc"),
        (true, None) => crate::bench_stages::Stages::load(rs, &args.opts, store.as_ref())?,
    };
    let lookup = store.map(crate::set_lookup::StoreLookup);
    // Every sampled packet must get the classifier's verdict from the
    // kernel, or the timing is of the wrong thing; and the floor must pass.
    let mut mismatches = 0;
    for (i, p) in sample.iter().enumerate() {
        // A test-run skb at a netfilter hook has no conntrack entry: the
        // kernel's INVALID (xt_conntrack's view of such a packet).
        let mut p = p.clone();
        if nf.is_some() {
            p.ct_state = parapet_model::CtState::Invalid;
        }
        let p = &p;
        let bits = match &lookup {
            Some(l) => engine::set_bits(rs, p, l),
            None => Vec::new(),
        };
        let want = classifier.classify(p, &bits).verdict == parapet_model::Verdict::Accept;
        if run(&dp, i, 1)?.passed != want {
            mismatches += 1;
        }
        if !run_floor(i, 1)?.passed {
            bail!("the floor program did not pass packet {}", i + 1);
        }
    }
    if mismatches > 0 {
        bail!(
            "the kernel program disagreed with the classifier on {mismatches} of {} packets",
            sample.len()
        );
    }
    let repeat = if args.distinct { 1 } else { args.repeat.max(1) };
    let runs = args.runs.max(5);
    let (mut real_ns, mut floor_ns, mut above_ns) = (
        Vec::with_capacity(runs),
        Vec::with_capacity(runs),
        Vec::with_capacity(runs),
    );
    let mut off_above_ns = Vec::with_capacity(runs);
    for _ in 0..runs {
        let (mut total, mut ftotal, mut off_total) = (0.0, 0.0, 0.0);
        for i in 0..frames.len() {
            // the floor on the same packet, interleaved: same machine state
            total += run(&dp, i, repeat)?.duration.as_nanos() as f64;
            ftotal += run_floor(i, repeat)?.duration.as_nanos() as f64;
            if args.stats_off_too {
                dp.set_packet_stats(false)?;
                off_total += run(&dp, i, repeat)?.duration.as_nanos() as f64;
                dp.set_packet_stats(true)?;
            }
            stages.time_packet(|sdp| Ok(run(sdp, i, repeat)?.duration.as_nanos() as f64))?;
        }
        let n = frames.len() as f64;
        stages.end_run(ftotal, total, n);
        real_ns.push(total / n);
        floor_ns.push(ftotal / n);
        above_ns.push((total - ftotal) / n);
        off_above_ns.push((off_total - ftotal) / n);
    }
    let stats_off = args.stats_off_too.then(|| spread(&mut off_above_ns));
    let (median, min, max) = spread(&mut real_ns);
    let (fmedian, fmin, fmax) = spread(&mut floor_ns);
    let (above, above_min, above_max) = spread(&mut above_ns);
    let mode = if args.distinct {
        "distinct"
    } else {
        "repeated"
    };
    let scaled = match (args.scale, nf) {
        (false, _) => None,
        (true, Some(_)) => bail!("--scale is for --hook xdp or tc"),
        (true, None) => {
            let runners = [dp.test_runner(hook)?, dp.test_runner(hook)?];
            Some(scale(&runners, &frames, repeat, runs)?)
        }
    };
    let engine = match &program {
        Some(_) => flavour.as_str(),
        None => classifier.engine().name(),
    };
    let what = match (&program, &tree_shape) {
        (Some(g), Some(t)) if t.programs > 1 => format!(
            "{}-instruction tree form in {} programs (tail calls)",
            g.insn_count(),
            t.programs
        ),
        (Some(g), _) => format!("{}-instruction program", g.insn_count()),
        (None, _) => format!("{image_len}-byte image"),
    };
    if args.json {
        let mut v = serde_json::json!({"engine": engine, "hook": args.hook.name(), "mode": mode,
            "rules": rs.rule_count(), "image_bytes": image_len,
            "ns_per_packet": median, "ns_per_packet_min": min, "ns_per_packet_max": max, "packets_per_sec": 1e9 / median,
            "floor_ns_per_packet": fmedian, "floor_ns_per_packet_min": fmin, "floor_ns_per_packet_max": fmax,
            "above_floor_ns": above, "above_floor_ns_min": above_min, "above_floor_ns_max": above_max,
            "sample": frames.len(), "repeat": repeat, "runs": runs});
        if let Some(st) = stages.json() {
            v["stages"] = st;
        }
        if let Some(g) = &program {
            v["program_insns"] = serde_json::json!(g.insn_count());
            v["load_ms"] = serde_json::json!(load_ms);
            v["verified_insns"] = serde_json::json!(g.verified_insns()?);
        }
        if let Some(t) = &tree_shape {
            v["tree"] = serde_json::json!({"partitions": t.partitions, "nodes": t.nodes,
                "leaves": t.leaves, "checks": t.checks, "elided": t.elided, "implied": t.implied,
                "common": t.common, "in_registers": t.in_registers, "on_stack": t.on_stack,
                "guarded_exits": t.guarded_exits, "programs": t.programs, "largest": t.largest});
        }
        if let Some((off, off_min, off_max)) = stats_off {
            v["stats_off_above_floor_ns"] = serde_json::json!(off);
            v["stats_off_above_floor_ns_min"] = serde_json::json!(off_min);
            v["stats_off_above_floor_ns_max"] = serde_json::json!(off_max);
        }
        if let Some(mut sc) = scaled {
            let (one, _, _) = spread(&mut sc.pps1);
            let (two, _, _) = spread(&mut sc.pps2);
            let (r, rmin, rmax) = spread(&mut sc.ratio);
            v["scale_pps_1cpu"] = serde_json::json!(one);
            v["scale_pps_2cpu"] = serde_json::json!(two);
            v["scale_ratio"] = serde_json::json!(r);
            v["scale_ratio_min"] = serde_json::json!(rmin);
            v["scale_ratio_max"] = serde_json::json!(rmax);
        }
        println!("{v}");
    } else {
        println!(
            "{} rules, {} engine, {what} at {}: {median:.1} ns/packet median of {runs} runs (min {min:.1}, max {max:.1}), floor {fmedian:.1} (min {fmin:.1}, max {fmax:.1}), {above:.1} ns above the floor (min {above_min:.1}, max {above_max:.1}); {} {mode} packets x {repeat} repeats, verdicts checked",
            rs.rule_count(),
            engine,
            args.hook.name(),
            frames.len(),
        );
        stages.print();
        if let Some((off, off_min, off_max)) = stats_off {
            println!(
                "statistics off: {off:.1} ns above the floor (min {off_min:.1}, max {off_max:.1}), same runs"
            );
        }
        if let Some(mut sc) = scaled {
            let (one, _, _) = spread(&mut sc.pps1);
            let (two, _, _) = spread(&mut sc.pps2);
            let (r, rmin, rmax) = spread(&mut sc.ratio);
            println!(
                "scale: {:.2} Mpps on one CPU, {:.2} Mpps on two (kernel-timed): {r:.2}x (min {rmin:.2}, max {rmax:.2})",
                one / 1e6,
                two / 1e6
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Per run of [`scale`]: packets per second on one CPU and on two, and
/// their ratio.
struct Scaled {
    pps1: Vec<f64>,
    pps2: Vec<f64>,
    ratio: Vec<f64>,
}

/// Pin the calling thread to `cpu`.
fn pin(cpu: usize) -> Result<()> {
    // SAFETY: cpu_set_t is plain data; CPU_SET stays in bounds for
    // cpu < CPU_SETSIZE, checked first.
    unsafe {
        if cpu >= libc::CPU_SETSIZE as usize {
            bail!("CPU {cpu} out of range");
        }
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            bail!("pinning to CPU {cpu}: {}", std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// One pass over `frames` on `cpu`: kernel-timed ns per packet.
fn pass(runner: &TestRunner, cpu: usize, frames: &[Vec<u8>], repeat: u32) -> Result<f64> {
    pin(cpu)?;
    let mut total = 0.0;
    for f in frames {
        total += runner.test_run(f, 1, repeat)?.duration.as_nanos() as f64;
    }
    Ok(total / frames.len() as f64)
}

/// The program on CPU 0 alone, on CPU 1 alone, then on both at once,
/// `runs` times in turn; one CPU's rate is the mean of the two alone. The kernel's test-run clock leaves out the time a thread
/// is scheduled away, so the ratio is the program's own scaling while both
/// run: a cache line written per packet by both CPUs would lower it. (The
/// wall clock is no measure here: on a shared machine it says how much of
/// two CPUs the scheduler gave.)
fn scale(
    runners: &[TestRunner; 2],
    frames: &[Vec<u8>],
    repeat: u32,
    runs: usize,
) -> Result<Scaled> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus < 2 {
        bail!("--scale needs two CPUs, this process may use {cpus}");
    }
    let mut sc = Scaled {
        pps1: Vec::with_capacity(runs),
        pps2: Vec::with_capacity(runs),
        ratio: Vec::with_capacity(runs),
    };
    for _ in 0..runs {
        // one CPU: each of the two alone, averaged, so that a faster or
        // quieter CPU does not skew the ratio
        let mut alone = [0.0; 2];
        for (cpu, r) in runners.iter().enumerate() {
            alone[cpu] = std::thread::scope(|s| {
                s.spawn(|| pass(r, cpu, frames, repeat))
                    .join()
                    .expect("bench thread")
            })?;
        }
        let barrier = Barrier::new(2);
        let ns2: Vec<f64> = std::thread::scope(|s| {
            let threads: Vec<_> = runners
                .iter()
                .enumerate()
                .map(|(cpu, r)| {
                    let b = &barrier;
                    s.spawn(move || {
                        pin(cpu)?;
                        b.wait();
                        pass(r, cpu, frames, repeat)
                    })
                })
                .collect();
            threads
                .into_iter()
                .map(|t| t.join().expect("bench thread"))
                .collect::<Result<_>>()
        })?;
        let pps1 = (1e9 / alone[0] + 1e9 / alone[1]) / 2.0;
        let pps2: f64 = ns2.iter().map(|ns| 1e9 / ns).sum();
        sc.pps1.push(pps1);
        sc.pps2.push(pps2);
        sc.ratio.push(pps2 / pps1);
    }
    Ok(sc)
}
