//! The experiments: generator comparison, throughput vs rules (with load
//! times), the ipfw early/late experiment, ban insertion and latency under
//! load. Each produces [`Record`]s; [`run`] drives the lot.

use crate::bans;
pub use crate::experiment::{Config, Experiment, Progress, Record, Results, Skipped};
use crate::filters::{self, Filter};
use crate::rules::{RuleKind, RuleSpec};
use crate::signal;
use crate::stats::{quantile, si, Summary};
use crate::testbed::{Side, Testbed, FLT_IP};
use crate::traffic::{self, GeneratorKind};
use crate::{Error, Result};
use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Rates from one measurement window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Frames/s the generator got onto gen0 (including ones veth dropped
    /// because the receive backlog was full).
    pub offered_pps: f64,
    /// Frames/s seen by flt0.
    pub rx_if_pps: f64,
    /// Datagrams/s that passed INPUT and reached UDP: the throughput.
    pub delivered_pps: f64,
}

fn sleep_bounded(d: Duration) -> Result<()> {
    let end = Instant::now() + d;
    while Instant::now() < end {
        signal::check()?;
        std::thread::sleep((end - Instant::now()).min(Duration::from_millis(50)));
    }
    Ok(())
}

/// One measurement window: start the generator, warm up, read counters,
/// wait `window`, read again, stop.
pub fn measure_once(
    bed: &Testbed,
    kind: GeneratorKind,
    frame: usize,
    warmup: Duration,
    window: Duration,
) -> Result<Sample> {
    let mut run = traffic::start(bed, kind, frame, warmup + window + Duration::from_secs(5))?;
    sleep_bounded(warmup)?;
    // External generators (trafgen) may need longer than the warm-up to
    // start on a loaded machine: open the window only once frames flow.
    let mut c0 = bed.counters()?;
    let wait_end = Instant::now() + Duration::from_secs(3);
    loop {
        sleep_bounded(Duration::from_millis(20))?;
        run.check_alive()?;
        let c = bed.counters()?;
        let flowing = c.gen_tx != c0.gen_tx;
        c0 = c;
        if flowing {
            break;
        }
        if Instant::now() > wait_end {
            return Err(Error(format!("{} sent nothing within 3 s", kind.name())));
        }
    }
    let t0 = Instant::now();
    sleep_bounded(window)?;
    let c1 = bed.counters()?;
    let dt = t0.elapsed().as_secs_f64();
    run.check_alive()?;
    run.stop()?;
    let d = c1.since(&c0);
    Ok(Sample {
        offered_pps: (d.gen_tx + d.gen_tx_dropped) as f64 / dt,
        rx_if_pps: d.flt_rx as f64 / dt,
        delivered_pps: d.udp_delivered as f64 / dt,
    })
}

fn measure_point(
    cfg: &Config,
    bed: &Testbed,
    kind: GeneratorKind,
    frame: usize,
) -> Result<(Summary, Summary, Summary)> {
    let mut del = Vec::new();
    let mut off = Vec::new();
    let mut rx = Vec::new();
    for _ in 0..cfg.runs.max(1) {
        let s = measure_once(bed, kind, frame, cfg.warmup, cfg.window)?;
        del.push(s.delivered_pps);
        off.push(s.offered_pps);
        rx.push(s.rx_if_pps);
    }
    Ok((
        Summary::of(&del).expect("runs >= 1"),
        Summary::of(&off).expect("runs >= 1"),
        Summary::of(&rx).expect("runs >= 1"),
    ))
}

fn throughput_record(
    exp: &str,
    filter: &str,
    rules: Option<usize>,
    frame: usize,
    (del, off, rx): (Summary, Summary, Summary),
) -> Record {
    let mbit = |pps: f64| pps * frame as f64 * 8.0 / 1e6;
    Record::new(exp, filter, rules, Some(frame), "pps", del)
        .with("mbps_median", mbit(del.median))
        .with("mbps_min", mbit(del.min))
        .with("mbps_max", mbit(del.max))
        .with("offered_pps_median", off.median)
        .with("rx_if_pps_median", rx.median)
}

/// Resolves filter names, recording unavailable ones as skipped.
fn usable_filters(names: &[String], res: &mut Results) -> Result<Vec<Box<dyn Filter>>> {
    let mut v = Vec::new();
    for n in names {
        let f = filters::by_name(n).ok_or_else(|| {
            Error(format!(
                "unknown filter {n:?} (known: {})",
                filters::ALL_FILTERS.join(", ")
            ))
        })?;
        match f.available() {
            Ok(()) => v.push(f),
            Err(reason) => res.skipped.push(Skipped {
                what: format!("filter {n}"),
                reason,
            }),
        }
    }
    Ok(v)
}

