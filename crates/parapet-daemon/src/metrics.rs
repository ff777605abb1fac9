//! Prometheus metrics: what the daemon counts for them (kept in
//! [`crate::metrics_tally`]), how a scrape collects it ([`collect`]) and the text
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

pub use crate::metrics_config::{MetricsConfig, DEFAULT_MAX_RULE_SERIES};
use crate::metrics_tally::{SetTally, Tally, FSYNC_BUCKETS};
use crate::shared::Shared;
use parapet_model::{Counters, Ruleset};
use serde_json::Value;
use std::fmt::Write as _;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Rules whose kernel counters one lock hold reads.
pub const RULE_CHUNK: usize = 1024;
/// At most this many sets get their own series; the rest are left out
/// (and counted in `parapet_sets`).
pub const MAX_SET_SERIES: usize = 256;
/// Longest comment label value, in characters.
const MAX_COMMENT: usize = 64;

/// Counts one `apply` for the metrics: a success when [`ApplyTimer::succeeded`]
/// is called (under the state lock the apply holds anyway), else, when
/// dropped, a failure (taking the lock briefly, after the apply released
/// it). Checks (`apply --check`) count as neither.
pub struct ApplyTimer<'a> {
    shared: &'a Shared,
    start: Instant,
    pending: bool,
}

impl<'a> ApplyTimer<'a> {
    /// Starts timing an apply (nothing is counted for a check).
    pub fn start(shared: &'a Shared, check: bool) -> ApplyTimer<'a> {
        ApplyTimer {
            shared,
            start: Instant::now(),
            pending: !check,
        }
    }

    /// The apply went through: counted with its duration.
    pub fn succeeded(&mut self, tally: &mut Tally) {
        if std::mem::take(&mut self.pending) {
            tally.applies += 1;
            tally.last_apply = self.start.elapsed();
        }
    }
}

impl Drop for ApplyTimer<'_> {
    fn drop(&mut self) {
        if self.pending {
            let mut st = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
            st.tally.apply_failures += 1;
        }
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
    for (name, typ, help, v) in crate::metrics_sources::source_rows(shared) {
        w.family(name, typ, help);
        w.sample(name, &[], v);
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
    // (name, type, help, value): one unlabelled sample each.
    let rows: [(&str, &str, &str, f64); 13] = [
        (
            "parapet_requests_total",
            "counter",
            "Control socket requests answered.",
            load(&st.requests),
        ),
        (
            "parapet_request_errors_total",
            "counter",
            "Control socket requests answered with an error.",
            load(&st.errors),
        ),
        (
            "parapet_connections_total",
            "counter",
            "Control socket connections accepted.",
            load(&st.connections),
        ),
        (
            "parapet_clients",
            "gauge",
            "Connected control socket clients.",
            st.clients.load(Ordering::Relaxed) as f64,
        ),
        (
            "parapet_bans_total",
            "counter",
            "Addresses newly banned.",
            s.tally.bans as f64,
        ),
        (
            "parapet_unbans_total",
            "counter",
            "Addresses unbanned.",
            s.tally.unbans as f64,
        ),
        (
            "parapet_ruleset_generation",
            "gauge",
            "Generation of the active ruleset (bumped by every apply).",
            s.generation as f64,
        ),
        (
            "parapet_ruleset_rules",
            "gauge",
            "Rules of the active ruleset.",
            s.ruleset.as_ref().map_or(0, |r| r.rule_count()) as f64,
        ),
        (
            "parapet_applies_total",
            "counter",
            "Rulesets applied.",
            s.tally.applies as f64,
        ),
        (
            "parapet_apply_failures_total",
            "counter",
            "Applies refused (the active ruleset stayed).",
            s.tally.apply_failures as f64,
        ),
        (
            "parapet_apply_last_duration_seconds",
            "gauge",
            "Wall time of the last successful apply, compile included.",
            s.tally.last_apply.as_secs_f64(),
        ),
        (
            "parapet_journal_bytes",
            "gauge",
            "Bytes in the journal since the last snapshot.",
            shared.journal.bytes() as f64,
        ),
        (
            "parapet_snapshots_total",
            "counter",
            "Snapshots written.",
            load(&st.snapshots),
        ),
    ];
    for (name, typ, help, v) in rows {
        w.family(name, typ, help);
        w.sample(name, &[], v);
    }
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
    // The netfilter hooks: packets per hook, and REJECT answers sent by
    // parapetd (the program queues them; `stats.dataplane.netfilter`).
    let nf = &dp["netfilter"];
    let name = "parapet_netfilter_packets_total";
    w.family(
        name,
        "counter",
        "Packets the program saw at each netfilter hook.",
    );
    for hook in ["prerouting", "input", "forward", "output", "postrouting"] {
        let v = nf["packets"][hook].as_f64().unwrap_or(0.0);
        w.sample(name, &[("hook", hook)], v);
    }
    let name = "parapet_netfilter_reject_total";
    w.family(
        name,
        "counter",
        "REJECTs at the netfilter hooks, by outcome of the reply.",
    );
    for outcome in ["queued", "ring_full", "sent", "no_reply", "failed"] {
        let v = nf["reject"][outcome].as_f64().unwrap_or(0.0);
        w.sample(name, &[("outcome", outcome)], v);
    }
    // Per hook and interface (`stats.dataplane.hooks`): interface names
    // are bounded by the interfaces of the namespace, hooks by seven.
    for (name, help, key) in [
        (
            "parapet_hook_packets_total",
            "Packets the program saw, by hook (xdp, tc, prerouting, input, forward, output, postrouting) and interface.",
            "packets",
        ),
        (
            "parapet_hook_bytes_total",
            "Bytes of those packets (IP length, as the rule counters).",
            "bytes",
        ),
        (
            "parapet_hook_dropped_total",
            "Those packets the program did not accept (DROP, REJECT, fail-closed).",
            "dropped",
        ),
    ] {
        w.family(name, "counter", help);
        for h in dp["hooks"].as_array().into_iter().flatten() {
            let hook = h["hook"].as_str().unwrap_or("");
            let iface = h["interface"].as_str().unwrap_or("");
            let v = h[key].as_f64().unwrap_or(0.0);
            w.sample(name, &[("hook", hook), ("interface", iface)], v);
        }
    }
    w.gauge(
        "parapet_conntrack_lookup_enabled",
        "1 while the active ruleset makes the program look up conntrack.",
        dp["conntrack"]["lookup"].as_bool().unwrap_or(false) as u8 as f64,
    );
    w.gauge(
        "parapet_packet_stats_enabled",
        "1 while the program keeps the per-packet statistics (0: parapetd --no-packet-stats).",
        dp["packet_stats"].as_bool().unwrap_or(true) as u8 as f64,
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
/// prefixes become `ADDR`, and it is cut to 64 characters.
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
}
