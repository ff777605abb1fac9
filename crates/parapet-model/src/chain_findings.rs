//! `parapet lint`'s findings about user chains, from which rules packets
//! reach (the per-rule answers of `lint.rs`):
//!
//! - **unreached-chain**: a user chain with rules that no packet enters —
//!   no rule jumps or goes to it, or none of those rules is ever reached.
//!   Every rule of it is unreachable too (and reported as such); the chain
//!   finding says why in one line.
//! - **returning-chain** (a warning): packets enter the chain, but every one
//!   comes back out undecided — no rule with a verdict in it, or in a chain
//!   it jumps or goes to, is ever reached. A chain that only logs is often
//!   meant that way; a chain whose verdicts all lost to earlier rules is not.
//!
//! Chains are judged by rule ids, not per flattened copy: a chain jumped to
//! from two places is reached when either jump is, and returns always only
//! when none of its deciding rules is reached from anywhere (a chain it
//! shares with another caller may hide a return: the finding is then
//! missed, never made up).

use crate::finding::{Finding, FindingKind};
use crate::rule::{Action, Rule, Ruleset};

/// The chain findings and warnings of `ruleset`; `reached(id)` says whether
/// some packet reaches rule `id` (None: not proven, so nothing is claimed).
pub(crate) fn chain_findings(
    ruleset: &Ruleset,
    reached: &dyn Fn(u32) -> Option<bool>,
) -> (Vec<Finding>, Vec<Finding>) {
    let (mut findings, mut warnings) = (Vec::new(), Vec::new());
    for table in &ruleset.tables {
        let target_of = |r: &Rule| match &r.action {
            Action::Jump(t) | Action::Goto(t) => table.chains.iter().position(|c| &c.name == t),
            _ => None,
        };
        for (c, chain) in table.chains.iter().enumerate() {
            if chain.base.is_some() || chain.rules.is_empty() {
                continue;
            }
            let name = format!("{}/{}", table.name, chain.name);
            let jumps: Vec<u32> = table
                .chains
                .iter()
                .flat_map(|ch| &ch.rules)
                .filter(|r| target_of(r) == Some(c))
                .map(|r| r.id)
                .collect();
            let states: Vec<Option<bool>> = jumps.iter().map(|&id| reached(id)).collect();
            if states.contains(&None) {
                continue;
            }
            let entering: Vec<u32> = jumps
                .iter()
                .zip(&states)
                .filter(|(_, s)| **s == Some(true))
                .map(|(&id, _)| id)
                .collect();
            if entering.is_empty() {
                let mut f = Finding::new(FindingKind::UnreachedChain, chain.rules[0].id, jumps);
                f.note = Some(if f.by.is_empty() {
                    "no rule jumps or goes to it"
                } else {
                    "no packet reaches the rules that jump or go to it"
                });
                f.chain = Some(name);
                findings.push(f);
                continue;
            }
            // The chain and every chain it jumps or goes to.
            let mut closure = vec![c];
            let mut k = 0;
            while k < closure.len() {
                for r in &table.chains[closure[k]].rules {
                    if let Some(t) = target_of(r) {
                        if !closure.contains(&t) {
                            closure.push(t);
                        }
                    }
                }
                k += 1;
            }
            let deciding: Vec<u32> = closure
                .iter()
                .flat_map(|&ch| &table.chains[ch].rules)
                .filter(|r| matches!(r.action, Action::Verdict(_)))
                .map(|r| r.id)
                .collect();
            let decides: Vec<Option<bool>> = deciding.iter().map(|&id| reached(id)).collect();
            if decides.iter().all(|s| *s == Some(false)) {
                let mut f = Finding::new(FindingKind::ReturningChain, entering[0], entering);
                f.note = Some(if deciding.is_empty() {
                    "every packet comes back undecided: it only logs, counts or returns"
                } else {
                    "every packet comes back undecided: none of its deciding rules is reached"
                });
                f.chain = Some(name);
                warnings.push(f);
            }
        }
    }
    (findings, warnings)
}