/// Runs the configured experiments. Errors in one filter or method are
/// recorded as skipped and the run goes on; Ctrl-C ends it early with the
/// results so far.
pub fn run(cfg: &Config) -> Result<Results> {
    crate::testbed::ensure_root()?;
    let mut res = Results::default();
    let mut cfg = cfg.clone();
    if let Err(e) = probe_generator(&cfg) {
        let fallback = GeneratorKind::PacketMmap;
        eprintln!(
            "generator {} unusable here ({e}); falling back to {}",
            cfg.generator.name(),
            fallback.name()
        );
        res.skipped.push(Skipped {
            what: format!("generator {}", cfg.generator.name()),
            reason: format!("{e}; used {} instead", fallback.name()),
        });
        cfg.generator = fallback;
    }
    let cfg = &cfg;
    res.generator = Some(cfg.generator);
    let filters = usable_filters(&cfg.filters, &mut res)?;
    let has = |e: Experiment| cfg.experiments.contains(&e);
    let mut total = 0;
    if has(Experiment::Generators) {
        total += GeneratorKind::ALL.len() * cfg.generator_frames.len();
    }
    if has(Experiment::Throughput) {
        for f in &filters {
            let sizes = if f.name() == "none" {
                1
            } else {
                cfg.rules.len()
            };
            total += sizes * cfg.frames.len();
        }
    }
    if has(Experiment::Ipfw) {
        total += filters
            .iter()
            .filter(|f| f.name() != "none" && f.supports(RuleKind::IpfwLate))
            .count()
            * 3;
    }
    if has(Experiment::Bans) {
        total += cfg.ban_methods.len() * cfg.ban_counts.len();
    }
    if has(Experiment::Latency) {
        let sizes = if cfg.rules.len() > 1 { 2 } else { 1 };
        for f in &filters {
            total += 2 * if f.name() == "none" { 1 } else { sizes };
        }
    }
    let mut p = Progress::new(total);
    for e in &cfg.experiments {
        if signal::stop_requested() {
            break;
        }
        let r = match e {
            Experiment::Generators => generators(cfg, &mut res, &mut p),
            Experiment::Throughput => throughput(cfg, &filters, &mut res, &mut p),
            Experiment::Ipfw => ipfw(cfg, &filters, &mut res, &mut p),
            Experiment::Bans => bans::run(cfg, &mut res, &mut p),
            Experiment::Latency => latency(cfg, &filters, &mut res, &mut p),
        };
        if let Err(err) = r {
            if signal::stop_requested() {
                break;
            }
            res.skipped.push(Skipped {
                what: format!("experiment {}", e.name()),
                reason: err.0,
            });
        }
    }
    if signal::stop_requested() {
        p.note("interrupted: keeping the results so far");
    }
    Ok(res)
}

/// Checks that the configured generator gets frames onto the wire here.
fn probe_generator(cfg: &Config) -> Result<()> {
    let bed = Testbed::create(cfg.bed)?;
    measure_once(
        &bed,
        cfg.generator,
        64,
        Duration::from_millis(50),
        Duration::from_millis(100),
    )
    .map(|_| ())
}

fn generators(cfg: &Config, res: &mut Results, p: &mut Progress) -> Result<()> {
    let bed = Testbed::create(cfg.bed)?;
    for &frame in &cfg.generator_frames {
        for kind in GeneratorKind::ALL {
            signal::check()?;
            match measure_point(cfg, &bed, kind, frame) {
                Ok(s) => {
                    p.step(&format!(
                        "generator {:<11} {frame:>4} B: offered {}pps, at flt0 {}pps, delivered {}pps",
                        kind.name(),
                        si(s.1.median),
                        si(s.2.median),
                        si(s.0.median)
                    ));
                    res.records
                        .push(throughput_record("generator", kind.name(), None, frame, s));
                }
                Err(e) => {
                    p.step(&format!("generator {} skipped: {e}", kind.name()));
                    res.skipped.push(Skipped {
                        what: format!("generator {} {frame} B", kind.name()),
                        reason: e.0,
                    });
                }
            }
        }
    }
    Ok(())
}

fn throughput(
    cfg: &Config,
    filters: &[Box<dyn Filter>],
    res: &mut Results,
    p: &mut Progress,
) -> Result<()> {
    for f in filters {
        signal::check()?;
        if let Err(e) = throughput_filter(cfg, f.as_ref(), res, p) {
            signal::check()?;
            p.note(&format!("{} failed: {e}", f.name()));
            res.skipped.push(Skipped {
                what: format!("throughput {}", f.name()),
                reason: e.0,
            });
        }
    }
    Ok(())
}

