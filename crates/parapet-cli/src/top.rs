//! `parapet top`: which rules of the active ruleset are hit right now.
//! Two samples of parapetd's counters an interval apart give each rule's
//! packets/s and bytes/s; rules are sorted by one of them, with their
//! text, verdict and totals, per hook and interface packets/s and drops/s,
//! the set sizes and the ban rate. `--once
//! --json` prints one such view for scripts; [`crate::top_screen`] shows
//! it (once, or redrawn live) and runs the command.

use parapet_daemon::{Client, ClientError};
use parapet_model::{Action, Ruleset, Verdict};
use parapet_parse::Format;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::time::Instant;

/// `parapet top` flags.
#[derive(clap::Args, Debug)]
pub struct TopArgs {
    /// Seconds between samples (rates are over this interval).
    #[arg(long, default_value_t = 2.0)]
    pub interval: f64,
    /// Print one view (two samples an interval apart) and exit.
    #[arg(long)]
    pub once: bool,
    /// With --once: one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Sort by packets/s or bytes/s (keys p and b in the live view).
    #[arg(long, value_enum, default_value_t = Sort::Packets)]
    pub sort: Sort,
    /// Only rules of this chain, TABLE/CHAIN (key c cycles in the live view).
    #[arg(long)]
    pub chain: Option<String>,
    /// Rules shown with --once (the live view fits the terminal).
    #[arg(long, default_value_t = 20)]
    pub limit: usize,
}

/// What rules are sorted by.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sort {
    /// Packets per second.
    Packets,
    /// Bytes per second.
    Bytes,
}

/// What a rule does with a packet, for the accept/drop totals.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Accept,
    Drop,
    Other,
}

/// One rule as `top` shows it.
#[derive(Clone, Debug)]
pub struct RuleInfo {
    pub id: u32,
    pub chain: String,
    pub text: String,
    pub kind: Kind,
}

/// The active ruleset's rules; fetched again when the generation changes.
pub struct Catalog {
    pub generation: u64,
    pub rules: Vec<RuleInfo>,
    pub chains: Vec<String>,
}

/// One reading of the daemon's counters.
#[derive(Clone)]
pub struct Sample {
    at: Instant,
    pub generation: u64,
    counters: HashMap<u32, (u64, u64)>,
    bans: u64,
    pub sets: Vec<(String, u64)>,
    pub kernel: bool,
    /// (hook, interface) → (packets, dropped), from `stats.dataplane.hooks`.
    hooks: Vec<((String, String), (u64, u64))>,
}

/// One hook on one interface in the view.
#[derive(Clone, Debug)]
pub struct HookRow {
    pub hook: String,
    pub interface: String,
    pub packets: u64,
    pub dropped: u64,
    pub pps: f64,
    pub drops_per_s: f64,
}

/// A rule's line in the view.
#[derive(Clone, Debug)]
pub struct Row {
    pub info: RuleInfo,
    pub packets: u64,
    pub bytes: u64,
    pub pps: f64,
    pub bps: f64,
}

/// Everything one screen or one JSON object shows.
pub struct View {
    pub interval: f64,
    pub generation: u64,
    pub kernel: bool,
    pub rows: Vec<Row>,
    pub total_pps: f64,
    pub total_bps: f64,
    pub accept_pps: f64,
    pub drop_pps: f64,
    pub bans_per_s: f64,
    pub sets: Vec<(String, u64)>,
    /// Busiest first.
    pub hooks: Vec<HookRow>,
}

fn kind(a: &Action) -> Kind {
    match a {
        Action::Verdict(Verdict::Accept) => Kind::Accept,
        Action::Verdict(_) => Kind::Drop,
        _ => Kind::Other,
    }
}

