//! `parapet lint` and `parapet diff`: exact ruleset analysis with
//! first-match regions (`parapet_model::{lint, diff}`).
//!
//! Both exit 0 when there is nothing to report, 1 when there is, and 2 on
//! an error or when the budget left the answer unproven with nothing found.

use crate::analyze_explain::{explain_json, explain_text, Dims, RuleLines};
use crate::load;
use anyhow::{anyhow, Result};
use clap::Args;
use parapet_model::{
    flatten_unpruned, Budget, DecisionList, DiffReport, Finding, FindingKind, LintOptions,
    LintReport, Ruleset, Unproven, DEFAULT_MAX_ENTRIES,
};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Options `lint` and `diff` share.
#[derive(Args, Debug)]
pub struct AnalysisArgs {
    /// Ruleset format: auto, iptables-save, ip6tables-save, nft, classbench.
    #[arg(long, default_value = "auto")]
    format: String,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
    /// Most boxes one working region may hold; a rule or region whose
    /// analysis needs more is reported as not proven, never guessed.
    #[arg(long, default_value_t = Budget::default().max_cubes)]
    budget: usize,
    /// Seconds of analysis; what is not proven by then is reported as not proven.
    #[arg(long = "time-limit", default_value_t = 60.0)]
    time_limit: f64,
}

impl AnalysisArgs {
    fn budget(&self) -> Result<Budget> {
        let limit = std::time::Duration::try_from_secs_f64(self.time_limit).map_err(|_| {
            anyhow!(
                "--time-limit {}: expected a number of seconds",
                self.time_limit
            )
        })?;
        Ok(Budget {
            max_cubes: self.budget,
            deadline: Some(std::time::Instant::now() + limit),
        })
    }

    fn unproven_note(&self, what: &str, n: usize) -> String {
        format!(
            "parapet: {what}{n} not proven within --budget {} and --time-limit {}",
            self.budget, self.time_limit
        )
    }
}

/// Options of `parapet lint`.
#[derive(Args, Debug)]
pub struct LintArgs {
    /// Ruleset file (every base chain is analysed).
    rules: PathBuf,
    /// Per finding: the rules responsible (FILE:LINE), the packets
    /// concerned as boxes, a witness and the `parapet trace` command that
    /// shows it.
    #[arg(long)]
    explain: bool,
    /// Most correlation warnings (a later rule partly overlapping an earlier
    /// one with another verdict), largest overlap first; 0: none.
    #[arg(long, default_value_t = LintOptions::default().correlations)]
    correlations: usize,
    /// Set definitions (ipset save or nft set text; repeatable), besides the
    /// ruleset's own nft set blocks: rules that need a member of a set that
    /// is empty now are warned of (`empty-set`).
    #[arg(long = "sets", value_name = "FILE")]
    sets: Vec<PathBuf>,
    #[command(flatten)]
    common: AnalysisArgs,
}

/// Options of `parapet diff`.
#[derive(Args, Debug)]
pub struct DiffArgs {
    /// The first ruleset.
    a: PathBuf,
    /// The second ruleset.
    b: PathBuf,
    /// Base chain compared in both: CHAIN (table filter) or TABLE/CHAIN; or one
    /// per side, A:CHAIN=B:CHAIN (e.g. A:INPUT=B:inet/filter/input). Default
    /// filter/INPUT, or the one base chain on the input hook.
    #[arg(long)]
    chain: Option<String>,
    /// Compare the deciding rule (its id) as well as the verdict, and the
    /// non-terminal rules (LOG, counter-only) each packet matches.
    #[arg(long)]
    rules: bool,
    /// With --rules: leave out LOG rules (`logs`) and counter-only rules
    /// (`counters`), comma separated.
    #[arg(long, value_delimiter = ',')]
    ignore: Vec<String>,
    #[command(flatten)]
    common: AnalysisArgs,
}

impl DiffArgs {
    /// The non-terminal rules `--rules` compares.
    fn nonterminal(&self) -> Result<parapet_model::NonTerminal> {
        let mut which = parapet_model::NonTerminal {
            logs: true,
            counters: true,
        };
        for what in &self.ignore {
            match what.as_str() {
                "logs" | "log" => which.logs = false,
                "counters" | "counter" => which.counters = false,
                other => {
                    return Err(anyhow!(
                        "--ignore {other}: expected logs or counters (comma separated)"
                    ))
                }
            }
        }
        Ok(which)
    }
}

