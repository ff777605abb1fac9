//! What an experiment run is configured with and what it produces: the
//! vocabulary shared by the experiment drivers ([`crate::bench`]) and the ban
//! insertion experiment ([`crate::bans`]).

use crate::filters;
use crate::rules::doubling_sizes;
use crate::stats::Summary;
use crate::testbed::BedOptions;
use crate::traffic::GeneratorKind;
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// The experiments [`run`] can perform.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Experiment {
    /// Generator comparison on the unfiltered bed.
    Generators,
    /// Throughput vs rule count and frame size, plus ruleset load times.
    Throughput,
    /// 1000 late-failing vs 1000 early-failing rules.
    Ipfw,
    /// Ban insertion rates.
    Bans,
    /// TCP handshake RTT through the filter, idle and under flood.
    Latency,
}

impl Experiment {
    /// All experiments in run order.
    pub const ALL: [Experiment; 5] = [
        Experiment::Generators,
        Experiment::Throughput,
        Experiment::Ipfw,
        Experiment::Bans,
        Experiment::Latency,
    ];

    /// Command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Experiment::Generators => "generators",
            Experiment::Throughput => "throughput",
            Experiment::Ipfw => "ipfw",
            Experiment::Bans => "bans",
            Experiment::Latency => "latency",
        }
    }

    /// Parses [`Experiment::name`].
    pub fn parse(s: &str) -> Option<Experiment> {
        Self::ALL.into_iter().find(|e| e.name() == s)
    }
}

/// Everything a run needs to know.
#[derive(Debug, Clone)]
pub struct Config {
    /// `--quick` defaults were used.
    pub quick: bool,
    /// Filter names (see [`filters::by_name`]).
    pub filters: Vec<String>,
    /// Rule counts for the throughput experiment.
    pub rules: Vec<usize>,
    /// Nominal frame sizes (bytes, with FCS).
    pub frames: Vec<usize>,
    /// Measurement windows per point; the median is reported.
    pub runs: usize,
    /// Length of one measurement window.
    pub window: Duration,
    /// Time the generator runs before a window opens (queues fill, caches
    /// warm).
    pub warmup: Duration,
    /// Generator for all experiments except the generator comparison.
    pub generator: GeneratorKind,
    /// Experiments to run.
    pub experiments: Vec<Experiment>,
    /// Frame sizes of the generator comparison.
    pub generator_frames: Vec<usize>,
    /// Ban list sizes.
    pub ban_counts: Vec<usize>,
    /// Ban methods (see `bans::by_name`).
    pub ban_methods: Vec<String>,
    /// Time cap per (ban method, size); slower methods are extrapolated.
    pub ban_cap: Duration,
    /// TCP handshakes per latency measurement.
    pub latency_probes: usize,
    /// Test bed CPU placement.
    pub bed: BedOptions,
}

impl Config {
    /// The full run of issue 7 (about half an hour on two cores).
    pub fn full() -> Config {
        Config {
            quick: false,
            filters: filters::DEFAULT_FILTERS
                .iter()
                .map(|s| s.to_string())
                .collect(),
            rules: doubling_sizes(25, 25600),
            frames: vec![64, 128, 512, 1518],
            runs: 5,
            window: Duration::from_millis(1000),
            warmup: Duration::from_millis(300),
            generator: GeneratorKind::XdpLive,
            experiments: Experiment::ALL.to_vec(),
            generator_frames: vec![64, 1518],
            ban_counts: vec![7990, 1_000_000],
            ban_methods: BAN_METHODS.iter().map(|s| s.to_string()).collect(),
            ban_cap: Duration::from_secs(15),
            latency_probes: 50,
            bed: BedOptions::default(),
        }
    }

    /// `--quick`: about two minutes.
    pub fn quick() -> Config {
        Config {
            quick: true,
            rules: vec![25, 400, 6400],
            frames: vec![64, 1518],
            runs: 3,
            window: Duration::from_millis(300),
            warmup: Duration::from_millis(100),
            generator_frames: vec![64],
            ban_cap: Duration::from_secs(1),
            latency_probes: 10,
            ..Config::full()
        }
    }
}

/// One result line: one (experiment, filter, rule count, frame size).
#[derive(Debug, Clone, Serialize)]
pub struct Record {
    /// Experiment (`throughput`, `load`, `ipfw-late`, `ban-insert`, …).
    pub experiment: String,
    /// Filter, generator or ban method.
    pub filter: String,
    /// Rule count (or ban list size); `None` where not applicable.
    pub rules: Option<usize>,
    /// Nominal frame size in bytes; `None` where not applicable.
    pub frame: Option<usize>,
    /// Unit of median/min/max.
    pub unit: String,
    /// Median over runs.
    pub median: f64,
    /// Smallest run.
    pub min: f64,
    /// Largest run.
    pub max: f64,
    /// Number of runs.
    pub runs: usize,
    /// Further numbers, e.g. Mbit/s, offered load, extrapolation flags.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, serde_json::Value>,
}

impl Record {
    /// A record from a summary.
    pub fn new(
        experiment: &str,
        filter: &str,
        rules: Option<usize>,
        frame: Option<usize>,
        unit: &str,
        s: Summary,
    ) -> Record {
        Record {
            experiment: experiment.into(),
            filter: filter.into(),
            rules,
            frame,
            unit: unit.into(),
            median: s.median,
            min: s.min,
            max: s.max,
            runs: s.runs,
            extra: BTreeMap::new(),
        }
    }

    /// Adds an `extra` field.
    pub fn with(mut self, k: &str, v: impl Into<serde_json::Value>) -> Record {
        self.extra.insert(k.into(), v.into());
        self
    }
}

/// Something that could not be measured, and why.
#[derive(Debug, Clone, Serialize)]
pub struct Skipped {
    /// What was skipped.
    pub what: String,
    /// Why.
    pub reason: String,
}

/// The outcome of [`run`].
#[derive(Debug, Clone, Default, Serialize)]
pub struct Results {
    /// Measured records.
    pub records: Vec<Record>,
    /// Skipped filters/methods/points.
    pub skipped: Vec<Skipped>,
    /// Generator actually used (after a fallback, if any).
    pub generator: Option<GeneratorKind>,
}

/// Progress display on stderr: step counter, elapsed time, last result.
pub struct Progress {
    total: usize,
    done: usize,
    start: Instant,
}

impl Progress {
    pub(crate) fn new(total: usize) -> Progress {
        Progress {
            total,
            done: 0,
            start: Instant::now(),
        }
    }

    /// Counts one step done and prints `msg`.
    pub fn step(&mut self, msg: &str) {
        self.done += 1;
        let e = self.start.elapsed().as_secs();
        eprintln!(
            "[{:>3}/{:<3} {:>2}:{:02}] {msg}",
            self.done.min(self.total),
            self.total,
            e / 60,
            e % 60
        );
    }

    /// Prints a line without counting a step.
    pub fn note(&self, msg: &str) {
        eprintln!("          {msg}");
    }
}

/// Every method name, in report order.
pub const BAN_METHODS: [&str; 14] = [
    "iptables-legacy-rule-per-process",
    "iptables-nft-rule-per-process",
    "iptables-legacy-restore-batch",
    "iptables-nft-restore-batch",
    "ipset-add-per-process",
    "ipset-restore",
    "nft-element-per-process",
    "nft-batch",
    "nft-interval-element-per-process",
    "nft-interval-batch",
    "xt_recent-proc-write",
    "parapet-ban-per-process",
    "parapet-ban-pipelined",
    "parapet-set-add-file",
];
