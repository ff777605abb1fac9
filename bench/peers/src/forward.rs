//! The seeds' throughput experiment in the FORWARD position (issue 14,
//! item 6): nf-HiPAC's worst-case ruleset of N rules in FORWARD on a router
//! namespace ([`crate::router`]), enforced by parapet at the netfilter
//! FORWARD hook, iptables-legacy, iptables-nft and an nft `hook forward`
//! chain, with no filter as the floor — all in one run, interleaved (every
//! round visits every size and filter), each point on a fresh bed.
//!
//! Two traffic forms: a UDP flood of 64-byte frames (packets/s counted at
//! the receiver) and a TCP stream (iperf3, Mbit/s) with the MTU set so that
//! frames are 128, 512 and 1,518 bytes (nf-HiPAC's own form, seed 004).

use crate::cmd;
use crate::router::{RouterBed, DST_IP, IN_IF, OUT_IF, SRC_IP, SRC_PORT, TCP_PORT, UDP_PORT};
use crate::signal;
use crate::stats::Summary;
use crate::{Error, Result};
use serde::Serialize;
use std::fmt::Write as _;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// The measured traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Form {
    /// UDP flood, 64-byte frames, packets/s at the receiver.
    Flood,
    /// One iperf3 TCP stream, Mbit/s at the receiver.
    Tcp,
}

impl Form {
    fn proto(self) -> &'static str {
        match self {
            Form::Flood => "udp",
            Form::Tcp => "tcp",
        }
    }
}

/// nf-HiPAC's worst case in FORWARD: `rules - 1` rules that match the
/// measured flow's input and output interface, source, destination,
/// protocol and source port and differ only in the destination port (the
/// last field checked), then the rule that accepts the flow. Policy ACCEPT.
pub fn iptables_forward(rules: usize, form: Form) -> String {
    let p = form.proto();
    let mut s = String::with_capacity(rules * 110 + 200);
    s.push_str("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n");
    for i in 0..rules.max(1) - 1 {
        let _ = writeln!(
            s,
            "-A FORWARD -s {SRC_IP}/32 -d {DST_IP}/32 -i {IN_IF} -o {OUT_IF} -p {p} -m {p} --sport {SRC_PORT} --dport {} -j DROP",
            worst_port(i)
        );
    }
    let _ = writeln!(
        s,
        "-A FORWARD -p {p} -m {p} --dport {} -j ACCEPT",
        last_port(form)
    );
    s.push_str("COMMIT\n");
    s
}

/// The same ruleset as one nft `type filter hook forward` chain, one rule
/// per rule, fields in the same order.
pub fn nft_forward(rules: usize, form: Form) -> String {
    let p = form.proto();
    let mut s = String::with_capacity(rules * 120 + 200);
    s.push_str("flush ruleset\ntable ip parapet_fwd {\n  chain forward {\n");
    s.push_str("    type filter hook forward priority filter; policy accept;\n");
    for i in 0..rules.max(1) - 1 {
        let _ = writeln!(
            s,
            "    iifname \"{IN_IF}\" oifname \"{OUT_IF}\" ip saddr {SRC_IP} ip daddr {DST_IP} {p} sport {SRC_PORT} {p} dport {} drop",
            worst_port(i)
        );
    }
    let _ = writeln!(s, "    {p} dport {} accept\n  }}\n}}", last_port(form));
    s
}

fn worst_port(i: usize) -> u16 {
    (10_000 + i % 55_000) as u16
}

fn last_port(form: Form) -> u16 {
    match form {
        Form::Flood => UDP_PORT,
        Form::Tcp => TCP_PORT,
    }
}

/// The filters of this experiment.
pub const FILTERS: [&str; 5] = [
    "none",
    "iptables-legacy",
    "iptables-nft",
    "nft",
    "parapet-forward",
];

/// A filter loaded into a bed's router; dropping it stops whatever process
/// the filter needs (parapetd). Rules go with the namespace.
pub struct Loaded {
    daemon: Option<Child>,
    /// Wall time of the load, process start-up included.
    pub elapsed: Duration,
}

