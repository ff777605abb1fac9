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
    // `:CHAIN [p:b]`: a user chain without the `-` (iptables-nft-restore
    // reads it so; a built-in chain needs its policy).
    if !t.builtins.contains(&name)
        && parse_counters(&policy_word.text).is_some()
        && words.len() == 2
    {
        let dash = Word {
            text: "-".into(),
            col: policy_word.col,
            quoted: false,
        };
        let fixed = [name_word.clone(), dash, policy_word.clone()];
        return chain_header(&fixed, ln, t, errs);
    }
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
                // Keep the rule out of the loop check below (both model
                // rules of a `--ports` rule).
                let id = chains[p.chain].rules[p.rule].id;
                for r in chains[p.chain].rules[p.rule..]
                    .iter_mut()
                    .take_while(|r| r.id == id)
                {
                    r.action = Action::Count;
                }
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

/// The commands iptables-restore also reads inside a table: `-P CHAIN
/// POLICY` (a built-in chain's policy), `-N CHAIN` (a user chain, as
/// `:CHAIN -`) and `-F [CHAIN]` while the chains flushed have no rules (a
/// flush after rules would leave ids that are no longer file positions).
pub(super) fn chain_command(words: &[Word], ln: u32, t: &mut TableState, errs: &mut Errors) {
    let cmd = &words[0];
    let arg = words.get(1);
    match cmd.text.as_str() {
        "-P" | "--policy" => {
            let (Some(chain), Some(policy)) = (arg, words.get(2)) else {
                return errs.push(ln, cmd.col, "expected '-P CHAIN ACCEPT|DROP'");
            };
            let verdict = match policy.text.as_str() {
                "ACCEPT" => Verdict::Accept,
                "DROP" => Verdict::Drop,
                other => {
                    return errs.push(
                        ln,
                        policy.col,
                        format!("expected a policy ACCEPT or DROP, found '{other}'"),
                    )
                }
            };
            match t.chains.iter_mut().find(|c| c.name == chain.text) {
                Some(Chain { base: Some(b), .. }) => b.policy = verdict,
                _ if t.builtins.contains(&chain.text.as_str()) => {
                    // `-P` before the `:CHAIN` line: declare it with the policy.
                    let fixed = [
                        Word {
                            text: format!(":{}", chain.text),
                            col: chain.col,
                            quoted: false,
                        },
                        policy.clone(),
                    ];
                    chain_header(&fixed, ln, t, errs);
                }
                _ => errs.push(
                    ln,
                    chain.col,
                    format!(
                        "'-P' needs a built-in chain of table '{}' ({}), found '{}'",
                        t.name,
                        t.builtins.join(", "),
                        chain.text
                    ),
                ),
            }
        }
        "-N" | "--new-chain" => {
            let Some(chain) = arg else {
                return errs.push(ln, cmd.col, "expected '-N CHAIN'");
            };
            let fixed = [
                Word {
                    text: format!(":{}", chain.text),
                    col: chain.col,
                    quoted: false,
                },
                Word {
                    text: "-".into(),
                    col: chain.col,
                    quoted: false,
                },
            ];
            chain_header(&fixed, ln, t, errs);
        }
        _ => {
            let flushed: Vec<usize> = match arg {
                Some(c) => match t.chains.iter().position(|x| x.name == c.text) {
                    Some(i) => vec![i],
                    None => {
                        return errs.push(
                            ln,
                            c.col,
                            format!("chain '{}' is not declared in table '{}'", c.text, t.name),
                        )
                    }
                },
                None => (0..t.chains.len()).collect(),
            };
            let has_rules = flushed.iter().any(|&i| {
                !t.chains[i].rules.is_empty() || t.kernel_rules.get(i).is_some_and(|n| *n > 0)
            });
            if has_rules {
                errs.push(ln, cmd.col, "'-F' after rules of the chain is not supported (the rules it removes hold rule ids): remove them from the file");
            }
        }
    }
}
