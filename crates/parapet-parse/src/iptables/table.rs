//! iptables-save structure: `*table`, `:CHAIN POLICY [p:b]`, and at
//! `COMMIT` the resolution of jumps and the loop check.

use super::targets::{KNOWN_UNSUPPORTED_TARGETS, SUPPORTED_TARGETS};
use crate::common::*;
use crate::error::Errors;
use parapet_model::*;

/// Built-in chains of each table iptables has, and the priority iptables
/// gives the table on its hooks (`NF_IP_PRI_*`), so tables order like nft
/// chains.
fn table_info(name: &str) -> Option<(&'static [&'static str], i32)> {
    match name {
        "filter" => Some((&["INPUT", "FORWARD", "OUTPUT"], 0)),
        "raw" => Some((&["PREROUTING", "OUTPUT"], -300)),
        "mangle" => Some((
            &["PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"],
            -150,
        )),
        "nat" => Some((&["PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"], -100)),
        "security" => Some((&["INPUT", "FORWARD", "OUTPUT"], 50)),
        _ => None,
    }
}

/// Tables parapet loads but leaves to the kernel's netfilter: NAT, packet
/// mangling, conntrack exemptions and SELinux labels are not the filter
/// path parapet enforces, and the kernel keeps doing them.
pub(super) fn left_to_kernel(name: &str) -> bool {
    matches!(name, "nat" | "raw" | "mangle" | "security")
}

pub(super) const SUPPORTED_TABLES: &str =
    "filter (enforced); nat, raw, mangle, security (left to the kernel)";

pub(super) struct PendingTarget {
    pub(super) chain: usize,
    pub(super) rule: usize,
    pub(super) target: String,
    pub(super) line: u32,
    pub(super) col: u32,
}

pub(super) struct TableState {
    pub(super) name: String,
    pub(super) line: u32,
    /// Unsupported table: its lines are skipped until COMMIT (one error was
    /// reported at `*name`).
    pub(super) skip: bool,
    pub(super) builtins: &'static [&'static str],
    pub(super) priority: i32,
    pub(super) chains: Vec<Chain>,
    pub(super) pending: Vec<PendingTarget>,
    /// A table left to the kernel: its rules are counted per chain (parallel
    /// to `chains`) and its lines kept verbatim in `text`.
    pub(super) kernel: bool,
    pub(super) kernel_rules: Vec<usize>,
    pub(super) text: String,
}

impl TableState {
    /// The note for a table left to the kernel, at its `COMMIT`.
    pub(super) fn into_left(self, family: Family) -> LeftToKernel {
        LeftToKernel {
            family: table_family(family),
            table: self.name,
            line: self.line,
            chains: self
                .chains
                .into_iter()
                .map(|c| c.name)
                .zip(self.kernel_rules)
                .collect(),
            text: self.text,
            nft: false,
            first_id: 0,
            object: None,
        }
    }
}

fn table_family(family: Family) -> TableFamily {
    match family {
        Family::V4 => TableFamily::Ip,
        Family::V6 => TableFamily::Ip6,
    }
}

/// The state for `*name`: an unsupported table is reported once, and its
/// lines are skipped until COMMIT.
pub(super) fn open_table(name: String, ln: u32, indent: u32, errs: &mut Errors) -> TableState {
    match table_info(&name) {
        Some((builtins, priority)) => TableState {
            line: ln,
            skip: false,
            builtins,
            priority,
            chains: Vec::new(),
            pending: Vec::new(),
            kernel: left_to_kernel(&name),
            kernel_rules: Vec::new(),
            text: format!("*{name}\n"),
            name,
        },
        None => {
            errs.push(
                ln,
                indent + 2,
                format!("table '{name}' is not supported (tables: {SUPPORTED_TABLES})"),
            );
            TableState {
                name,
                line: ln,
                skip: true,
                builtins: &[],
                priority: 0,
                chains: Vec::new(),
                pending: Vec::new(),
                kernel: false,
                kernel_rules: Vec::new(),
                text: String::new(),
            }
        }
    }
}