impl Drop for Loaded {
    fn drop(&mut self) {
        if let Some(mut c) = self.daemon.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Why `filter` cannot run here, if it cannot.
pub fn unavailable(filter: &str) -> Option<String> {
    let need: &[&str] = match filter {
        "none" => &[],
        "iptables-legacy" => &["iptables-legacy-restore"],
        "iptables-nft" => &["iptables-nft-restore"],
        "nft" => &["nft"],
        "parapet-forward" => &[],
        _ => return Some(format!("unknown filter {filter}")),
    };
    let mut need: Vec<String> = need.iter().map(|s| s.to_string()).collect();
    if filter == "parapet-forward" {
        let (cli, daemon) = crate::bans::parapet_binaries();
        need.extend([cli, daemon]);
    }
    need.into_iter()
        .find(|p| !cmd::have(p))
        .map(|p| format!("{p} not found"))
}

/// Loads `filter` with the worst case of `rules` rules into the router.
pub fn load(bed: &RouterBed, filter: &str, rules: usize, form: Form) -> Result<Loaded> {
    let ns = bed.router();
    let t0 = Instant::now();
    let mut daemon = None;
    match filter {
        "none" => {}
        "iptables-legacy" | "iptables-nft" => {
            let bin = format!("{filter}-restore");
            let text = iptables_forward(rules, form);
            ns.run_in(|| cmd::run(&bin, &[], Some(text.as_bytes())))?;
        }
        "nft" => {
            let path = crate::workdir()?.join(format!("fwd-{rules}.nft"));
            std::fs::write(&path, nft_forward(rules, form))?;
            let p = path.to_string_lossy().into_owned();
            ns.run_in(|| cmd::run("nft", &["-f", &p], None))?;
        }
        "parapet-forward" => {
            let (cli, bin) = crate::bans::parapet_binaries();
            let dir = crate::workdir()?.join("parapetd-fwd");
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir)?;
            let sock = dir.join("sock");
            // `ip netns exec` gives parapetd a private mount namespace whose
            // bpffs (it mounts one) dies with it: nothing stays pinned.
            let child = ns
                .command(&bin)
                .arg("--socket")
                .arg(&sock)
                .arg("--state-dir")
                .arg(dir.join("state"))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| Error(format!("{bin}: {e}")))?;
            daemon = Some(child);
            let mut guard = Loaded {
                daemon,
                elapsed: Duration::ZERO,
            };
            let waited = Instant::now();
            while parapet_daemon::Client::connect(&sock).is_err() {
                if waited.elapsed() > Duration::from_secs(20) {
                    return Err(Error("parapetd did not open its socket within 20 s".into()));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let rules_path = dir.join("fwd.rules");
            std::fs::write(&rules_path, iptables_forward(rules, form))?;
            let s = sock.to_string_lossy().into_owned();
            let r = rules_path.to_string_lossy().into_owned();
            cmd::run(&cli, &["--socket", &s, "apply", &r], None)?;
            cmd::run(&cli, &["--socket", &s, "attach"], None)?;
            guard.elapsed = t0.elapsed();
            if let Some(c) = &guard.daemon {
                settle(c.id());
            }
            return Ok(guard);
        }
        other => return Err(Error(format!("unknown filter {other}"))),
    }
    Ok(Loaded {
        daemon,
        elapsed: t0.elapsed(),
    })
}

/// CPU time (user + system, clock ticks) of a process, from /proc.
fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) start at ") ".
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

/// Waits (at most 60 s) until parapetd has finished the work that follows
/// an apply (journal, snapshot) — no CPU time in 300 ms — so that the
/// measurement times the dataplane, not the control plane still busy on
/// the same two cores.
fn settle(pid: u32) {
    let t0 = Instant::now();
    let mut last = cpu_ticks(pid);
    while t0.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(300));
        let now = cpu_ticks(pid);
        if now.is_none() || now == last {
            return;
        }
        last = now;
    }
}

