//! `parapet-peers` — runs the kernel-peer benchmarks of issue 7. See
//! `bench/peers/README.md`.

use parapet_peers::bench::{Config, Experiment};
use parapet_peers::rules::{RuleKind, RuleSpec};
use parapet_peers::{bans, filters, report, signal, testbed, GeneratorKind};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

const USAGE: &str = "\
usage: parapet-peers [run] [OPTIONS]      run the benchmarks (needs root)
       parapet-peers gen-rules --rules N [--format iptables|nft|nft-set|nft-vmap]
                               [--kind worst|ipfw-late|ipfw-early]
       parapet-peers forward [--quick] [--rounds N] [--rules 25,100,…] [--filters a,b,…]
                             [--frames 128,512,1518] [--tcp-secs N] [--report FILE.md] [--json FILE]
                                           the FORWARD-position experiment (router namespace)
       parapet-peers cleanup               delete namespaces of dead runs

options for run:
  --quick                 short run (3 sizes, 64/1518 B, 3 runs, 1 s ban cap)
  --json FILE             one JSON record per (experiment, filter, rules, frame)
  --report DIR            write DIR/report.md and SVG plots
  --filters a,b,…         default: none,iptables-legacy,iptables-nft,nft,nft-set,
                          parapet-xdp,parapet-tc (also: nft-vmap)
  --rules 25,50,…         rule counts (default 25..25600 doubling)
  --frames 64,128,…       nominal frame sizes incl. FCS (default 64,128,512,1518)
  --runs N                windows per point, median reported (default 5)
  --window-ms N           window length (default 1000)
  --generator G           xdp-live (default; falls back to packet-mmap) |
                          packet-mmap | sendmmsg | trafgen
  --experiments a,b,…     generators,throughput,ipfw,bans,latency (default all)
  --ban-counts a,b        default 7990,1000000
  --ban-methods a,b,…     default all (see bench/peers/README.md)
  --ban-cap-s N           time cap per ban method and size (default 15)
  --latency-probes N      TCP handshakes per latency point (default 50)
  --no-rps                keep receive work on the sender's CPU";

fn list<T>(v: &str, f: impl Fn(&str) -> Option<T>, what: &str) -> Result<Vec<T>, String> {
    v.split(',')
        .filter(|s| !s.is_empty())
        .map(|s| f(s.trim()).ok_or_else(|| format!("bad {what}: {s:?}")))
        .collect()
}

struct RunArgs {
    cfg: Config,
    json: Option<PathBuf>,
    report: Option<PathBuf>,
}

fn parse_run(args: &[String]) -> Result<RunArgs, String> {
    let quick = args.iter().any(|a| a == "--quick");
    let mut cfg = if quick {
        Config::quick()
    } else {
        Config::full()
    };
    let (mut json, mut report) = (None, None);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || it.next().cloned().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--quick" => {}
            "--json" => json = Some(PathBuf::from(val()?)),
            "--report" => report = Some(PathBuf::from(val()?)),
            "--filters" => {
                let v = val()?;
                cfg.filters = list(&v, |s| filters::by_name(s).map(|_| s.to_string()), "filter")?;
            }
            "--rules" => cfg.rules = list(&val()?, |s| s.parse().ok(), "rule count")?,
            "--frames" => {
                cfg.frames = list(
                    &val()?,
                    |s| s.parse().ok().filter(|n| (64..=1518).contains(n)),
                    "frame size (64..1518)",
                )?
            }
            "--runs" => cfg.runs = val()?.parse().map_err(|_| "bad --runs")?,
            "--window-ms" => {
                let ms: u64 = val()?.parse().map_err(|_| "bad --window-ms")?;
                cfg.window = Duration::from_millis(ms.clamp(50, 10_000));
            }
            "--generator" => {
                cfg.generator = GeneratorKind::parse(&val()?).ok_or("bad --generator")?
            }
            "--experiments" => cfg.experiments = list(&val()?, Experiment::parse, "experiment")?,
            "--ban-counts" => cfg.ban_counts = list(&val()?, |s| s.parse().ok(), "ban count")?,
            "--ban-methods" => {
                let v = val()?;
                cfg.ban_methods = list(
                    &v,
                    |s| bans::by_name(s).map(|_| s.to_string()),
                    "ban method",
                )?;
            }
            "--ban-cap-s" => {
                let s: u64 = val()?.parse().map_err(|_| "bad --ban-cap-s")?;
                cfg.ban_cap = Duration::from_secs(s.clamp(1, 600));
            }
            "--latency-probes" => {
                let n: usize = val()?.parse().map_err(|_| "bad --latency-probes")?;
                cfg.latency_probes = n.clamp(1, 1000);
            }
            "--no-rps" => cfg.bed.filter_cpu = None,
            other => return Err(format!("unknown option {other}\n{USAGE}")),
        }
    }
    Ok(RunArgs { cfg, json, report })
}