fn throughput_filter(
    cfg: &Config,
    f: &dyn Filter,
    res: &mut Results,
    p: &mut Progress,
) -> Result<()> {
    // A fresh bed per filter: legacy iptables hooks, once registered in a
    // namespace, stay even when the chains are empty, and would tax the
    // next filter.
    let bed = Testbed::create(cfg.bed)?;
    let name = f.name();
    let sizes: Vec<usize> = if name == "none" {
        vec![0]
    } else {
        cfg.rules.clone()
    };
    for &n in &sizes {
        signal::check()?;
        if n > 0 {
            f.clear(&bed)?;
            let spec = RuleSpec {
                rules: n,
                kind: RuleKind::WorstCase,
            };
            let t = f.load(&bed, &spec)?;
            let ms = t.as_secs_f64() * 1e3;
            res.records.push(
                Record::new("load", &name, Some(n), None, "ms", Summary::one(ms))
                    .with("rules_per_s", n as f64 / t.as_secs_f64().max(1e-9)),
            );
            p.note(&format!("{name}: loaded {n} rules in {ms:.1} ms"));
        }
        for &frame in &cfg.frames {
            let s = measure_point(cfg, &bed, cfg.generator, frame)?;
            p.step(&format!(
                "throughput {name:<16} {n:>6} rules {frame:>4} B: {}pps ({:.0} Mbit/s), offered {}pps",
                si(s.0.median),
                s.0.median * frame as f64 * 8.0 / 1e6,
                si(s.1.median)
            ));
            let rules = if n == 0 { None } else { Some(n) };
            res.records
                .push(throughput_record("throughput", &name, rules, frame, s));
        }
    }
    f.clear(&bed)?;
    Ok(())
}

/// The ipfw FAQ experiment: per-packet cost per rule when rules fail late
/// vs early. Chains of 1000 rules (999 failing + accept) are compared with
/// a chain of the accept alone, on 64-byte frames.
fn ipfw(
    cfg: &Config,
    filters: &[Box<dyn Filter>],
    res: &mut Results,
    p: &mut Progress,
) -> Result<()> {
    const N: usize = 1000;
    for f in filters {
        let name = f.name();
        if name == "none" || !f.supports(RuleKind::IpfwLate) {
            continue;
        }
        signal::check()?;
        let r = (|| -> Result<()> {
            let bed = Testbed::create(cfg.bed)?;
            let mut pps = BTreeMap::new();
            for (label, rules, kind) in [
                ("ipfw-base", 1, RuleKind::WorstCase),
                ("ipfw-late", N, RuleKind::IpfwLate),
                ("ipfw-early", N, RuleKind::IpfwEarly),
            ] {
                f.clear(&bed)?;
                f.load(&bed, &RuleSpec { rules, kind })?;
                let s = measure_point(cfg, &bed, cfg.generator, 64)?;
                p.step(&format!(
                    "ipfw {name:<16} {label:<10} {rules:>4} rules: {}pps",
                    si(s.0.median)
                ));
                pps.insert(label, s.0);
                let mut rec = throughput_record(label, &name, Some(rules), 64, s);
                if label != "ipfw-base" {
                    let base = pps["ipfw-base"];
                    // Extra time per packet over the 1-rule chain, spread
                    // over the 999 extra rules. min/max pair the extremes.
                    let per_rule = |with: f64, without: f64| {
                        (1.0 / with - 1.0 / without) * 1e9 / (N - 1) as f64
                    };
                    rec = rec
                        .with("ns_per_rule_median", per_rule(s.0.median, base.median))
                        .with("ns_per_rule_min", per_rule(s.0.max, base.min))
                        .with("ns_per_rule_max", per_rule(s.0.min, base.max));
                }
                res.records.push(rec);
            }
            f.clear(&bed)
        })();
        if let Err(e) = r {
            signal::check()?;
            res.skipped.push(Skipped {
                what: format!("ipfw {name}"),
                reason: e.0,
            });
        }
    }
    Ok(())
}

const LAT_PORT: u16 = 5002;