/// How a run is shaped.
#[derive(Debug, Clone)]
pub struct FwdConfig {
    /// Rule counts.
    pub rules: Vec<usize>,
    /// Filters (of [`FILTERS`]).
    pub filters: Vec<String>,
    /// Nominal frame sizes of the TCP form.
    pub frames: Vec<usize>,
    /// Rounds; every point is measured once per round.
    pub rounds: usize,
    /// Flood warm-up and window.
    pub warmup: Duration,
    /// Flood measurement window.
    pub window: Duration,
    /// iperf3 `-t`.
    pub tcp_secs: u32,
}

impl FwdConfig {
    /// 25 … 25,600 rules (×4), three rounds, 128/512/1518-byte TCP frames.
    pub fn full() -> FwdConfig {
        FwdConfig {
            rules: vec![25, 100, 400, 1600, 6400, 25600],
            filters: FILTERS.iter().map(|s| s.to_string()).collect(),
            frames: vec![128, 512, 1518],
            rounds: 3,
            warmup: Duration::from_millis(200),
            window: Duration::from_millis(700),
            tcp_secs: 1,
        }
    }

    /// Smoke run: two sizes, one round, two frame sizes (< 1 minute).
    pub fn quick() -> FwdConfig {
        FwdConfig {
            rules: vec![25, 400],
            frames: vec![128, 1518],
            rounds: 1,
            warmup: Duration::from_millis(100),
            window: Duration::from_millis(300),
            ..FwdConfig::full()
        }
    }
}

/// One measured point: all rounds of one (form, frame, filter, rules).
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    /// `flood` (kpps) or `tcp` (Mbit/s).
    pub form: Form,
    /// Nominal frame size (64 for the flood).
    pub frame: usize,
    /// Filter name.
    pub filter: String,
    /// Rules in FORWARD.
    pub rules: usize,
    /// One value per round: kpps (flood) or Mbit/s (tcp).
    pub samples: Vec<f64>,
    /// Load times (ms), one per round and form.
    pub load_ms: Vec<f64>,
}

impl Point {
    /// Median and spread of the samples.
    pub fn summary(&self) -> Option<Summary> {
        Summary::of(&self.samples)
    }
}

/// Results of a run.
#[derive(Debug, Default, Serialize)]
pub struct FwdResults {
    /// Every point.
    pub points: Vec<Point>,
    /// Filters that could not run, with the reason.
    pub skipped: Vec<String>,
}

impl FwdResults {
    fn entry(&mut self, form: Form, frame: usize, filter: &str, rules: usize) -> &mut Point {
        let i = self.points.iter().position(|p| {
            p.form == form && p.frame == frame && p.filter == filter && p.rules == rules
        });
        match i {
            Some(i) => &mut self.points[i],
            None => {
                self.points.push(Point {
                    form,
                    frame,
                    filter: filter.to_string(),
                    rules,
                    samples: Vec::new(),
                    load_ms: Vec::new(),
                });
                self.points.last_mut().expect("just pushed")
            }
        }
    }

    /// Median of one point.
    pub fn median(&self, form: Form, frame: usize, filter: &str, rules: usize) -> Option<f64> {
        self.points
            .iter()
            .find(|p| p.form == form && p.frame == frame && p.filter == filter && p.rules == rules)
            .and_then(Point::summary)
            .map(|s| s.median)
    }
}

/// Probe datagrams per check that a filter is in force.
const PROBES: u64 = 20;