/// Runs a command whose errors exit 2, as `conventions.md` asks of
/// `lint` and `diff`.
fn exit_2_on_error(result: Result<ExitCode>) -> ExitCode {
    result.unwrap_or_else(|e| {
        eprintln!("parapet: {e:#}");
        ExitCode::from(2)
    })
}

fn list_of(rs: &Ruleset, chain: Option<&str>, path: &Path) -> Result<DecisionList> {
    let id = rs
        .select_chain(chain)
        .map_err(|e| anyhow!("{}: {e}", path.display()))?;
    flatten_unpruned(rs, id, DEFAULT_MAX_ENTRIES).map_err(|e| anyhow!("{}: {e}", path.display()))
}

/// The chain of A and of B that `--chain` names: one spec for both, or
/// `A:SPEC=B:SPEC`. A spec FAMILY/TABLE/CHAIN (as nft names chains) is
/// looked up as TABLE/CHAIN.
fn chain_specs(chain: Option<&str>) -> (Option<&str>, Option<&str>) {
    let Some(c) = chain else {
        return (None, None);
    };
    match c.split_once('=') {
        Some((a, b)) => {
            let a = a.strip_prefix("A:").or(a.strip_prefix("a:")).unwrap_or(a);
            let b = b.strip_prefix("B:").or(b.strip_prefix("b:")).unwrap_or(b);
            (Some(without_family(a)), Some(without_family(b)))
        }
        None => (Some(without_family(c)), Some(without_family(c))),
    }
}

/// A FAMILY/TABLE/CHAIN spec as TABLE/CHAIN; others as they are.
fn without_family(spec: &str) -> &str {
    match spec.split_once('/') {
        Some((_, rest)) if rest.contains('/') => rest,
        _ => spec,
    }
}

/// `parapet lint RULES`.
pub fn lint(args: LintArgs) -> ExitCode {
    exit_2_on_error(run_lint(&args))
}

fn run_lint(args: &LintArgs) -> Result<ExitCode> {
    let parsed = load::ruleset(&args.rules, &args.common.format)?;
    let empty_sets = empty_sets(&parsed, &args.sets)?;
    let rs = parsed.ruleset;
    let mut lists = Vec::new();
    let mut chains = Vec::new();
    for (t, table) in rs.tables.iter().enumerate() {
        for (c, chain) in table.chains.iter().enumerate() {
            if chain.base.is_some() {
                chains.push(format!("{}/{}", table.name, chain.name));
                let id = parapet_model::ChainId { table: t, chain: c };
                lists.push(
                    flatten_unpruned(&rs, id, DEFAULT_MAX_ENTRIES)
                        .map_err(|e| anyhow!("{}: {e}", args.rules.display()))?,
                );
            }
        }
    }
    let budget = args.common.budget()?;
    let options = LintOptions {
        correlations: args.correlations,
    };
    let mut report = parapet_model::lint_with(&rs, &lists, budget, options)
        .map_err(|e| anyhow!("{}: {e}", args.rules.display()))?;
    report.warnings.extend(empty_set_warnings(&rs, &empty_sets));
    let out = LintOutput {
        path: &args.rules,
        lines: RuleLines::of(&rs),
        chains,
        report: &report,
        explain: args.explain,
        set_names: rs.set_refs.iter().map(|r| r.name.clone()).collect(),
    };
    if args.common.json {
        println!("{}", out.json());
    } else {
        out.print();
    }
    Ok(
        match (report.findings.is_empty(), report.unproven.is_empty()) {
            (false, _) => ExitCode::from(1),
            (true, true) => ExitCode::SUCCESS,
            (true, false) => {
                eprintln!(
                    "{}",
                    args.common.unproven_note("rules: ", report.unproven.len())
                );
                ExitCode::from(2)
            }
        },
    )
}

/// The sets the ruleset uses that are defined (by its own nft set blocks
/// or by `--sets` files) and hold no element now. Sets defined nowhere are
/// left out: their contents are unknown, and lint's findings hold whatever
/// they hold.
fn empty_sets(parsed: &parapet_parse::Parsed, files: &[PathBuf]) -> Result<Vec<String>> {
    if parsed.ruleset.set_refs.is_empty() {
        return Ok(Vec::new());
    }
    let mut store = parapet_sets::SetStore::new();
    for block in &parsed.set_blocks {
        store.load_nft(&block.text).map_err(|e| {
            let (l, c) = block.file_position(e.line, e.column);
            anyhow!("{l}:{c}: set '{}': {}", block.name, e.message)
        })?;
    }
    for path in files {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow!("{}: cannot read: {e}", path.display()))?;
        match parapet_parse::detect(&text) {
            parapet_parse::Format::Ipset => store.load_ipset(&text).map(|_| ()),
            _ => store.load_nft(&text).map(|_| ()),
        }
        .map_err(|e| anyhow!("{}:{e}", path.display()))?;
    }
    let mut names: Vec<String> = parsed
        .ruleset
        .set_refs
        .iter()
        .filter(|r| store.get(&r.name).is_some_and(|s| s.is_empty()))
        .map(|r| r.name.clone())
        .collect();
    names.sort();
    names.dedup();
    Ok(names)
}