fn gen_rules(args: &[String]) -> Result<(), String> {
    let mut spec = RuleSpec {
        rules: 25,
        kind: RuleKind::WorstCase,
    };
    let mut format = "iptables".to_string();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let v = it.next().ok_or(format!("{a} needs a value"))?;
        match a.as_str() {
            "--rules" => spec.rules = v.parse().map_err(|_| "bad --rules")?,
            "--kind" => spec.kind = RuleKind::parse(v).ok_or("bad --kind")?,
            "--format" => format = v.clone(),
            other => return Err(format!("unknown option {other}\n{USAGE}")),
        }
    }
    let text = match format.as_str() {
        "iptables" => spec.iptables_save(),
        "nft" => spec.nft_linear(),
        "nft-set" => spec.nft_set(),
        "nft-vmap" => spec.nft_vmap(),
        _ => return Err(format!("bad --format {format}")),
    };
    print!("{text}");
    Ok(())
}

fn run(args: &[String]) -> Result<(), String> {
    let ra = parse_run(args)?;
    // Create output locations before a long run, not after it.
    if let Some(parent) = ra.json.as_ref().and_then(|p| p.parent()) {
        if !parent.as_os_str().is_empty() {
            std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        }
    }
    if let Some(d) = &ra.report {
        std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
    }
    signal::install();
    let command = std::iter::once("parapet-peers".to_string())
        .chain(std::env::args().skip(1))
        .collect::<Vec<_>>()
        .join(" ");
    let machine = report::Machine::probe();
    eprintln!(
        "parapet-peers: {} on {} ({} CPUs); generator {}, filter CPU {:?}",
        machine.kernel,
        machine.cpu,
        machine.cpus,
        ra.cfg.generator.name(),
        ra.cfg.bed.filter_cpu
    );
    let res = parapet_peers::run(&ra.cfg).map_err(|e| e.0);
    parapet_peers::remove_workdir();
    let res = res?;
    for s in &res.skipped {
        eprintln!("skipped: {}: {}", s.what, s.reason);
    }
    if let Some(p) = &ra.json {
        report::write_json(p, &res, &machine, &command).map_err(|e| e.0)?;
        eprintln!("wrote {}", p.display());
    }
    if let Some(d) = &ra.report {
        report::write_markdown(d, &res, &machine, &command, &ra.cfg).map_err(|e| e.0)?;
        eprintln!("wrote {}/report.md", d.display());
    }
    if signal::stop_requested() {
        return Err("interrupted".into());
    }
    Ok(())
}

fn forward(args: &[String]) -> Result<(), String> {
    use parapet_peers::forward::{self, FwdConfig, FILTERS};
    let mut cfg = if args.iter().any(|a| a == "--quick") {
        FwdConfig::quick()
    } else {
        FwdConfig::full()
    };
    let (mut json, mut report) = (None::<PathBuf>, None::<PathBuf>);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || it.next().cloned().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--quick" => {}
            "--json" => json = Some(PathBuf::from(val()?)),
            "--report" => report = Some(PathBuf::from(val()?)),
            "--rounds" => {
                cfg.rounds = val()?
                    .parse::<usize>()
                    .map_err(|_| "bad --rounds")?
                    .clamp(1, 20)
            }
            "--tcp-secs" => {
                cfg.tcp_secs = val()?
                    .parse::<u32>()
                    .map_err(|_| "bad --tcp-secs")?
                    .clamp(1, 30)
            }
            "--rules" => {
                cfg.rules = list(
                    &val()?,
                    |s| s.parse().ok().filter(|n| (1..=55_000).contains(n)),
                    "rule count",
                )?
            }
            "--frames" => {
                cfg.frames = list(
                    &val()?,
                    |s| s.parse().ok().filter(|n| (128..=1518).contains(n)),
                    "frame size (128..1518)",
                )?
            }
            "--filters" => {
                cfg.filters = list(
                    &val()?,
                    |s| FILTERS.contains(&s).then(|| s.to_string()),
                    "filter",
                )?
            }
            other => return Err(format!("unknown option {other}\n{USAGE}")),
        }
    }
    testbed::ensure_root().map_err(|e| e.0)?;
    signal::install();
    let command = std::iter::once("parapet-peers".to_string())
        .chain(std::env::args().skip(1))
        .collect::<Vec<_>>()
        .join(" ");
    for n in parapet_testbed::remove_stale(parapet_peers::router::FWD_TAG) {
        eprintln!("deleted stale namespace {n}");
    }
    let res = forward::run(&cfg).map_err(|e| e.0);
    parapet_peers::remove_workdir();
    let res = res?;
    let md = format!("`{command}`\n{}", forward::markdown(&res, &cfg));
    println!("{md}");
    if let Some(p) = &report {
        std::fs::write(p, &md).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    if let Some(p) = &json {
        let v = serde_json::json!({"command": command, "results": res, "targets": forward::targets(&res, &cfg)});
        std::fs::write(
            p,
            serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?,
        )
        .map_err(|e| format!("{}: {e}", p.display()))?;
    }
    if signal::stop_requested() {
        return Err("interrupted".into());
    }
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let r = match args.first().map(String::as_str) {
        Some("gen-rules") => gen_rules(&args[1..]),
        Some("cleanup") => {
            let fwd = parapet_testbed::remove_stale(parapet_peers::router::FWD_TAG);
            for n in testbed::remove_stale().into_iter().chain(fwd) {
                eprintln!("deleted namespace {n}");
            }
            Ok(())
        }
        Some("-h") | Some("--help") | Some("help") => {
            println!("{USAGE}");
            Ok(())
        }
        Some("run") => run(&args[1..]),
        Some("forward") => forward(&args[1..]),
        _ => run(&args),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("parapet-peers: {e}");
            ExitCode::FAILURE
        }
    }
}