/// Runs the experiment. Every point gets a fresh bed; before the flood the
/// filter is checked to be in force (datagrams that rule 1 drops must not
/// arrive; with no filter they must).
pub fn run(cfg: &FwdConfig) -> Result<FwdResults> {
    let mut res = FwdResults::default();
    let mut filters = Vec::new();
    for f in &cfg.filters {
        match unavailable(f) {
            Some(why) => res.skipped.push(format!("{f}: {why}")),
            None => filters.push(f.clone()),
        }
    }
    let t_run = Instant::now();
    for round in 0..cfg.rounds {
        for &n in &cfg.rules {
            for form in [Form::Flood, Form::Tcp] {
                for f in &filters {
                    if signal::stop_requested() {
                        return Ok(res);
                    }
                    let bed = RouterBed::create()?;
                    let loaded = load(&bed, f, n, form)?;
                    let ms = loaded.elapsed.as_secs_f64() * 1e3;
                    match form {
                        Form::Flood => {
                            check_in_force(&bed, f, n)?;
                            let pps = bed.flood(cfg.warmup, cfg.window)?;
                            let p = res.entry(form, 64, f, n);
                            p.samples.push(pps / 1e3);
                            p.load_ms.push(ms);
                            eprintln!(
                                "[{:6.1}s] round {} flood {f:>16} {n:>6} rules: {:9.1} kpps (load {ms:.0} ms)",
                                t_run.elapsed().as_secs_f64(), round + 1, pps / 1e3
                            );
                        }
                        Form::Tcp => {
                            for &frame in &cfg.frames {
                                bed.set_frame(frame)?;
                                let mbit = bed.tcp_stream(cfg.tcp_secs)?;
                                let p = res.entry(form, frame, f, n);
                                p.samples.push(mbit);
                                p.load_ms.push(ms);
                                eprintln!(
                                    "[{:6.1}s] round {} tcp {frame:>4} B {f:>16} {n:>6} rules: {mbit:9.2} Mbit/s",
                                    t_run.elapsed().as_secs_f64(), round + 1
                                );
                            }
                        }
                    }
                    drop(loaded);
                    drop(bed);
                }
            }
        }
    }
    Ok(res)
}

fn check_in_force(bed: &RouterBed, filter: &str, rules: usize) -> Result<()> {
    if rules < 2 {
        return Ok(());
    }
    // Rule 1 drops UDP 198.18.1.1:1024 → 198.18.2.2:10000.
    let arrived = bed.probe(worst_port(0), PROBES)?;
    let want = if filter == "none" { PROBES } else { 0 };
    if arrived != want {
        return Err(Error(format!(
            "{filter} with {rules} rules: {arrived} of {PROBES} probes that rule 1 drops reached the receiver (expected {want})"
        )));
    }
    Ok(())
}

/// The targets of issue 14 for one form/frame: parapet at the largest size
/// against its own smallest size and against nft at the largest size.
#[derive(Debug, Clone, Serialize)]
pub struct Target {
    /// Form and frame of the comparison.
    pub form: Form,
    /// Nominal frame size.
    pub frame: usize,
    /// parapet at max rules / parapet at min rules (target ≥ 0.8).
    pub own_ratio: Option<f64>,
    /// parapet at max rules / nft at max rules (target ≥ 100).
    pub nft_ratio: Option<f64>,
}

impl Target {
    /// Both targets met.
    pub fn met(&self) -> bool {
        self.own_ratio.is_some_and(|r| r >= 0.8) && self.nft_ratio.is_some_and(|r| r >= 100.0)
    }
}

/// The targets for every form and frame of the run.
pub fn targets(res: &FwdResults, cfg: &FwdConfig) -> Vec<Target> {
    let (Some(&lo), Some(&hi)) = (cfg.rules.iter().min(), cfg.rules.iter().max()) else {
        return Vec::new();
    };
    let mut forms = vec![(Form::Flood, 64)];
    forms.extend(cfg.frames.iter().map(|&f| (Form::Tcp, f)));
    forms
        .into_iter()
        .map(|(form, frame)| {
            let p_hi = res.median(form, frame, "parapet-forward", hi);
            let p_lo = res.median(form, frame, "parapet-forward", lo);
            let n_hi = res.median(form, frame, "nft", hi);
            Target {
                form,
                frame,
                own_ratio: p_hi.zip(p_lo).map(|(h, l)| h / l),
                nft_ratio: p_hi.zip(n_hi).map(|(h, n)| h / n),
            }
        })
        .collect()
}