/// The rules of the active ruleset with their source lines: the daemon
/// returns the text as applied, parsed here with the same parser (so rule
/// ids, chains and lines are the daemon's).
pub fn catalog(c: &mut Client) -> Result<Catalog, ClientError> {
    let r = c.call(json!({"cmd": "list"}))?;
    let generation = r.get("generation").and_then(Value::as_u64).unwrap_or(0);
    let text = r.get("text").and_then(Value::as_str).unwrap_or("");
    let name = r.get("name").and_then(Value::as_str).unwrap_or("active");
    let bad = |e: String| ClientError::Io(std::io::Error::other(format!("{name}: {e}")));
    let rs: Ruleset = match r.get("source_format").and_then(Value::as_str) {
        None => Ruleset::default(),
        Some("json") => serde_json::from_str(text).map_err(|e| bad(e.to_string()))?,
        Some(f) => {
            let f: Format = f.parse().map_err(bad)?;
            parapet_parse::parse(text, name, f)
                .map_err(|e| bad(e.first().map(|e| e.to_string()).unwrap_or_default()))?
                .ruleset
        }
    };
    let lines: Vec<&str> = text.lines().collect();
    let mut rules = Vec::new();
    let mut chains = Vec::new();
    for t in &rs.tables {
        for ch in &t.chains {
            let chain = format!("{}/{}", t.name, ch.name);
            chains.push(chain.clone());
            for r in &ch.rules {
                let line = (r.origin.line as usize)
                    .checked_sub(1)
                    .and_then(|i| lines.get(i))
                    .map_or_else(|| format!("rule {}", r.id), |l| without_counters(l));
                rules.push(RuleInfo {
                    id: r.id,
                    chain: chain.clone(),
                    text: line,
                    kind: kind(&r.action),
                });
            }
        }
    }
    rules.sort_by_key(|r| r.id);
    Ok(Catalog {
        generation,
        rules,
        chains,
    })
}

/// A rule's source line without iptables-save's `[packets:bytes]` prefix
/// (the file's counters, not the live ones).
fn without_counters(line: &str) -> String {
    let l = line.trim();
    match l.strip_prefix('[').and_then(|r| r.split_once("] ")) {
        Some((c, rest)) if c.bytes().all(|b| b.is_ascii_digit() || b == b':') => rest.to_string(),
        _ => l.to_string(),
    }
}

/// Reads the kernel's counters, the set sizes and the ban count.
pub fn sample(c: &mut Client) -> Result<Sample, ClientError> {
    let s = c.call(json!({"cmd": "stats"}))?;
    let at = Instant::now();
    let counters = s
        .get("counters")
        .and_then(Value::as_array)
        .map(|cs| {
            cs.iter()
                .filter_map(|x| {
                    let id = x["rule"].as_u64()? as u32;
                    Some((id, (x["packets"].as_u64()?, x["bytes"].as_u64()?)))
                })
                .collect()
        })
        .unwrap_or_default();
    let kernel = s.get("counters").is_some_and(Value::is_array);
    let hooks = s["dataplane"]["hooks"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|h| {
            let name = |k: &str| h[k].as_str().unwrap_or("").to_string();
            let n = |k: &str| h[k].as_u64().unwrap_or(0);
            (
                (name("hook"), name("interface")),
                (n("packets"), n("dropped")),
            )
        })
        .collect();
    let sets = c.call(json!({"cmd": "set.list"}))?;
    let sets = sets
        .get("sets")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|x| {
            let name = x["set"].as_str().unwrap_or("").to_string();
            (name, x["elements"].as_u64().unwrap_or(0))
        })
        .collect();
    Ok(Sample {
        at,
        generation: s.get("generation").and_then(Value::as_u64).unwrap_or(0),
        counters,
        bans: s.get("bans").and_then(Value::as_u64).unwrap_or(0),
        sets,
        kernel,
        hooks,
    })
}

