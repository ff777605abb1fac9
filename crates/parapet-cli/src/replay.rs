//! Offline `classify` of stateful matches (`limit`, `recent`, `hashlimit`)
//! and time conditions (`-m time`, nft `meta time|hour|day`, at the wall
//! clock `--trace-start` plus the packet's time):
//! what to assume of them (`--stateful match|miss`), or a timed replay of
//! the trace (`--stateful replay`: each packet's time from a column of the
//! trace, one state for the whole trace, the kernel's arithmetic), so the
//! answer is deterministic. Both run the linear engine, the specification
//! every other engine is tested against.

use crate::load;
use anyhow::{anyhow, bail, Result};
use parapet_model::{
    Assume, ChainId, Clock, Decision, LinearEngine, Packet, Ruleset, SetLookup, Stateful,
    StatefulState,
};
use std::io::BufRead;
use std::path::Path;

/// How `classify` treats stateful matches.
#[derive(clap::Args, Debug, Clone)]
pub struct StatefulArgs {
    /// Stateful matches (limit, recent, hashlimit, nft quota and dynamic sets): match (assume every one
    /// matches), miss (assume none does), or replay (keep their state over
    /// the trace, timed by its time column).
    #[arg(long, default_value = "match", value_parser = ["match", "miss", "replay"])]
    pub stateful: String,
    /// With --stateful replay: the trace's column (1-based) holding each
    /// packet's time, in seconds since the trace began (decimal,
    /// non-decreasing).
    #[arg(long = "time-column", value_name = "N", default_value_t = 6)]
    pub time_column: usize,
    /// With --stateful replay: the kernel HZ whose jiffies -m limit, -m
    /// recent and -m hashlimit count.
    #[arg(long, default_value_t = 250)]
    pub hz: u32,
    /// With --stateful replay: the wall-clock time of the trace's time 0,
    /// in seconds since 1970-01-01 UTC, for time conditions (-m time, nft
    /// meta time|hour|day); the current time when not given.
    #[arg(long = "trace-start", value_name = "UNIX_SECONDS")]
    pub trace_start: Option<i64>,
}

/// A text trace's packets with their times (ns since the trace began).
pub fn timed_trace(path: &Path, column: usize) -> Result<Vec<(Packet, u64)>> {
    if column < 6 {
        bail!(
            "--time-column {column}: columns 1 to 5 are the packet's (src dst sport dport proto)"
        );
    }
    let name = path.display().to_string();
    let mut out = Vec::new();
    let mut last = 0u64;
    for (i, line) in load::open(path)?.lines().enumerate() {
        let line = line?;
        let ln = i + 1;
        let body = line.trim_start();
        if body.is_empty() || body.starts_with('#') {
            continue;
        }
        let pkt = parapet_parse::trace::parse_line(&line)
            .map_err(|(col, msg)| anyhow!("{name}:{ln}:{col}: {msg}"))?;
        let at = line
            .char_indices()
            .filter(|&(j, c)| {
                !c.is_whitespace() && (j == 0 || line[..j].ends_with(char::is_whitespace))
            })
            .nth(column - 1);
        let Some((j, _)) = at else {
            bail!(
                "{name}:{ln}:{}: expected a time in seconds in column {column} (--stateful replay)",
                line.len() + 1
            );
        };
        let word = line[j..].split_whitespace().next().unwrap_or("");
        let ns = match word.parse::<f64>() {
            Ok(s) if s.is_finite() && s >= 0.0 => (s * 1e9).round() as u64,
            _ => bail!(
                "{name}:{ln}:{}: expected a time in seconds, found '{word}'",
                j + 1
            ),
        };
        if ns < last {
            bail!(
                "{name}:{ln}:{}: time {word} is before the previous packet's: a replay's times never go back",
                j + 1
            );
        }
        last = ns;
        out.push((pkt, ns));
    }
    Ok(out)
}

/// The decisions of the trace's packets under `args`' treatment of
/// stateful matches (not `match`, which every engine answers alone).
pub fn decisions(
    rs: &Ruleset,
    chain: ChainId,
    sets: &dyn SetLookup,
    trace: &Path,
    args: &StatefulArgs,
) -> Result<Vec<Option<Decision>>> {
    let linear = LinearEngine::new(rs, chain).map_err(|e| anyhow!("{e}"))?;
    let decide = |pkt: &Packet, s: &mut dyn Stateful| {
        linear
            .classify_with(pkt, sets, s)
            .map(Some)
            .map_err(|e| anyhow!("{e}"))
    };
    if args.stateful == "replay" {
        if args.hz == 0 || args.hz > 100_000 {
            bail!(
                "--hz {}: expected the kernel's HZ (100, 250, 300, 1000, …)",
                args.hz
            );
        }
        if crate::pcap::frames(trace)?.is_some() {
            bail!(
                "{}: a capture cannot be replayed yet (its time stamps are not read): --stateful replay wants a text trace with a time column",
                trace.display()
            );
        }
        let mut state = StatefulState::new(Clock { ns: 0, hz: args.hz });
        state.wall_start_secs = args.trace_start.unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() as i64)
        });
        return timed_trace(trace, args.time_column)?
            .iter()
            .map(|(pkt, ns)| {
                state.set_ns(*ns);
                decide(pkt, &mut state)
            })
            .collect();
    }
    let mut assume = Assume(args.stateful == "match");
    load::trace_items(trace)?
        .iter()
        .map(|item| match item {
            load::TraceItem::Packet(p) => decide(p, &mut assume),
            load::TraceItem::Unclassified { .. } => Ok(None),
        })
        .collect()
}