fn cell(p: Option<&Point>) -> String {
    match p.and_then(Point::summary) {
        Some(s) if s.runs > 1 => format!("{} ({}–{})", fmt(s.median), fmt(s.min), fmt(s.max)),
        Some(s) => fmt(s.median),
        None => "–".into(),
    }
}

fn fmt(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 1.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.3}")
    }
}

/// Markdown: one table per form/frame (rows: rules; columns: filters),
/// median (min–max) over the rounds, then the targets.
pub fn markdown(res: &FwdResults, cfg: &FwdConfig) -> String {
    let mut s = String::new();
    let filters: Vec<&String> = cfg
        .filters
        .iter()
        .filter(|f| res.points.iter().any(|p| &p.filter == *f))
        .collect();
    let mut forms = vec![(
        Form::Flood,
        64,
        "UDP flood, 64-byte frames: kpps at the receiver".to_string(),
    )];
    for &f in &cfg.frames {
        forms.push((
            Form::Tcp,
            f,
            format!("TCP stream (iperf3), {f}-byte frames: Mbit/s"),
        ));
    }
    for (form, frame, title) in forms {
        let _ = writeln!(s, "\n{title}\n");
        let _ = write!(s, "| rules |");
        for f in &filters {
            let _ = write!(s, " {f} |");
        }
        let _ = write!(s, "\n|---:|");
        for _ in &filters {
            s.push_str("---:|");
        }
        s.push('\n');
        for &n in &cfg.rules {
            let _ = write!(s, "| {n} |");
            for f in &filters {
                let p = res.points.iter().find(|p| {
                    p.form == form && p.frame == frame && &p.filter == *f && p.rules == n
                });
                let _ = write!(s, " {} |", cell(p));
            }
            s.push('\n');
        }
    }
    let _ = writeln!(
        s,
        "\nTargets (parapet at the largest size ÷ parapet at the smallest, ≥ 0.8; ÷ nft at the largest, ≥ 100):\n"
    );
    s.push_str("| traffic | parapet own ratio | parapet ÷ nft | met |\n|---|---:|---:|---|\n");
    for t in targets(res, cfg) {
        let name = match t.form {
            Form::Flood => "UDP flood 64 B".to_string(),
            Form::Tcp => format!("TCP {} B", t.frame),
        };
        let r = |x: Option<f64>| x.map_or("–".into(), |x| format!("{x:.2}"));
        let _ = writeln!(
            s,
            "| {name} | {} | {} | {} |",
            r(t.own_ratio),
            r(t.nft_ratio),
            if t.met() { "yes" } else { "no" }
        );
    }
    for sk in &res.skipped {
        let _ = writeln!(s, "\nskipped: {sk}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rulesets_have_n_rules_and_end_in_the_accept() {
        let ipt = iptables_forward(400, Form::Tcp);
        assert_eq!(
            ipt.lines().filter(|l| l.starts_with("-A FORWARD")).count(),
            400
        );
        assert!(ipt.contains("-i fr0 -o fr1 -p tcp -m tcp --sport 1024 --dport 10000 -j DROP"));
        assert!(ipt.contains("-A FORWARD -p tcp -m tcp --dport 5201 -j ACCEPT\nCOMMIT"));
        let nft = nft_forward(25, Form::Flood);
        assert_eq!(nft.lines().filter(|l| l.ends_with(" drop")).count(), 24);
        assert!(nft.contains("hook forward"));
        assert!(nft.contains("udp dport 5001 accept"));
    }

    #[test]
    fn targets_need_both_ratios() {
        let t = Target {
            form: Form::Flood,
            frame: 64,
            own_ratio: Some(0.9),
            nft_ratio: Some(150.0),
        };
        assert!(t.met());
        let t = Target {
            nft_ratio: Some(99.0),
            ..t
        };
        assert!(!t.met());
        let t = Target {
            own_ratio: None,
            nft_ratio: Some(150.0),
            ..t
        };
        assert!(!t.met());
    }
}