pub(super) fn parse_counters(s: &str) -> Option<Counters> {
    let inner = s.strip_prefix('[')?.strip_suffix(']')?;
    let (p, b) = inner.split_once(':')?;
    Some(Counters {
        packets: p.parse().ok()?,
        bytes: b.parse().ok()?,
    })
}

pub(super) fn chain_header(words: &[Word], ln: u32, t: &mut TableState, errs: &mut Errors) {
    let name_word = &words[0];
    let name = &name_word.text[1..];
    if name.is_empty() {
        errs.push(ln, name_word.col + 1, "expected a chain name after ':'");
        return;
    }
    if t.chains.iter().any(|c| c.name == name) {
        errs.push(
            ln,
            name_word.col + 1,
            format!("chain '{name}' is declared twice"),
        );
        return;
    }
    let Some(policy_word) = words.get(1) else {
        errs.push(
            ln,
            name_word.col + name_word.text.len() as u32 + 1,
            format!("expected a policy (ACCEPT, DROP, or - for a user chain) after ':{name}'"),
        );
        return;
    };
    let counters = match words.get(2) {
        Some(w) => match parse_counters(&w.text) {
            Some(c) => c,
            None => {
                errs.push(ln, w.col, "expected counters [PACKETS:BYTES]");
                return;
            }
        },
        None => Counters::default(),
    };
    let builtin = t.builtins.contains(&name);
    let policy = match policy_word.text.as_str() {
        "-" if !builtin => None,
        "-" => {
            errs.push(
                ln,
                policy_word.col,
                format!("built-in chain '{name}' needs a policy ACCEPT or DROP, not '-'"),
            );
            return;
        }
        p @ ("ACCEPT" | "DROP") if builtin => Some(if p == "ACCEPT" {
            Verdict::Accept
        } else {
            Verdict::Drop
        }),
        p @ ("ACCEPT" | "DROP") => {
            errs.push(
                ln,
                policy_word.col,
                format!(
                    "'{name}' is not a built-in chain of table '{}' ({}), so its policy must be '-', not '{p}'",
                    t.name,
                    t.builtins.join(", ")
                ),
            );
            return;
        }
        other => {
            errs.push(
                ln,
                policy_word.col,
                format!("expected a policy ACCEPT, DROP or '-', found '{other}'"),
            );
            return;
        }
    };
    t.chains.push(Chain {
        name: name.to_string(),
        base: policy.map(|policy| BaseChain {
            hook: Hook::from_name(name).expect("built-in chains are hooks"),
            priority: t.priority,
            policy,
            counters,
        }),
        rules: Vec::new(),
    });
    t.kernel_rules.push(0);
}

/// Resolves jump targets, rejects loops, and adds the table to the ruleset.
pub(super) fn finish_table(t: TableState, family: Family, rs: &mut Ruleset, errs: &mut Errors) {
    let mut edges: Vec<Vec<(usize, u32, u32)>> = vec![Vec::new(); t.chains.len()];
    let mut chains = t.chains;
    for p in &t.pending {
        match chains.iter().position(|c| c.name == p.target) {
            Some(target) if chains[target].base.is_some() => errs.push(
                p.line,
                p.col,
                format!("cannot jump to built-in chain '{}'", p.target),
            ),
            Some(target) => edges[p.chain].push((target, p.line, p.col)),
            None => {
                let msg = if KNOWN_UNSUPPORTED_TARGETS.contains(&p.target.as_str()) {
                    format!(
                        "target '{}' is not supported (supported: {SUPPORTED_TARGETS})",
                        p.target
                    )
                } else {
                    format!(
                        "jump to unknown chain or target '{}' (no ':{} - [0:0]' in table '{}'; supported targets: {SUPPORTED_TARGETS})",
                        p.target, p.target, t.name
                    )
                };
                // Keep the rule out of the loop check below.
                chains[p.chain].rules[p.rule].action = Action::Count;
                errs.push(p.line, p.col, msg);
            }
        }
    }
    let names: Vec<&str> = chains.iter().map(|c| c.name.as_str()).collect();
    report_loops(&names, &edges, errs);
    rs.tables.push(Table {
        name: t.name,
        family: table_family(family),
        chains,
    });
}