/// The view between two samples, sorted and filtered.
pub fn view(cat: &Catalog, a: &Sample, b: &Sample, sort: Sort, chain: Option<&str>) -> View {
    let dt = b.at.duration_since(a.at).as_secs_f64().max(1e-3);
    // Counters of another generation are another ruleset's: no rates.
    let same = a.generation == b.generation;
    let rate = |id: u32, f: fn(&(u64, u64)) -> u64| {
        let now = b.counters.get(&id).map_or(0, f);
        let then = if same {
            a.counters.get(&id).map_or(0, f)
        } else {
            now
        };
        (now, now.saturating_sub(then) as f64 / dt)
    };
    let mut v = View {
        interval: dt,
        generation: b.generation,
        kernel: b.kernel,
        rows: Vec::new(),
        total_pps: 0.0,
        total_bps: 0.0,
        accept_pps: 0.0,
        drop_pps: 0.0,
        bans_per_s: b.bans.saturating_sub(a.bans) as f64 / dt,
        sets: b.sets.clone(),
        hooks: Vec::new(),
    };
    for (at, (packets, dropped)) in &b.hooks {
        let before = a.hooks.iter().find(|h| &h.0 == at).map(|h| h.1);
        let (p0, d0) = before.filter(|_| same).unwrap_or((*packets, *dropped));
        v.hooks.push(HookRow {
            hook: at.0.clone(),
            interface: at.1.clone(),
            packets: *packets,
            dropped: *dropped,
            pps: packets.saturating_sub(p0) as f64 / dt,
            drops_per_s: dropped.saturating_sub(d0) as f64 / dt,
        });
    }
    v.hooks.sort_by(|x, y| {
        (y.pps, y.packets)
            .partial_cmp(&(x.pps, x.packets))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    let policy = RuleInfo {
        id: 0,
        chain: String::new(),
        text: "(chain policy)".into(),
        kind: Kind::Other,
    };
    for info in std::iter::once(&policy).chain(&cat.rules) {
        let (packets, pps) = rate(info.id, |c| c.0);
        let (bytes, bps) = rate(info.id, |c| c.1);
        match info.kind {
            Kind::Accept => v.accept_pps += pps,
            Kind::Drop => v.drop_pps += pps,
            Kind::Other => {}
        }
        // Every packet is decided once, by a terminal rule or the policy.
        if info.kind != Kind::Other || info.id == 0 {
            v.total_pps += pps;
            v.total_bps += bps;
        }
        if chain.is_none_or(|c| c == info.chain || info.id == 0) {
            v.rows.push(Row {
                info: info.clone(),
                packets,
                bytes,
                pps,
                bps,
            });
        }
    }
    let key = |r: &Row| match sort {
        Sort::Packets => (r.pps, r.packets as f64),
        Sort::Bytes => (r.bps, r.bytes as f64),
    };
    v.rows.sort_by(|x, y| {
        key(y)
            .partial_cmp(&key(x))
            .unwrap_or(std::cmp::Ordering::Equal)
            .then(x.info.id.cmp(&y.info.id))
    });
    v
}

fn kind_name(k: Kind) -> &'static str {
    match k {
        Kind::Accept => "accept",
        Kind::Drop => "drop",
        Kind::Other => "other",
    }
}

/// The `--once --json` object.
pub fn to_json(v: &View, limit: usize, sort: Sort) -> Value {
    json!({
        "interval_s": v.interval,
        "generation": v.generation,
        "kernel": v.kernel,
        "sort": if sort == Sort::Packets { "packets" } else { "bytes" },
        "totals": {
            "packets_per_s": v.total_pps, "bytes_per_s": v.total_bps,
            "accepts_per_s": v.accept_pps, "drops_per_s": v.drop_pps,
        },
        "bans_per_s": v.bans_per_s,
        "sets": v.sets.iter().map(|(s, n)| json!({"set": s, "elements": n})).collect::<Vec<_>>(),
        "hooks": v.hooks.iter().map(|h| json!({
            "hook": h.hook, "interface": h.interface,
            "packets": h.packets, "dropped": h.dropped,
            "packets_per_s": h.pps, "drops_per_s": h.drops_per_s,
        })).collect::<Vec<_>>(),
        "rules": v.rows.iter().take(limit).map(|r| json!({
            "rule": r.info.id, "chain": r.info.chain, "text": r.info.text,
            "verdict": kind_name(r.info.kind),
            "packets": r.packets, "bytes": r.bytes,
            "packets_per_s": r.pps, "bytes_per_s": r.bps,
        })).collect::<Vec<_>>(),
    })
}