/// TCP handshake RTT (connect() until SYN-ACK) from the generator namespace
/// to a listener in the filter namespace, idle and while the generator
/// floods 64-byte frames, with the smallest and largest ruleset.
fn latency(
    cfg: &Config,
    filters: &[Box<dyn Filter>],
    res: &mut Results,
    p: &mut Progress,
) -> Result<()> {
    let sizes: Vec<usize> = match (cfg.rules.first(), cfg.rules.last()) {
        (Some(&a), Some(&b)) if a != b => vec![a, b],
        (Some(&a), _) => vec![a],
        _ => vec![25],
    };
    for f in filters {
        signal::check()?;
        let name = f.name();
        let r = (|| -> Result<()> {
            let bed = Testbed::create(cfg.bed)?;
            let stop = Arc::new(AtomicBool::new(false));
            let acceptor = spawn_acceptor(&bed, stop.clone())?;
            let sizes = if name == "none" {
                vec![0]
            } else {
                sizes.clone()
            };
            for &n in &sizes {
                if n > 0 {
                    f.clear(&bed)?;
                    f.load(
                        &bed,
                        &RuleSpec {
                            rules: n,
                            kind: RuleKind::WorstCase,
                        },
                    )?;
                }
                for loaded in [false, true] {
                    let run = if loaded {
                        let r = traffic::start(&bed, cfg.generator, 64, Duration::from_secs(60))?;
                        sleep_bounded(cfg.warmup)?;
                        Some(r)
                    } else {
                        None
                    };
                    let probes = probe_rtts(&bed, cfg.latency_probes)?;
                    if let Some(r) = run {
                        r.stop()?;
                    }
                    let exp = if loaded {
                        "latency-load"
                    } else {
                        "latency-idle"
                    };
                    let ok: Vec<f64> = probes.iter().filter_map(|x| *x).collect();
                    let lost = probes.len() - ok.len();
                    let rules = if n == 0 { None } else { Some(n) };
                    if let Some(s) = Summary::of(&ok) {
                        p.step(&format!(
                            "{exp} {name:<16} {n:>6} rules: median {:.0} us, p99 {:.0} us, {lost} lost",
                            s.median,
                            quantile(&ok, 0.99)
                        ));
                        res.records.push(
                            Record::new(exp, &name, rules, Some(64), "us", s)
                                .with("p99", quantile(&ok, 0.99))
                                .with("lost", lost)
                                .with("probes", probes.len()),
                        );
                    } else {
                        p.step(&format!("{exp} {name} {n} rules: all {lost} probes lost"));
                        res.skipped.push(Skipped {
                            what: format!("{exp} {name} {n} rules"),
                            reason: format!("all {lost} handshakes timed out"),
                        });
                    }
                }
            }
            stop.store(true, Ordering::SeqCst);
            let _ = acceptor.join();
            f.clear(&bed)
        })();
        if let Err(e) = r {
            signal::check()?;
            res.skipped.push(Skipped {
                what: format!("latency {name}"),
                reason: e.0,
            });
        }
    }
    Ok(())
}

/// Accepts and closes connections in the filter namespace until `stop`
/// (or 10 minutes, the hard bound).
fn spawn_acceptor(bed: &Testbed, stop: Arc<AtomicBool>) -> Result<std::thread::JoinHandle<()>> {
    let listener = bed.in_ns(Side::Filter, || -> Result<TcpListener> {
        let l = TcpListener::bind((FLT_IP, LAT_PORT))?;
        l.set_nonblocking(true)?;
        Ok(l)
    })??;
    Ok(std::thread::spawn(move || {
        let end = Instant::now() + Duration::from_secs(600);
        while !stop.load(Ordering::Relaxed) && Instant::now() < end {
            match listener.accept() {
                Ok((s, _)) => drop(s),
                Err(_) => std::thread::sleep(Duration::from_millis(2)),
            }
        }
    }))
}

/// `count` handshake RTTs in µs (`None` = timed out after 3 s), spaced
/// 20 ms apart, at most 0.5 s per probe and 5-15 s in total.
fn probe_rtts(bed: &Testbed, count: usize) -> Result<Vec<Option<f64>>> {
    let bound = (Duration::from_millis(500) * count as u32)
        .clamp(Duration::from_secs(5), Duration::from_secs(15));
    bed.in_ns(Side::Gen, || {
        let addr = SocketAddr::from((FLT_IP, LAT_PORT));
        let end = Instant::now() + bound;
        let mut v = Vec::new();
        for _ in 0..count {
            if Instant::now() > end || signal::stop_requested() {
                break;
            }
            let t = Instant::now();
            let r = TcpStream::connect_timeout(&addr, Duration::from_secs(3));
            v.push(r.ok().map(|_| t.elapsed().as_secs_f64() * 1e6));
            std::thread::sleep(Duration::from_millis(20));
        }
        v
    })
}
