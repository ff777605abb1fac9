//! Prometheus metrics: what the daemon counts for them ([`Tally`],
//! [`Histogram`]), how a scrape collects it ([`collect`]) and the text
//! exposition format it is written in. Serving it (the `--metrics` HTTP
//! listener, the `--metrics-textfile` writer) is [`crate::metrics_http`].
//!
//! A scrape must not slow the ban path, which runs under the state lock.
//! So a scrape takes that lock only for short, bounded steps: once to copy
//! the scalars, the set sizes and the dataplane statistics, then once per
//! [`RULE_CHUNK`] rules to read their kernel counters (one map lookup per
//! rule), releasing it between chunks; labels and text are built without
//! it. A ban waits for at most one chunk. The journal's fsync histogram is
//! atomics and needs no lock at all.
//!
//! Label values are never addresses: per-rule series are labelled by chain,
//! rule id and comment, and any address-looking word of a comment is
//! replaced by `ADDR`. Per-rule series are capped (`max_rule_series`); the
//! counters of the rules past the cap are summed into one `rule="other"`
//! series, so a 25,600-rule ruleset costs a bounded number of series.

use crate::shared::Shared;
use parapet_model::{Counters, Ruleset};
use serde_json::Value;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Rules whose kernel counters one lock hold reads.
pub const RULE_CHUNK: usize = 1024;
/// Default cap on per-rule series (`--metrics-max-rules`).
pub const DEFAULT_MAX_RULE_SERIES: usize = 1000;
/// At most this many sets get their own series; the rest are left out
/// (and counted in `parapet_sets`).
pub const MAX_SET_SERIES: usize = 256;
/// Longest comment label value, in characters.
const MAX_COMMENT: usize = 64;

/// Where and how the metrics are exposed (parapetd's `--metrics*` flags).
#[derive(Clone, Debug)]
pub struct MetricsConfig {
    /// `--metrics ADDR:PORT`: serve `/metrics` over HTTP there.
    pub listen: Option<SocketAddr>,
    /// `--metrics-allow-remote`: allow a non-loopback `listen` address.
    pub allow_remote: bool,
    /// `--metrics-textfile DIR`: write `DIR/parapet.prom` periodically.
    pub textfile: Option<PathBuf>,
    /// How often the text file is rewritten.
    pub textfile_interval: Duration,
    /// Most per-rule series; the rest are summed into `rule="other"`.
    pub max_rule_series: usize,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig {
            listen: None,
            allow_remote: false,
            textfile: None,
            textfile_interval: Duration::from_secs(15),
            max_rule_series: DEFAULT_MAX_RULE_SERIES,
        }
    }
}

impl MetricsConfig {
    /// Refuses a listener on a non-loopback address unless allowed: the
    /// daemon opens no network listener unless asked, and a remote one
    /// only when asked twice.
    pub fn check(&self) -> Result<(), String> {
        match self.listen {
            Some(a) if !a.ip().is_loopback() && !self.allow_remote => Err(format!(
                "--metrics {a}: not a loopback address; add --metrics-allow-remote to serve metrics to other hosts"
            )),
            _ => Ok(()),
        }
    }
}

/// Per-set change counts since the daemon started.
#[derive(Clone, Copy, Debug, Default)]
pub struct SetTally {
    /// Elements added by clients.
    pub inserts: u64,
    /// Elements deleted by clients.
    pub deletes: u64,
    /// Elements removed because their timeout passed.
    pub expiries: u64,
}

/// What the state counts for metrics. Lives in [`crate::state::State`],
/// so it is only changed under the state lock, by the code that already
/// holds it: plain integers, no extra synchronisation on the ban path.
#[derive(Clone, Debug, Default)]
pub struct Tally {
    /// Addresses newly banned (`ban`).
    pub bans: u64,
    /// Addresses unbanned (`unban`).
    pub unbans: u64,
    /// Successful applies.
    pub applies: u64,
    /// Refused applies (parse, compile, set or kernel errors).
    pub apply_failures: u64,
    /// Wall time of the last successful apply, compile included.
    pub last_apply: Duration,
    /// Per set, by name (removed with the set).
    pub sets: HashMap<String, SetTally>,
}

impl Tally {
    /// The counts of set `name`, created on first use.
    pub fn set(&mut self, name: &str) -> &mut SetTally {
        if !self.sets.contains_key(name) {
            self.sets.insert(name.to_string(), SetTally::default());
        }
        self.sets.get_mut(name).expect("inserted")
    }
}

/// Upper bounds, in seconds, of the journal fsync histogram's buckets.
pub const FSYNC_BUCKETS: [f64; 12] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
];

