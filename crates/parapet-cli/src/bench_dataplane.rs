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

use crate::engine::{self, EngineArgs};
use crate::load;
use crate::run::{kernel_sets, load_dataplane, Running};
use anyhow::{bail, Result};
use clap::{Args, ValueEnum};
use parapet_dataplane::{AttachPoint, NfFamily, NfFloor, NfHook, PassFloor, TestRunOutcome};
use std::path::PathBuf;
use std::process::ExitCode;

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
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    opts: EngineArgs,
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
    Netfilter(NfFloor),
    Pass(PassFloor),
}

/// Median, min and max of `v` (sorted in place; not empty).
fn spread(v: &mut [f64]) -> (f64, f64, f64) {
    v.sort_by(|a, b| a.total_cmp(b));
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

/// `parapet bench dataplane`.
pub fn bench(mut args: BenchArgs) -> Result<ExitCode> {
    let nf = args.hook.netfilter();
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
            Floor::Netfilter(NfFloor::load()?)
        }
        None => Floor::Pass(PassFloor::load(hook)?),
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
    // (ingress interface 1, loopback) and the floor with the same context
    let run = |i: usize, repeat: u32| -> Result<TestRunOutcome> {
        Ok(match nf {
            Some(h) => dp.test_run_netfilter(h, families[i], &frames[i], repeat)?,
            None => dp.test_run(hook, &frames[i], 1, repeat)?,
        })
    };
    let run_floor = |i: usize, repeat: u32| -> Result<TestRunOutcome> {
        Ok(match (&floor, nf) {
            (Floor::Netfilter(f), Some(h)) => f.test_run(h, families[i], &frames[i], repeat)?,
            (Floor::Pass(f), _) => f.test_run(&frames[i], 1, repeat)?,
            (Floor::Netfilter(_), None) => {
                unreachable!("a netfilter floor only at a netfilter hook")
            }
        })
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
        if run(i, 1)?.passed != want {
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
    for _ in 0..runs {
        let (mut total, mut ftotal) = (0.0, 0.0);
        for i in 0..frames.len() {
            // the floor on the same packet, interleaved: same machine state
            total += run(i, repeat)?.duration.as_nanos() as f64;
            ftotal += run_floor(i, repeat)?.duration.as_nanos() as f64;
        }
        let n = frames.len() as f64;
        real_ns.push(total / n);
        floor_ns.push(ftotal / n);
        above_ns.push((total - ftotal) / n);
    }
    let (median, min, max) = spread(&mut real_ns);
    let (fmedian, fmin, fmax) = spread(&mut floor_ns);
    let (above, above_min, above_max) = spread(&mut above_ns);
    let mode = if args.distinct {
        "distinct"
    } else {
        "repeated"
    };
    if args.json {
        let v = serde_json::json!({"engine": classifier.engine().name(), "hook": args.hook.name(), "mode": mode,
            "rules": rs.rule_count(), "image_bytes": image_len,
            "ns_per_packet": median, "ns_per_packet_min": min, "ns_per_packet_max": max, "packets_per_sec": 1e9 / median,
            "floor_ns_per_packet": fmedian, "floor_ns_per_packet_min": fmin, "floor_ns_per_packet_max": fmax,
            "above_floor_ns": above, "above_floor_ns_min": above_min, "above_floor_ns_max": above_max,
            "sample": frames.len(), "repeat": repeat, "runs": runs});
        println!("{v}");
    } else {
        println!(
            "{} rules, {} engine, {image_len}-byte image at {}: {median:.1} ns/packet median of {runs} runs (min {min:.1}, max {max:.1}), floor {fmedian:.1} (min {fmin:.1}, max {fmax:.1}), {above:.1} ns above the floor (min {above_min:.1}, max {above_max:.1}); {} {mode} packets x {repeat} repeats, verdicts checked",
            rs.rule_count(),
            classifier.engine().name(),
            args.hook.name(),
            frames.len(),
        );
    }
    Ok(ExitCode::SUCCESS)
}
