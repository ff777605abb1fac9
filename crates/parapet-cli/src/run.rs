//! `parapet run`: the kernel dataplane in the foreground, without the
//! daemon — compile a ruleset, load the eBPF program, attach it, hold it
//! until interrupted (or `--seconds`), then print what it counted.
//!
//! For trying rulesets on real traffic and for benchmarks; production use
//! goes through `parapetd`, which owns the BPF objects across reloads.

use crate::engine::{self, EngineArgs};
use crate::load;
use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, ValueEnum};
use parapet_compile::{compile_chain, Classifier};
use parapet_dataplane::{
    ruleset, AttachPoint, Dataplane, Features, LoadOptions, Mode, SetSizing, Stat,
};
use parapet_model::Ruleset;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Arguments of `parapet run`.
#[derive(Args)]
pub struct RunArgs {
    /// Ruleset file.
    rules: PathBuf,
    /// Interface to attach to (repeatable).
    #[arg(long = "iface", required = true)]
    ifaces: Vec<String>,
    /// Where to hook: xdp or tc (ingress).
    #[arg(long, value_enum, default_value_t = HookArg::Xdp)]
    hook: HookArg,
    /// XDP mode: native (falls back to skb, with a note) or skb.
    #[arg(long, value_enum, default_value_t = ModeArg::Native)]
    mode: ModeArg,
    /// Detach and exit after this many seconds (default: until SIGINT/SIGTERM).
    #[arg(long)]
    seconds: Option<f64>,
    /// Log rate per LOG rule, events per second (a token bucket per rule).
    #[arg(long, default_value_t = 10)]
    log_rate: u32,
    /// Print counters as JSON on exit.
    #[arg(long)]
    json: bool,
    /// Run in the background: return once attached, with the process id in
    /// this file (`parapet stop PIDFILE` detaches it). Its output goes to
    /// PIDFILE.log.
    #[arg(long, value_name = "PIDFILE")]
    background: Option<PathBuf>,
    /// Do not create the nft table `inet parapet_run_ct` that makes the
    /// kernel track connections while the ruleset matches ctstate (for
    /// hosts whose own rules already use conntrack).
    #[arg(long)]
    no_conntrack_table: bool,
    /// Do not keep the per-packet statistics no rule needs (packets seen,
    /// classified by the image, per hook and interface), a few ns per
    /// packet; the rule counters still count.
    #[arg(long)]
    no_packet_stats: bool,
    #[command(flatten)]
    opts: EngineArgs,
}

/// The nft table `parapet run` installs for conntrack (`inet parapet_run_ct`).
const CT_TABLE: &str = "parapet_run_ct";

#[derive(Copy, Clone, ValueEnum)]
enum HookArg {
    Xdp,
    Tc,
}

#[derive(Copy, Clone, ValueEnum)]
enum ModeArg {
    Native,
    Skb,
}