/// A fixed-bucket latency histogram of atomics, written by the journal's
/// sync and read by scrapes without a lock.
#[derive(Debug, Default)]
pub struct Histogram {
    buckets: [AtomicU64; FSYNC_BUCKETS.len()],
    count: AtomicU64,
    sum_ns: AtomicU64,
}

impl Histogram {
    /// Records one observation.
    pub fn observe(&self, d: Duration) {
        let s = d.as_secs_f64();
        if let Some(i) = FSYNC_BUCKETS.iter().position(|b| s <= *b) {
            self.buckets[i].fetch_add(1, Ordering::Relaxed);
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_ns
            .fetch_add(d.as_nanos().min(u64::MAX as u128) as u64, Ordering::Relaxed);
    }

    /// Cumulative bucket counts, the total count and the sum in seconds.
    pub fn read(&self) -> (Vec<u64>, u64, f64) {
        let mut acc = 0;
        let cum = self
            .buckets
            .iter()
            .map(|b| {
                acc += b.load(Ordering::Relaxed);
                acc
            })
            .collect();
        let count = self.count.load(Ordering::Relaxed);
        (cum, count, self.sum_ns.load(Ordering::Relaxed) as f64 / 1e9)
    }
}

/// One set's numbers at scrape time.
struct SetRow {
    name: String,
    elements: usize,
    maxelem: usize,
    memory: usize,
    tally: SetTally,
}

/// What the first lock hold copies.
struct Scalars {
    generation: u64,
    ruleset: Option<Arc<Ruleset>>,
    counted: usize,
    tally: Tally,
    sets: Vec<SetRow>,
    set_count: usize,
    dataplane: Value,
}

fn scalars(shared: &Shared) -> Scalars {
    let st = shared.state.lock().unwrap();
    let names = st.sets.names();
    let set_count = names.len();
    let mut sets: Vec<SetRow> = names
        .iter()
        .take(MAX_SET_SERIES)
        .filter_map(|n| {
            let s = st.sets.get(n)?;
            Some(SetRow {
                name: n.to_string(),
                elements: s.len(),
                maxelem: s.maxelem(),
                memory: s.memory_bytes(),
                tally: st.tally.sets.get(*n).copied().unwrap_or_default(),
            })
        })
        .collect();
    sets.sort_by(|a, b| a.name.cmp(&b.name));
    let mut tally = st.tally.clone();
    tally.sets.clear(); // copied per set above
    Scalars {
        generation: st.generation,
        ruleset: st.active.as_ref().map(|a| a.ruleset.clone()),
        counted: st.active.as_ref().map_or(0, |a| a.counters.len()),
        tally,
        sets,
        set_count,
        dataplane: st.kernel.stats(),
    }
}

/// Kernel counters of rules `0..=n` (0 = the policy), read in chunks of
/// [`RULE_CHUNK`] with the lock released in between; `None` when the
/// program is not loaded or a new ruleset was applied meanwhile (the ids
/// would then mix two rulesets).
fn rule_counters(shared: &Shared, n: usize, generation: u64) -> Option<Vec<Counters>> {
    let mut out = Vec::with_capacity(n + 1);
    let mut first = 0usize;
    while first <= n {
        let count = RULE_CHUNK.min(n + 1 - first);
        let st = shared.state.lock().unwrap();
        if st.generation != generation {
            return None;
        }
        out.extend(st.kernel.counter_range(first as u32, count)?);
        drop(st);
        first += count;
    }
    Some(out)
}

/// Everything a scrape returns, in the text exposition format 0.0.4.
pub fn collect(shared: &Shared, cfg: &MetricsConfig) -> String {
    let t0 = Instant::now();
    let s = scalars(shared);
    let loaded = s.dataplane["loaded"].as_bool().unwrap_or(false);
    let counters = if loaded && s.ruleset.is_some() {
        rule_counters(shared, s.counted, s.generation)
    } else {
        None
    };
    let mut w = Writer::default();
    w.family(
        "parapet_build_info",
        "gauge",
        "Always 1; the version of the running parapetd.",
    );
    w.sample(
        "parapet_build_info",
        &[("version", env!("CARGO_PKG_VERSION"))],
        1.0,
    );
    let start = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .saturating_sub(shared.started.elapsed());
    w.gauge(
        "parapet_start_time_seconds",
        "When parapetd started, Unix time.",
        start.as_secs_f64(),
    );
    control_plane(&mut w, shared, &s);
    sets(&mut w, &s);
    dataplane(&mut w, &s.dataplane);
    if let (Some(rs), Some(cs)) = (&s.ruleset, &counters) {
        rules(&mut w, rs, cs, cfg.max_rule_series);
    }
    w.gauge(
        "parapet_metrics_collect_seconds",
        "Time this scrape took to collect (before writing it out).",
        t0.elapsed().as_secs_f64(),
    );
    w.out
}

fn control_plane(w: &mut Writer, shared: &Shared, s: &Scalars) {
    let st = &shared.stats;
    let load = |a: &AtomicU64| a.load(Ordering::Relaxed) as f64;
    w.counter(
        "parapet_requests_total",
        "Control socket requests answered.",
        load(&st.requests),
    );
    w.counter(
        "parapet_request_errors_total",
        "Control socket requests answered with an error.",
        load(&st.errors),
    );
    w.counter(
        "parapet_connections_total",
        "Control socket connections accepted.",
        load(&st.connections),
    );
    w.gauge(
        "parapet_clients",
        "Connected control socket clients.",
        st.clients.load(Ordering::Relaxed) as f64,
    );
    w.counter(
        "parapet_bans_total",
        "Addresses newly banned.",
        s.tally.bans as f64,
    );
    w.counter(
        "parapet_unbans_total",
        "Addresses unbanned.",
        s.tally.unbans as f64,
    );
    w.gauge(
        "parapet_ruleset_generation",
        "Generation of the active ruleset (bumped by every apply).",
        s.generation as f64,
    );
    w.gauge(
        "parapet_ruleset_rules",
        "Rules of the active ruleset.",
        s.ruleset.as_ref().map_or(0, |r| r.rule_count()) as f64,
    );
    w.counter(
        "parapet_applies_total",
        "Rulesets applied.",
        s.tally.applies as f64,
    );
    w.counter(
        "parapet_apply_failures_total",
        "Applies refused (the active ruleset stayed).",
        s.tally.apply_failures as f64,
    );
    w.gauge(
        "parapet_apply_last_duration_seconds",
        "Wall time of the last successful apply, compile included.",
        s.tally.last_apply.as_secs_f64(),
    );
    w.gauge(
        "parapet_journal_bytes",
        "Bytes in the journal since the last snapshot.",
        shared.journal.bytes() as f64,
    );
    w.counter(
        "parapet_snapshots_total",
        "Snapshots written.",
        load(&st.snapshots),
    );
    let (cum, count, sum) = shared.journal.fsync_seconds.read();
    let name = "parapet_journal_fsync_duration_seconds";
    w.family(
        name,
        "histogram",
        "Journal write + fdatasync per group commit.",
    );
    for (b, c) in FSYNC_BUCKETS.iter().zip(&cum) {
        w.sample(
            &format!("{name}_bucket"),
            &[("le", &b.to_string())],
            *c as f64,
        );
    }
    w.sample(&format!("{name}_bucket"), &[("le", "+Inf")], count as f64);
    w.sample(&format!("{name}_sum"), &[], sum);
    w.sample(&format!("{name}_count"), &[], count as f64);
}

/// A per-set family: name, type, help, and its value of a set.
type SetFamily = (&'static str, &'static str, &'static str, fn(&SetRow) -> f64);

/// A family of dataplane counters: name, help, the label that tells its
/// series apart (`""`: one series), and per series the label value and the
/// key in `stats`' `dataplane.kernel`.
type StatFamily = (
    &'static str,
    &'static str,
    &'static str,
    &'static [(&'static str, &'static str)],
);

fn sets(w: &mut Writer, s: &Scalars) {
    w.gauge("parapet_sets", "Sets.", s.set_count as f64);
    let fams: [SetFamily; 6] = [
        (
            "parapet_set_elements",
            "gauge",
            "Elements of the set (expired, unreaped ones included).",
            |r| r.elements as f64,
        ),
        (
            "parapet_set_max_elements",
            "gauge",
            "Most elements the set takes.",
            |r| r.maxelem as f64,
        ),
        (
            "parapet_set_memory_bytes",
            "gauge",
            "Memory of the set's user-space copy.",
            |r| r.memory as f64,
        ),
        (
            "parapet_set_inserts_total",
            "counter",
            "Elements added by clients.",
            |r| r.tally.inserts as f64,
        ),
        (
            "parapet_set_deletes_total",
            "counter",
            "Elements deleted by clients.",
            |r| r.tally.deletes as f64,
        ),
        (
            "parapet_set_expiries_total",
            "counter",
            "Elements removed when their timeout passed.",
            |r| r.tally.expiries as f64,
        ),
    ];
    for (name, typ, help, f) in fams {
        w.family(name, typ, help);
        for r in &s.sets {
            w.sample(name, &[("set", &r.name)], f(r));
        }
    }
}

/// The dataplane's statistics (`stats`' `dataplane.kernel` object) under
/// Prometheus names: one family per meaning, a label for the outcome.
fn dataplane(w: &mut Writer, dp: &Value) {
    let loaded = dp["loaded"].as_bool().unwrap_or(false);
    w.gauge(
        "parapet_dataplane_loaded",
        "1 when the BPF program is loaded.",
        loaded as u8 as f64,
    );
    w.gauge(
        "parapet_dataplane_attachments",
        "Hooks and interfaces the program is attached to.",
        dp["attachments"].as_array().map_or(0, Vec::len) as f64,
    );
    if !loaded {
        return;
    }
    let k = &dp["kernel"];
    let get = |key: &str| k[key].as_u64().unwrap_or(0) as f64;
    let families: [StatFamily; 7] = [
        (
            "parapet_dataplane_packets_total",
            "Packets the program saw, by how they were handled.",
            "result",
            &[
                ("seen", "packets"),
                ("not_ip", "not_ip"),
                ("classified", "by_image"),
                ("image_error", "image_errors"),
                ("no_action", "no_action"),
            ],
        ),
        (
            "parapet_dataplane_dropped_malformed_total",
            "Packets dropped before classification, by reason.",
            "reason",
            &[
                ("truncated", "truncated"),
                ("malformed", "malformed"),
                ("ext_limit", "ext_limit"),
            ],
        ),
        (
            "parapet_dataplane_nonterminal_truncated_total",
            "Packets with more non-terminal matches than the program records.",
            "",
            &[("", "nonterm_truncated")],
        ),
        (
            "parapet_log_events_total",
            "LOG events, by outcome.",
            "outcome",
            &[
                ("emitted", "log_emitted"),
                ("rate_limited", "log_rate_limited"),
                ("ring_full", "log_ring_full"),
            ],
        ),
        (
            "parapet_reject_total",
            "REJECT verdicts, by outcome of the reply.",
            "outcome",
            &[
                ("sent", "reject_sent"),
                ("rate_limited", "reject_limited"),
                ("no_reply", "reject_no_reply"),
                ("failed", "reject_failed"),
            ],
        ),
        (
            "parapet_conntrack_lookups_total",
            "Conntrack lookups by the program.",
            "",
            &[("", "ct_lookups")],
        ),
        (
            "parapet_conntrack_found_total",
            "Conntrack lookups that found an entry.",
            "",
            &[("", "ct_found")],
        ),
    ];
    for (name, help, label_name, rows) in families {
        w.family(name, "counter", help);
        for (label, key) in rows {
            let pair = [(label_name, *label)];
            let labels: &[(&str, &str)] = if label_name.is_empty() { &[] } else { &pair };
            w.sample(name, labels, get(key));
        }
    }
    w.gauge(
        "parapet_conntrack_lookup_enabled",
        "1 while the active ruleset makes the program look up conntrack.",
        dp["conntrack"]["lookup"].as_bool().unwrap_or(false) as u8 as f64,
    );
    let name = "parapet_set_kernel_elements";
    w.family(name, "gauge", "Elements of the set in the kernel's maps.");
    if let Some(sets) = dp["sets"].as_array() {
        for s in sets.iter().take(MAX_SET_SERIES) {
            let set = s["set"].as_str().unwrap_or("");
            w.sample(name, &[("set", set)], s["elements"].as_f64().unwrap_or(0.0));
        }
    }
}

/// Per-rule packets and bytes: the first `cap` rules by id each, the
/// policy as rule `0`, and the rest summed into `rule="other"`.
fn rules(w: &mut Writer, rs: &Ruleset, cs: &[Counters], cap: usize) {
    let mut labels: Vec<(u32, String, String)> = Vec::new();
    for t in &rs.tables {
        for c in &t.chains {
            for r in &c.rules {
                if (r.id as usize) <= cap {
                    let chain = format!("{}/{}", t.name, c.name);
                    let comment = r.comment.as_deref().map(redact).unwrap_or_default();
                    labels.push((r.id, chain, comment));
                }
            }
        }
    }
    labels.sort_by_key(|l| l.0);
    let other = cs
        .iter()
        .skip(cap + 1)
        .fold(Counters::default(), |a, c| Counters {
            packets: a.packets + c.packets,
            bytes: a.bytes + c.bytes,
        });
    let folded = cs.len().saturating_sub(cap + 1);
    for (name, help, get) in [
        ("parapet_rule_packets_total", "Packets each rule decided or counted (rule 0: the chain policy; rule \"other\": every rule past the series cap).", (|c: &Counters| c.packets) as fn(&Counters) -> u64),
        ("parapet_rule_bytes_total", "Bytes of those packets.", |c: &Counters| c.bytes),
    ] {
        w.family(name, "counter", help);
        let policy = cs.first().copied().unwrap_or_default();
        w.sample(name, &[("chain", ""), ("rule", "0"), ("comment", "policy")], get(&policy) as f64);
        for (id, chain, comment) in &labels {
            let c = cs.get(*id as usize).copied().unwrap_or_default();
            w.sample(name, &[("chain", chain), ("rule", &id.to_string()), ("comment", comment)], get(&c) as f64);
        }
        if folded > 0 {
            w.sample(name, &[("chain", ""), ("rule", "other"), ("comment", "")], get(&other) as f64);
        }
    }
    w.gauge(
        "parapet_rule_series_folded",
        "Rules past the per-rule series cap, counted in rule=\"other\".",
        folded as f64,
    );
}

/// A comment fit for a label value: words that are IP addresses or
/// prefixes become `ADDR`, and it is cut to [`MAX_COMMENT`] characters.
pub fn redact(comment: &str) -> String {
    let words: Vec<String> = comment
        .split(' ')
        .map(|w| {
            let core = w.trim_matches(|c: char| "()[],;\"'".contains(c));
            let addr = core.split('/').next().unwrap_or(core);
            if !addr.is_empty() && addr.parse::<IpAddr>().is_ok() {
                w.replace(core, "ADDR")
            } else {
                w.to_string()
            }
        })
        .collect();
    words.join(" ").chars().take(MAX_COMMENT).collect()
}

/// The text exposition format: `# HELP`/`# TYPE` once per family, then
/// its samples; label values escaped.
#[derive(Default)]
struct Writer {
    out: String,
}

impl Writer {
    fn family(&mut self, name: &str, typ: &str, help: &str) {
        let _ = writeln!(self.out, "# HELP {name} {help}\n# TYPE {name} {typ}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], v: f64) {
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, val)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{k}=\"");
                for ch in val.chars() {
                    match ch {
                        '\\' => self.out.push_str("\\\\"),
                        '"' => self.out.push_str("\\\""),
                        '\n' => self.out.push_str("\\n"),
                        c => self.out.push(c),
                    }
                }
                self.out.push('"');
            }
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {v}");
    }