/// A warning per rule that needs the packet's key in one of `empty`: it
/// matches nothing while the set stays empty.
fn empty_set_warnings(rs: &Ruleset, empty: &[String]) -> Vec<Finding> {
    let mut out = Vec::new();
    for rule in rs.rules() {
        let sets: Vec<String> = rule
            .matches
            .iter()
            .filter_map(|(field, values)| match field {
                parapet_model::Field::Set(n) if !values.contains(0) => {
                    let name = &rs.set_refs[*n as usize].name;
                    empty.contains(name).then(|| name.clone())
                }
                _ => None,
            })
            .collect();
        if !sets.is_empty() {
            let mut f = Finding::new(FindingKind::EmptySet, rule.id, Vec::new());
            f.note = Some("it needs a member of a set that is empty now");
            f.sets = sets;
            out.push(f);
        }
    }
    out
}

/// What `lint` prints, and what it needs to print it.
struct LintOutput<'a> {
    path: &'a Path,
    /// Each rule id's line (a lookup per finding: a scan of the rules per
    /// finding was quadratic on 100,000-rule lint reports).
    lines: RuleLines,
    /// The linted base chains, as TABLE/CHAIN, in the order of the lists.
    chains: Vec<String>,
    report: &'a LintReport,
    explain: bool,
    /// The set names of the ruleset's set references.
    set_names: Vec<String>,
}