/// Runs `parapet run`.
pub fn run(args: RunArgs) -> Result<ExitCode> {
    if let Some(pidfile) = &args.background {
        return background(pidfile);
    }
    let parsed = load::ruleset(&args.rules, &args.opts.format)?;
    let rs = &parsed.ruleset;
    let store = kernel_sets(&args.opts, &parsed)?;
    let Running {
        mut dp,
        classifier,
        image_len,
        max_rule,
    } = load_dataplane(rs, &args.opts, args.log_rate, store.as_ref())?;
    // before attaching: no packet is counted that the switch says is not
    dp.set_packet_stats(!args.no_packet_stats)?;
    // Connections must be tracked before the first reply comes back; the
    // table goes when this function returns (Drop).
    let _ct_table = if dp.conntrack() && !args.no_conntrack_table {
        let t = parapet_dataplane::ct_table::ConntrackTable::install(CT_TABLE).map_err(|e| {
            anyhow!(
                "the ruleset matches ctstate, so the kernel must track connections, but creating \
                 nft table inet {CT_TABLE} failed ({e}); use --no-conntrack-table if conntrack is \
                 enabled otherwise"
            )
        })?;
        Some(t)
    } else {
        None
    };
    if dp.conntrack() {
        eprintln!("parapet: the ruleset matches ctstate: conntrack lookup on");
    }
    let (hook, mode) = match (args.hook, args.mode) {
        (HookArg::Tc, _) => (AttachPoint::Tc, Mode::Skb),
        (HookArg::Xdp, ModeArg::Native) => (AttachPoint::Xdp, Mode::Native),
        (HookArg::Xdp, ModeArg::Skb) => (AttachPoint::Xdp, Mode::Skb),
    };
    let mut attached = Vec::new();
    for iface in &args.ifaces {
        let a = dp
            .attach(iface, hook, mode)
            .with_context(|| format!("attaching to {iface}"))?;
        if let Some(note) = &a.note {
            eprintln!("parapet: {iface}: {note}");
        }
        eprintln!(
            "parapet: {} rules ({} engine, {image_len} bytes) attached to {iface} at {:?}",
            rs.rule_count(),
            classifier.engine().name(),
            hook
        );
        attached.push(a.id);
    }
    let stop = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGINT, Arc::clone(&stop))?;
    signal_hook::flag::register(signal_hook::consts::SIGTERM, Arc::clone(&stop))?;
    let deadline = args
        .seconds
        .map(|s| Instant::now() + Duration::from_secs_f64(s));
    while !stop.load(Ordering::Relaxed) && deadline.is_none_or(|d| Instant::now() < d) {
        for ev in dp.poll_log(256) {
            eprintln!("{}", ruleset::log_line(rs, &ev));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    for id in attached {
        dp.detach(id)?;
    }
    report(&dp, max_rule, args.json)?;
    Ok(ExitCode::SUCCESS)
}

/// A loaded program with a ruleset's image live in it (what `run` and
/// `bench dataplane` run).
pub(crate) struct Running {
    pub(crate) dp: Dataplane,
    pub(crate) classifier: Classifier,
    pub(crate) image_len: usize,
    pub(crate) max_rule: u32,
}

/// Compiles `rs`, loads the program sized for it, installs the actions and
/// makes the image live.
pub(crate) fn load_dataplane(
    rs: &Ruleset,
    opts: &EngineArgs,
    log_rate: u32,
    store: Option<&parapet_sets::SetStore>,
) -> Result<Running> {
    load_dataplane_stopping(rs, opts, log_rate, store, None)
}

/// [`load_dataplane`]; with `stop`, the stage profile's program that
/// returns "pass" after that stage (`parapet bench dataplane --stages`).
pub(crate) fn load_dataplane_stopping(
    rs: &Ruleset,
    opts: &EngineArgs,
    log_rate: u32,
    store: Option<&parapet_sets::SetStore>,
    stop: Option<parapet_dataplane::Stage>,
) -> Result<Running> {
    let chain = rs
        .select_chain(opts.chain.as_deref())
        .map_err(|e| anyhow!(e))?;
    let mut build = parapet_compile::BuildOptions::default();
    if let Some(m) = &opts.max_memory {
        build.max_memory = engine::parse_size(m)?;
    }
    let (classifier, policy) = compile_chain(rs, chain, &build).map_err(|e| anyhow!(e))?;
    let image = classifier.image().to_bytes();
    let max_rule = ruleset::max_rule_id(rs);
    let pages = (image.len() / 4096 + 2) as u32;
    let needs_ct = ruleset::needs_conntrack(rs, chain);
    // The kfuncs are linked in only when the ruleset reads ctstate: this
    // program lives for one ruleset, and linking needs nf_conntrack.
    let load_opts = LoadOptions {
        max_rules: max_rule.max(1),
        slot_pages: pages,
        debug: false,
    };
    // XDP/tc only: the netfilter hooks' images are left out
    let features = Features {
        conntrack: needs_ct,
        interface_only: true,
        ..Features::default()
    };
    let mut dp = match stop {
        None => Dataplane::load_with(&load_opts, &SetSizing::default(), &features),
        Some(s) => Dataplane::load_stopping_after(&load_opts, &SetSizing::default(), &features, s),
    }
    .context("loading the eBPF program (needs root or CAP_BPF+CAP_NET_ADMIN, kernel >= 6.9)")?;
    if let Some(why) = ruleset::mark_refusal(rs) {
        bail!("{why}");
    }
    if let Some(note) = ruleset::mark_note(rs) {
        eprintln!("parapet: warning: {note}");
    }
    dp.needs_conntrack(
        rs,
        chain,
        "the ruleset",
        "the nf_conntrack kfuncs are missing",
    )
    .map_err(|e| anyhow!(e))?;
    dp.install_ruleset_ct(
        &ruleset::Install {
            ruleset: rs,
            policy: &policy,
            image: &image,
            sets: store,
            log_rate,
        },
        needs_ct,
    )?;
    Ok(Running {
        dp,
        classifier,
        image_len: image.len(),
        max_rule,
    })
}

fn report(dp: &Dataplane, max_rule: u32, json: bool) -> Result<()> {
    let stats = dp.stats()?;
    let packet_stats = dp.packet_stats()?;
    let mut rows = Vec::new();
    for id in 0..=max_rule {
        let c = dp.counter(id)?;
        if c.packets > 0 {
            rows.push((id, c.packets, c.bytes));
        }
    }
    if json {
        let rules: Vec<_> = rows
            .iter()
            .map(|(id, p, b)| serde_json::json!({"rule": id, "packets": p, "bytes": b}))
            .collect();
        println!(
            "{}",
            serde_json::json!({"packets": stats.get(Stat::Packets), "by_image": stats.get(Stat::Image), "image_errors": stats.get(Stat::ImageError), "packet_stats": packet_stats, "rules": rules})
        );
        return Ok(());
    }
    if packet_stats {
        println!(
            "packets seen: {} (classified by the image: {})",
            stats.get(Stat::Packets),
            stats.get(Stat::Image)
        );
    } else {
        println!("packets seen: not counted (--no-packet-stats)");
    }
    for (id, p, b) in rows {
        let what = if id == 0 {
            "policy".to_string()
        } else {
            format!("rule {id}")
        };
        println!("  {what:>10}: {p} packets, {b} bytes");
    }
    Ok(())
}

/// Starts this same command again without `--background`, detached, and
/// returns once it reports the program attached (or failed).
fn background(pidfile: &Path) -> Result<ExitCode> {
    let log_path = PathBuf::from(format!("{}.log", pidfile.display()));
    let log = std::fs::File::create(&log_path)
        .with_context(|| format!("{}: cannot create", log_path.display()))?;
    let mut argv: Vec<String> = std::env::args().skip(1).collect();
    if let Some(i) = argv.iter().position(|a| a == "--background") {
        argv.drain(i..(i + 2).min(argv.len()));
    } else if let Some(i) = argv.iter().position(|a| a.starts_with("--background=")) {
        argv.remove(i);
    }
    let mut child = std::process::Command::new(std::env::current_exe()?)
        .args(&argv)
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .context("starting the background dataplane")?;
    let t0 = Instant::now();
    loop {
        let said = std::fs::read_to_string(&log_path).unwrap_or_default();
        if said.contains(" attached to ")
            && said.lines().filter(|l| l.contains(" attached to ")).count()
                >= argv
                    .iter()
                    .filter(|a| *a == "--iface" || a.starts_with("--iface="))
                    .count()
        {
            std::fs::write(pidfile, format!("{}\n", child.id()))?;
            eprint!("{said}");
            return Ok(ExitCode::SUCCESS);
        }
        if let Some(status) = child.try_wait()? {
            bail!("the background dataplane exited ({status}) before attaching:\n{said}");
        }
        if t0.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            bail!("the background dataplane did not attach within 120 s:\n{said}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `parapet stop PIDFILE`: detaches a `parapet run --background` and prints
/// its final counters.
pub fn stop(pidfile: &Path) -> Result<ExitCode> {
    let text = std::fs::read_to_string(pidfile)
        .with_context(|| format!("{}: cannot read", pidfile.display()))?;
    let pid: i32 = text
        .trim()
        .parse()
        .map_err(|_| anyhow!("{}: expected a process id", pidfile.display()))?;
    // Only signal a process that is really ours: a `parapet run`.
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    if !String::from_utf8_lossy(&cmdline).contains("run") {
        bail!(
            "process {pid} from {} is not a running `parapet run`",
            pidfile.display()
        );
    }
    // SAFETY: kill(2) with a pid we just checked; no memory is involved.
    if unsafe { libc::kill(pid, libc::SIGINT) } != 0 {
        bail!(
            "cannot signal process {pid}: {}",
            std::io::Error::last_os_error()
        );
    }
    let t0 = Instant::now();
    while std::path::Path::new(&format!("/proc/{pid}")).exists()
        && t0.elapsed() < Duration::from_secs(30)
    {
        // A zombie (not reaped by a parent that already exited) counts as gone.
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if stat.split_whitespace().nth(2) == Some("Z") {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = std::fs::remove_file(pidfile);
    let log_path = PathBuf::from(format!("{}.log", pidfile.display()));
    if let Ok(said) = std::fs::read_to_string(&log_path) {
        print!("{said}");
        let _ = std::fs::remove_file(&log_path);
    }
    Ok(ExitCode::SUCCESS)
}

/// The sets a ruleset uses (from `--sets` files and its own nft set blocks),
/// for the kernel's maps; `None` when it uses none.
pub(crate) fn kernel_sets(
    opts: &EngineArgs,
    parsed: &parapet_parse::Parsed,
) -> Result<Option<parapet_sets::SetStore>> {
    if parsed.ruleset.set_refs.is_empty() {
        return Ok(None);
    }
    Ok(Some(crate::set_lookup::load(&opts.sets, parsed)?))
}
