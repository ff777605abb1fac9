//! The offline commands: each reads files, prints, and returns an exit code.

use crate::engine::{self, ChainClassifier, EngineArgs};
use crate::load;
use crate::replay::{self, StatefulArgs};
use anyhow::{anyhow, bail, Context, Result};
use parapet_model::{format_set, Decision, Family, Field, Matches, Packet};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

/// `parapet check`: every file is parsed completely; all errors are printed.
pub fn check(files: &[PathBuf], format: &str) -> Result<ExitCode> {
    let mut failed = false;
    for path in files {
        match load::checked(path, format) {
            Ok(checked) => {
                let summary = match &checked.parsed {
                    Some(parsed) => load::summary(&parsed.ruleset),
                    None => load::set_summary(&checked.sets),
                };
                println!("{}: ok ({}): {summary}", path.display(), checked.format);
            }
            Err(e) => {
                eprintln!("parapet: {e}");
                failed = true;
            }
        }
    }
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// `parapet list`: the parsed model rendered in the requested syntax.
///
/// An `ipset save` file lists its sets, as `ipset save` (the default) or as
/// nft `set` blocks; `--format ipset` lists an nft file's set blocks as
/// `ipset save` text.
pub fn list(file: &Path, input: &str, output: Option<&str>) -> Result<ExitCode> {
    let sets_only = output == Some("ipset") || load::is_ipset(file, input)?;
    if sets_only {
        let checked = load::checked(file, input)?;
        let text = match output.unwrap_or("ipset") {
            "ipset" => checked.sets.save_ipset(None),
            "nft" => checked.sets.save_nft(None),
            other => bail!("an ipset file lists as ipset or nft, not '{other}'"),
        };
        print!("{text}");
        return Ok(ExitCode::SUCCESS);
    }
    let parsed = load::ruleset(file, input)?;
    let text = match output.unwrap_or("iptables-save") {
        "iptables-save" | "iptables" => parapet_parse::render::iptables_save(&parsed.ruleset),
        "nft" => parapet_parse::render::nft_with_sets(&parsed.ruleset, &parsed.set_blocks),
        "json" => Ok(parapet_parse::render::json(&parsed.ruleset)),
        other => {
            bail!("unknown listing format '{other}' (expected iptables-save, nft, json or ipset)")
        }
    }
    .map_err(|e| anyhow!("{e}"))?;
    print!("{text}");
    Ok(ExitCode::SUCCESS)
}

/// `parapet classify`: one line per trace packet.
pub fn classify(
    rules: &Path,
    trace: &Path,
    args: &EngineArgs,
    with_verdict: bool,
    stateful: &StatefulArgs,
) -> Result<ExitCode> {
    let (parsed, chain, sets) = prepare(rules, args)?;
    let rs = &parsed.ruleset;
    // Offline there is no clock for a limit's bucket and no table of
    // recent or hashlimit: say what is assumed, or replay the trace's times.
    let limited: Vec<String> = rs
        .rules()
        .filter(|r| r.is_stateful())
        .map(|r| r.id.to_string())
        .collect();
    let timed: Vec<String> = rs
        .rules()
        .filter(|r| r.time_with_another_condition())
        .map(|r| r.id.to_string())
        .collect();
    if !limited.is_empty() {
        let how = match stateful.stateful.as_str() {
            "match" => "are assumed to match".to_string(),
            "miss" => "are assumed not to match".to_string(),
            _ => format!(
                "keep their state over the trace, timed by its column {} (HZ {})",
                stateful.time_column, stateful.hz
            ),
        };
        let enforced = if timed.is_empty() {
            "the dataplane enforces them".to_string()
        } else {
            format!(
                "the dataplane enforces them, except rules {}, whose time window comes with another stateful condition: only the linear engine evaluates the two in one rule so far (docs/syntax.md, \"Time conditions\")",
                timed.join(", ")
            )
        };
        eprintln!(
            "parapet: note: rules with a stateful match, limit, recent, hashlimit, quota, statistic, a dynamic set or time ({}), {how}; {enforced}",
            limited.join(", ")
        );
    }
    let rev_path = rev_path_rules(rs);
    if !rev_path.is_empty() {
        eprintln!(
            "parapet: note: rules with a reverse-path check (fib saddr … oif) ({}): a trace line says nothing of the host's routes, so every packet's route back is assumed to leave through its input interface (rpath iif: not spoofed); trace --packet '… rpath other|none' evaluates the other outcomes",
            rev_path.join(", ")
        );
    }
    // Time windows are not compiled: the linear engine answers for them.
    if (stateful.stateful != "match" || !timed.is_empty()) && !limited.is_empty() {
        // The linear engine (the specification) keeps the state.
        let stdout = std::io::stdout();
        let mut out = BufWriter::with_capacity(1 << 16, stdout.lock());
        for d in replay::decisions(rs, chain, sets.as_ref(), trace, stateful)? {
            match (d, with_verdict) {
                (None, _) => writeln!(out, "-")?,
                (Some(d), true) => writeln!(out, "{}\t{}", d.rule_id, d.verdict)?,
                (Some(d), false) => writeln!(out, "{}", d.rule_id)?,
            }
        }
        out.flush()?;
        return Ok(ExitCode::SUCCESS);
    }
    let engine = ChainClassifier::build(rs, chain, args)?;
    let items = load::trace_items(trace)?;
    let host = crate::engine::HostAddrs::parse(&args.local_addr)?;
    let stdout = std::io::stdout();
    let mut out = BufWriter::with_capacity(1 << 16, stdout.lock());
    for item in &items {
        let pkt = match item {
            load::TraceItem::Packet(p) => p,
            // Frames the dataplane passes or drops before classifying: no
            // rule decided them.
            load::TraceItem::Unclassified { passes, why } => {
                if with_verdict {
                    writeln!(
                        out,
                        "-\t{} ({why})",
                        if *passes { "ACCEPT" } else { "DROP" }
                    )?;
                } else {
                    writeln!(out, "-")?;
                }
                continue;
            }
        };
        let mut pkt = pkt.clone();
        host.apply(&mut pkt);
        let d = engine.classify(rs, &pkt, sets.as_ref())?;
        if with_verdict {
            writeln!(out, "{}\t{}", d.rule_id, d.verdict)?;
        } else {
            writeln!(out, "{}", d.rule_id)?;
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// `parapet trace`: the linear engine's walk, rule by rule, and a check that
/// the selected engine agrees with it.
pub fn trace(rules: &Path, packets: &[String], args: &EngineArgs) -> Result<ExitCode> {
    let (parsed, chain, sets) = prepare(rules, args)?;
    let rs = &parsed.ruleset;
    let linear = parapet_model::LinearEngine::new(rs, chain).map_err(|e| anyhow!("{e}"))?;
    let engine = ChainClassifier::build(rs, chain, args)?;
    let host = crate::engine::HostAddrs::parse(&args.local_addr)?;
    for spec in packets {
        let mut pkt: Packet = spec
            .parse()
            .map_err(|e| anyhow!("--packet '{spec}': {e}"))?;
        host.apply(&mut pkt);
        println!("packet: {pkt}");
        if !rev_path_rules(rs).is_empty() && !spec.split_whitespace().any(|w| w == "rpath") {
            println!("  (assuming the route back to the source leaves through the input interface: rpath iif; say rpath other|none otherwise)");
        }
        let (decision, steps) = linear
            .trace(&pkt, sets.as_ref())
            .map_err(|e| anyhow!("{e}"))?;
        // the mark as the rules see it: a MARK rule changes it for the
        // rules after it
        let mut seen = pkt.clone();
        for step in &steps {
            let (t, c, i) = step.at;
            let rule = rs
                .tables
                .get(t)
                .and_then(|t| t.chains.get(c))
                .and_then(|c| c.rules.get(i))
                .context("trace names a rule the ruleset lacks")?;
            let indent = "  ".repeat(step.depth + 1);
            let what = describe_matches(rs, &rule.matches, pkt.family);
            let action = describe_action(rule);
            match step.failed_on {
                None => println!(
                    "{indent}rule {:>4} {:<12} {what} -> {action}: matched{}{}",
                    rule.id,
                    step.chain,
                    stateful_assumption(rule),
                    step.mark
                        .map(|m| format!(", mark now {m:#x}"))
                        .unwrap_or_default()
                ),
                Some(field) => {
                    let set = rule.matches.get(field).cloned().unwrap_or_default();
                    let why = match field {
                        Field::Set(n) => {
                            let name = &rs.set_refs[n as usize].name;
                            if set.contains(1) {
                                format!("the packet is not in set {name}")
                            } else {
                                format!("the packet is in set {name}")
                            }
                        }
                        // the first `-m string` the packet's bytes fail
                        Field::Payload => rule
                            .matches
                            .payload()
                            .iter()
                            .find(|m| !m.holds(seen.datagram.as_deref()))
                            .map(|m| format!("the packet's bytes fail {}", describe_string(m)))
                            .unwrap_or_default(),
                        _ => format!(
                            "{field} {} not in {}",
                            parapet_model::format_value(field, seen.value(field), pkt.family),
                            format_set(field, &set, pkt.family)
                        ),
                    };
                    println!(
                        "{indent}rule {:>4} {:<12} {what} -> {action}: no match, {why}",
                        rule.id, step.chain
                    );
                }
            }
            if let Some(m) = step.mark {
                seen.mark = m;
            }
        }
        print_decision(&decision, &pkt);
        let other = engine.classify(rs, &pkt, sets.as_ref())?;
        if other != decision {
            bail!("engine '{}' disagrees with the linear engine: {:?} vs {:?} — please report this bug", engine.name(), other, decision);
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn print_decision(d: &Decision, pkt: &Packet) {
    if d.rule_id == 0 {
        println!("decided by the chain policy: {}", d.verdict);
    } else {
        println!("decided by rule {}: {}", d.rule_id, d.verdict);
    }
    if !d.nonterminal.is_empty() {
        let ids: Vec<String> = d.nonterminal.iter().map(u32::to_string).collect();
        println!("non-terminal rules matched on the way: {}", ids.join(", "));
    }
    if let Some(m) = d.mark {
        println!(
            "mark set to (mark & {:#x}) ^ {:#x}: {:#x} for this packet",
            !m.mask,
            m.value,
            m.apply(pkt.mark)
        );
    }
}

/// `saddr 10.0.0.0/8 dport 22`: a rule's constraints in field order.
fn describe_matches(rs: &parapet_model::Ruleset, m: &Matches, packet_family: Family) -> String {
    let family = match m.get(Field::Family).map(|s| s.ranges().to_vec()) {
        Some(r) if r == [(6, 6)] => Family::V6,
        Some(r) if r == [(4, 4)] => Family::V4,
        _ => packet_family,
    };
    if m.is_empty() {
        return "(any)".into();
    }
    // `fragment 0` goes without saying next to ports, flags or an ICMP
    // type: those matches never match a non-first fragment.
    let transport = m.reads_transport_header();
    let mut parts: Vec<String> = m
        .iter()
        .filter(|(f, _)| *f != Field::Family)
        .filter(|(f, s)| !(transport && *f == Field::Fragment && s.ranges() == [(0, 0)]))
        .map(|(f, s)| match f {
            Field::Set(n) => format!(
                "{}@{}",
                if s.contains(1) { "" } else { "!" },
                rs.set_refs[*n as usize].name
            ),
            _ => format!("{f} {}", format_set(*f, s, family)),
        })
        .collect();
    parts.extend(m.payload().iter().map(describe_string));
    if parts.is_empty() {
        format!("ipv{}", if family == Family::V6 { 6 } else { 4 })
    } else {
        parts.join(" ")
    }
}

/// `string "ab"` (`!string` for `! --string`), bytes escaped as Rust
/// writes them.
fn describe_string(m: &parapet_model::string_match::StringMatch) -> String {
    format!(
        "{}string \"{}\"",
        if m.invert { "!" } else { "" },
        m.pattern.escape_ascii()
    )
}

fn describe_action(rule: &parapet_model::Rule) -> String {
    use parapet_model::Action;
    let action = match &rule.action {
        Action::Verdict(v) => v.to_string(),
        Action::Log(_) => "LOG".into(),
        Action::Count if rule.set_mark.is_some() => String::new(),
        Action::Count => "count".into(),
        Action::Return => "RETURN".into(),
        Action::Jump(c) => format!("jump {c}"),
        Action::Goto(c) => format!("goto {c}"),
    };
    match rule.set_mark {
        Some(m) if action.is_empty() => format!("MARK --set-xmark {:#x}/{:#x}", m.value, m.mask),
        Some(m) => format!("MARK --set-xmark {:#x}/{:#x}, {action}", m.value, m.mask),
        None => action,
    }
}

/// `parapet explain`.
pub fn explain(rules: &Path, args: &EngineArgs) -> Result<ExitCode> {
    let parsed = load::ruleset(rules, &args.format)?;
    let rs = &parsed.ruleset;
    let chain = rs
        .select_chain(args.chain.as_deref())
        .map_err(|e| anyhow!(e))?;
    let engine = ChainClassifier::build(rs, chain, args)?;
    println!("ruleset: {}", load::summary(rs));
    print!("{}", engine.explain(rs));
    Ok(ExitCode::SUCCESS)
}

/// `parapet bench classify`: median lookups/s over timed runs.
pub fn bench_classify(
    rules: &Path,
    trace: &Path,
    args: &EngineArgs,
    json: bool,
    runs: usize,
) -> Result<ExitCode> {
    let (parsed, chain, sets) = prepare(rules, args)?;
    let rs = &parsed.ruleset;
    let packets = load::trace(trace)?;
    if packets.is_empty() {
        bail!("{}: the trace has no packets", trace.display());
    }
    let start = Instant::now();
    let engine = ChainClassifier::build(rs, chain, args)?;
    let build_ms = start.elapsed().as_secs_f64() * 1e3;
    let report = match &engine {
        // Compiled engines are measured through the batch API, the path a
        // dataplane uses.
        ChainClassifier::Compiled(c) => {
            let keys: Vec<_> = packets
                .iter()
                .map(|p| engine::key(rs, p, sets.as_ref()))
                .collect();
            let r = parapet_compile::time_lookups(c, &keys, runs);
            Report {
                engine: engine.name(),
                rules: rs.rule_count(),
                build_ms,
                memory_bytes: r.memory_bytes,
                median: r.lookups_per_sec,
                min: r.min_lookups_per_sec,
                max: r.max_lookups_per_sec,
                cpu_median: r.cpu_lookups_per_sec,
                per_run: r.lookups_per_run,
                runs,
            }
        }
        _ => one_by_one(&engine, rs, &packets, sets.as_ref(), runs, build_ms)?,
    };
    if json {
        println!(
            "{}",
            serde_json::json!({
                "engine": report.engine,
                "rules": report.rules,
                "build_ms": report.build_ms,
                "memory_bytes": report.memory_bytes,
                "lookups_per_sec": report.median,
                "lookups_per_sec_min": report.min,
                "lookups_per_sec_max": report.max,
                "cpu_lookups_per_sec": report.cpu_median,
                "ns_per_lookup": 1e9 / report.median,
                "lookups_per_run": report.per_run,
                "runs": report.runs,
            })
        );
    } else {
        println!(
            "{}: {} rules, built in {:.1} ms, {} bytes; {:.0} lookups/s median of {} runs (min {:.0}, max {:.0}), {:.1} ns/lookup",
            report.engine, report.rules, report.build_ms, report.memory_bytes, report.median, report.runs, report.min, report.max, 1e9 / report.median
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// One benchmark result.
struct Report {
    engine: &'static str,
    rules: usize,
    build_ms: f64,
    memory_bytes: usize,
    median: f64,
    min: f64,
    max: f64,
    /// Median lookups per second of the thread's CPU time: steadier than
    /// wall-clock rates on a shared machine.
    cpu_median: f64,
    per_run: usize,
    runs: usize,
}

/// Times packet-at-a-time lookups. Each run is sized to take about 0.2 s,
/// so slow engines on big rulesets finish and fast ones are measured over
/// many lookups.
fn one_by_one(
    engine: &ChainClassifier,
    rs: &parapet_model::Ruleset,
    packets: &[Packet],
    sets: &dyn parapet_model::SetLookup,
    runs: usize,
    build_ms: f64,
) -> Result<Report> {
    let probe = Instant::now();
    let mut n = 0usize;
    while probe.elapsed().as_secs_f64() < 0.2 {
        std::hint::black_box(engine.classify(rs, &packets[n % packets.len()], sets)?);
        n += 1;
    }
    let mut rates = Vec::with_capacity(runs);
    let mut cpu_rates = Vec::with_capacity(runs);
    for r in 0..runs {
        let offset = (r * n) % packets.len();
        let cpu0 = parapet_compile::thread_cpu_seconds();
        let t = Instant::now();
        for i in 0..n {
            std::hint::black_box(engine.classify(
                rs,
                &packets[(offset + i) % packets.len()],
                sets,
            )?);
        }
        rates.push(n as f64 / t.elapsed().as_secs_f64());
        cpu_rates.push(n as f64 / (parapet_compile::thread_cpu_seconds() - cpu0).max(1e-9));
    }
    rates.sort_by(|a, b| a.total_cmp(b));
    cpu_rates.sort_by(|a, b| a.total_cmp(b));
    Ok(Report {
        engine: engine.name(),
        rules: rs.rule_count(),
        build_ms,
        memory_bytes: engine.memory_bytes(rs),
        median: rates[rates.len() / 2],
        min: rates[0],
        max: rates[rates.len() - 1],
        cpu_median: cpu_rates[cpu_rates.len() / 2],
        per_run: n,
        runs,
    })
}

/// What every classifying command starts with: the parsed ruleset, the
/// chain to evaluate, and the sets its rules use.
fn prepare(
    rules: &Path,
    args: &EngineArgs,
) -> Result<(
    parapet_parse::Parsed,
    parapet_model::ChainId,
    Box<dyn parapet_model::SetLookup>,
)> {
    let parsed = load::ruleset(rules, &args.format)?;
    let chain = parsed
        .ruleset
        .select_chain(args.chain.as_deref())
        .map_err(|e| anyhow!(e))?;
    let sets = engine::sets(args, &parsed)?;
    Ok((parsed, chain, sets))
}

/// What `trace` assumed of a rule's stateful condition (offline there is no
/// clock and no table to ask): named, so the reader sees which one decided.
fn stateful_assumption(rule: &parapet_model::Rule) -> String {
    let other = stateful_match_assumption(rule);
    match (&rule.time, other.is_empty()) {
        (None, _) => other,
        (Some(_), true) => " (assuming its time window is open)".to_string(),
        (Some(_), false) => {
            other.replacen(" (assuming", " (assuming its time window is open and", 1)
        }
    }
}

/// [`stateful_assumption`] of the rule's stateful matches alone, in the
/// order the kernel runs them (`Rule::conditions`).
fn stateful_match_assumption(rule: &parapet_model::Rule) -> String {
    let texts: Vec<String> = rule
        .conditions()
        .iter()
        .map(|c| format!("`{}`", condition_text(c)))
        .collect();
    match texts.as_slice() {
        [] => String::new(),
        [one] => format!(" (assuming its stateful match {one} answers yes)"),
        many => format!(
            " (assuming its stateful matches {} answer yes, in this order)",
            many.join(" and ")
        ),
    }
}

/// One stateful condition as `trace` names it.
fn condition_text(c: &parapet_model::Condition<'_>) -> String {
    use parapet_model::Condition;
    match c {
        Condition::Recent(r) => {
            let mut s = format!(
                "{}{} on recent table {}",
                if r.invert { "! " } else { "" },
                r.command.option(),
                r.name
            );
            if r.seconds != 0 {
                s += &format!(" --seconds {}", r.seconds);
            }
            if r.hitcount != 0 {
                s += &format!(" --hitcount {}", r.hitcount);
            }
            s
        }
        Condition::Hashlimit(h) => format!(
            "hashlimit --hashlimit-{} {}/{} on table {}",
            if h.above { "above" } else { "upto" },
            h.rate,
            h.per.name(),
            h.name
        ),
        Condition::Dynset(d) => {
            let what = match d.op {
                parapet_model::DynsetOp::Lookup if d.invert => "not in",
                parapet_model::DynsetOp::Lookup => "in",
                parapet_model::DynsetOp::Add => "add to",
                parapet_model::DynsetOp::Update => "update",
                parapet_model::DynsetOp::Delete => "delete from",
            };
            let limit = d
                .limit
                .as_ref()
                .map(|l| format!(" with limit {}/{}", l.rate, l.per.name()))
                .unwrap_or_default();
            format!("{what} dynamic set @{}{limit}", d.set.name)
        }
        Condition::Quota(q) => format!(
            "quota {}{} bytes",
            if q.over { "over " } else { "" },
            q.bytes
        ),
        Condition::Statistic(st) => {
            let what = match st.mode {
                parapet_model::StatisticMode::Nth { every, packet } => {
                    format!("statistic --mode nth --every {every} --packet {packet}")
                }
                parapet_model::StatisticMode::Random { threshold } => format!(
                    "statistic --mode random --probability {}",
                    parapet_model::Statistic::probability_text(threshold)
                ),
            };
            format!("{}{what}", if st.invert { "! " } else { "" })
        }
        Condition::Limit(l) => format!("limit {}/{}", l.rate, l.per.name()),
    }
}

/// The ids of the rules with a reverse-path check (`fib saddr … oif`),
/// whose outcome is the host's routing table's: offline it is assumed.
fn rev_path_rules(rs: &parapet_model::Ruleset) -> Vec<String> {
    rs.rules()
        .filter(|r| r.all_matches().get(Field::RevPath).is_some())
        .map(|r| r.id.to_string())
        .collect()
}