impl LintOutput<'_> {
    fn dims(&self) -> Dims<'_> {
        Dims {
            fields: &self.report.dims,
            set_names: self.set_names.clone(),
        }
    }

    /// The base chain a finding's explanation is of, for `trace --chain`.
    fn chain_of(&self, f: &Finding) -> Option<&str> {
        f.explain
            .list
            .and_then(|l| self.chains.get(l))
            .map(String::as_str)
    }

    fn finding_json(&self, f: &Finding) -> Value {
        let mut o = json!({
            "kind": f.kind.name(),
            "rule": f.rule,
            "line": self.lines.get(f.rule),
            "by": f.by,
        });
        if let Some(w) = &f.witness {
            o["witness"] = json!(w.to_string());
        }
        if let Some(n) = f.note {
            o["note"] = json!(n);
        }
        if let Some(c) = &f.chain {
            o["chain"] = json!(c);
        }
        if !f.sets.is_empty() {
            o["depends_on_sets"] = json!(f.sets);
        }
        if f.kind == FindingKind::Correlation {
            if let Some(p) = f.explain.points_log2 {
                o["points_log2"] = json!((p * 100.0).round() / 100.0);
            }
        }
        if self.explain {
            o["explain"] = explain_json(f, &self.dims(), self.path, self.chain_of(f), &self.lines);
        }
        o
    }

    fn json(&self) -> Value {
        let report = self.report;
        let findings: Vec<Value> = report
            .findings
            .iter()
            .map(|f| self.finding_json(f))
            .collect();
        let warnings: Vec<Value> = report
            .warnings
            .iter()
            .map(|f| self.finding_json(f))
            .collect();
        json!({
            "findings": findings,
            "warnings": warnings,
            "complete": report.unproven.is_empty(),
            "unproven": report.unproven,
            "correlations_complete": report.correlations_complete,
        })
    }

    fn what(f: &Finding) -> String {
        let chain = f.chain.as_deref().unwrap_or("?");
        match (f.kind, f.note) {
            (FindingKind::Unreachable, Some(note)) => format!("unreachable: {note}"),
            (FindingKind::Unreachable, None) => {
                format!("unreachable: shadowed by {}", rules_text(&f.by))
            }
            (FindingKind::Redundant, _) => format!(
                "redundant: removing it changes no verdict (the packet below then gets the same one from {})",
                rules_text(&f.by)
            ),
            (FindingKind::EmptyMatch, _) => {
                "empty match: its conditions contradict each other, no packet matches it".into()
            }
            (FindingKind::UnreachedChain, note) => format!(
                "chain {chain} is never reached: {}",
                note.unwrap_or("no packet enters it")
            ),
            (FindingKind::ReturningChain, note) => format!(
                "warning: chain {chain} always returns: {}",
                note.unwrap_or("every packet comes back undecided")
            ),
            (FindingKind::EmptySet, _) => format!(
                "warning: matches nothing while set {} stays empty (depends on the set's current contents)",
                f.sets.join(", ")
            ),
            (FindingKind::Correlation, _) => format!(
                "warning: correlation: partly overlaps {} (another verdict), which takes the 2^{:.1} packets they share first",
                rules_text(&f.by),
                f.explain.points_log2.unwrap_or(0.0)
            ),
        }
    }

    fn print_one(&self, f: &Finding) {
        println!(
            "{}:{}: rule {}: {}",
            self.path.display(),
            self.lines.get(f.rule),
            f.rule,
            Self::what(f)
        );
        if self.explain {
            for line in explain_text(f, &self.dims(), self.path, self.chain_of(f), &self.lines) {
                println!("{line}");
            }
        } else if let Some(w) = &f.witness {
            println!("    e.g. {w}");
        }
    }

    fn print(&self) {
        let report = self.report;
        for f in report.findings.iter().chain(&report.warnings) {
            self.print_one(f);
        }
        if !report.correlations_complete {
            println!(
                "correlations: search cut short (rule pairs or time limit); larger ones may exist"
            );
        }
        for id in &report.unproven {
            println!(
                "{}:{}: rule {id}: not proven within the budget",
                self.path.display(),
                self.lines.get(*id)
            );
        }
        let warnings = if report.warnings.is_empty() {
            String::new()
        } else {
            format!(
                ", {} warning{}",
                report.warnings.len(),
                plural(report.warnings.len())
            )
        };
        println!(
            "{} finding{}{warnings}, {} not proven",
            report.findings.len(),
            plural(report.findings.len()),
            report.unproven.len()
        );
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

fn rules_text(ids: &[u32]) -> String {
    let names: Vec<String> = ids
        .iter()
        .map(|&i| {
            if i == 0 {
                "the policy".to_string()
            } else {
                format!("rule {i}")
            }
        })
        .collect();
    names.join(", ")
}

/// `parapet diff A B`.
pub fn diff(args: DiffArgs) -> ExitCode {
    exit_2_on_error(run_diff(&args))
}

fn run_diff(args: &DiffArgs) -> Result<ExitCode> {
    let a = load::ruleset(&args.a, &args.common.format)?.ruleset;
    let b = load::ruleset(&args.b, &args.common.format)?.ruleset;
    let (ca, cb) = chain_specs(args.chain.as_deref());
    let la = list_of(&a, ca, &args.a)?;
    let lb = list_of(&b, cb, &args.b)?;
    // The decision lists are all the comparison reads: the parsed rulesets
    // would stay beside them to the end (100,000 rules each).
    drop((a, b));
    let budget = args.common.budget()?;
    let which = args.nonterminal()?;
    let report = if args.rules {
        parapet_model::diff_rules(&la, &lb, budget, which)
    } else {
        parapet_model::diff(&la, &lb, budget)
    }
    .map_err(|e| anyhow!("{e}"))?;
    if args.common.json {
        write_diff_json(&report, &mut std::io::stdout().lock())?;
    } else {
        print_diff(&report, args.rules);
    }
    Ok(
        match (report.differences.is_empty(), report.unproven.is_empty()) {
            (false, _) => ExitCode::from(1),
            (true, true) => ExitCode::SUCCESS,
            (true, false) => {
                eprintln!(
                    "{}",
                    args.common
                        .unproven_note("no difference found; regions: ", report.unproven.len())
                );
                ExitCode::from(2)
            }
        },
    )
}

fn unproven_text(u: &Unproven) -> String {
    match u {
        Unproven::A(id) => format!("a:{id}"),
        Unproven::B(id) => format!("b:{id}"),
        Unproven::Policies => "policies".into(),
    }
}

/// One difference as its JSON object.
fn difference_json(d: &parapet_model::Difference) -> Value {
    let mut o = json!({
        "witness": d.witness.to_string(),
        "points_log2": (d.points_log2 * 100.0).round() / 100.0,
        "a": d.a.0,
        "b": d.b.0,
        "a_verdict": d.a.1.name(),
        "b_verdict": d.b.1.name(),
    });
    if let Some(n) = &d.nonterminal {
        o["nonterminal"] = json!({
            "rule": n.rule,
            "kind": n.kind,
            "in": if n.in_a { "a" } else { "b" },
        });
    }
    o
}

/// The report as one JSON object on one line, written difference by
/// difference: the whole document as one value took more memory than the
/// comparison's pieces when a 100,000-rule `diff` reported 350,000 boxes
/// (benchmarks.md §70). The same text the value printed: keys in sorted
/// order (`complete`, `differences`, `equivalent`, `unproven`), compact.
fn write_diff_json(report: &DiffReport, out: &mut dyn std::io::Write) -> Result<()> {
    let unproven: Vec<String> = report.unproven.iter().map(unproven_text).collect();
    write!(
        out,
        "{{\"complete\":{},\"differences\":[",
        report.unproven.is_empty()
    )?;
    for (k, d) in report.differences.iter().enumerate() {
        if k > 0 {
            out.write_all(b",")?;
        }
        serde_json::to_writer(&mut *out, &difference_json(d))?;
    }
    write!(
        out,
        "],\"equivalent\":{},\"unproven\":",
        report.equivalent()
    )?;
    serde_json::to_writer(&mut *out, &unproven)?;
    writeln!(out, "}}")?;
    out.flush()?;
    Ok(())
}

fn print_diff(report: &DiffReport, by_rule: bool) {
    for d in &report.differences {
        if let Some(n) = &d.nonterminal {
            println!(
                "{} rule {} matches in {} only  2^{:.1} packets, e.g. {}",
                n.kind,
                n.rule,
                if n.in_a { "a" } else { "b" },
                d.points_log2,
                d.witness
            );
            continue;
        }
        let who = |id: u32| {
            if id == 0 {
                "policy".to_string()
            } else {
                format!("rule {id}")
            }
        };
        println!(
            "a: {} {:<6}  b: {} {:<6}  2^{:.1} packets, e.g. {}",
            who(d.a.0),
            d.a.1.name(),
            who(d.b.0),
            d.b.1.name(),
            d.points_log2,
            d.witness
        );
    }
    for u in &report.unproven {
        println!("not proven within the budget: {}", unproven_text(u));
    }
    if report.equivalent() && by_rule {
        println!("equivalent: every packet is decided by the same rule, with the same verdict, and matches the same LOG and counter rules");
    } else if report.equivalent() {
        println!("equivalent: every packet gets the same verdict");
    } else {
        println!(
            "{} difference{}, {} not proven",
            report.differences.len(),
            if report.differences.len() == 1 {
                ""
            } else {
                "s"
            },
            report.unproven.len()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(text: &str) -> DecisionList {
        let rs = parapet_parse::parse(text, "t", parapet_parse::Format::Auto)
            .unwrap()
            .ruleset;
        flatten_unpruned(&rs, rs.select_chain(None).unwrap(), DEFAULT_MAX_ENTRIES).unwrap()
    }

    /// The report written box by box is the text the whole report as one
    /// JSON value printed (sorted keys, compact), with and without
    /// differences and unproven regions.
    #[test]
    fn streamed_diff_json_is_the_value_printed() {
        let a = list("*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -p tcp --dport 22 -j DROP\n-A INPUT -s 10.0.0.0/8 -j DROP\nCOMMIT\n");
        let b = list("*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -p tcp --dport 23 -j DROP\nCOMMIT\n");
        let mut report = parapet_model::diff(&a, &b, Budget::default()).unwrap();
        assert!(report.differences.len() >= 2);
        for unproven in [vec![], vec![Unproven::A(2), Unproven::Policies]] {
            report.unproven = unproven;
            let value = json!({
                "equivalent": report.equivalent(),
                "complete": report.unproven.is_empty(),
                "differences": report.differences.iter().map(difference_json).collect::<Vec<_>>(),
                "unproven": report.unproven.iter().map(unproven_text).collect::<Vec<_>>(),
            });
            let mut out = Vec::new();
            write_diff_json(&report, &mut out).unwrap();
            assert_eq!(String::from_utf8(out).unwrap(), format!("{value}\n"));
        }
        let same = parapet_model::diff(&a, &a, Budget::default()).unwrap();
        let mut out = Vec::new();
        write_diff_json(&same, &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "{\"complete\":true,\"differences\":[],\"equivalent\":true,\"unproven\":[]}\n"
        );
    }
}