    fn gauge(&mut self, name: &str, help: &str, v: f64) {
        self.family(name, "gauge", help);
        self.sample(name, &[], v);
    }

    fn counter(&mut self, name: &str, help: &str, v: f64) {
        self.family(name, "counter", help);
        self.sample(name, &[], v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_lose_addresses_and_length() {
        assert_eq!(redact("ssh from 192.0.2.7"), "ssh from ADDR");
        assert_eq!(redact("block (10.0.0.0/8),"), "block (ADDR),");
        assert_eq!(redact("v6 2001:db8::1 done"), "v6 ADDR done");
        assert_eq!(redact("port 22"), "port 22");
        assert_eq!(redact(&"x".repeat(200)).len(), MAX_COMMENT);
    }

    #[test]
    fn label_values_are_escaped() {
        let mut w = Writer::default();
        w.sample("m", &[("a", "q\"b\\n\nx")], 1.0);
        assert_eq!(w.out, "m{a=\"q\\\"b\\\\n\\nx\"} 1\n");
    }

    #[test]
    fn histogram_is_cumulative() {
        let h = Histogram::default();
        h.observe(Duration::from_micros(50));
        h.observe(Duration::from_millis(3));
        h.observe(Duration::from_secs(5));
        let (cum, count, sum) = h.read();
        assert_eq!(cum[0], 1);
        assert_eq!(cum[5], 2); // le 0.005
        assert_eq!(*cum.last().unwrap(), 2); // le 1: the 5 s one is only in +Inf
        assert_eq!(count, 3);
        assert!((sum - 5.00305).abs() < 1e-6);
    }

    #[test]
    fn remote_listener_needs_explicit_consent() {
        let mut c = MetricsConfig {
            listen: Some("0.0.0.0:9100".parse().unwrap()),
            ..MetricsConfig::default()
        };
        assert!(c.check().is_err());
        c.allow_remote = true;
        assert!(c.check().is_ok());
        c.listen = Some("[::1]:9100".parse().unwrap());
        c.allow_remote = false;
        assert!(c.check().is_ok());
    }
}
