//! The linear engine: the specification.
//!
//! It walks the chains the way iptables does — first terminal match wins,
//! `RETURN` pops, `goto` does not push, the policy decides last, LOG and
//! counter-only rules do not stop evaluation — directly over the parsed
//! [`Ruleset`], with no preprocessing that could hide a bug. Every other
//! engine is tested against it.

use crate::field::Field;
use crate::mark_set::MarkSet;
use crate::packet::Packet;
use crate::rule::{Action, ChainId, Ruleset, SetRef, Verdict};
use crate::stateful::{Assume, Stateful};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// Answers "is the packet's key in this set?" for rules that reference sets.
pub trait SetLookup {
    /// Membership of `pkt`'s key, built as `set_ref` says, in the set.
    fn contains(&self, set_ref: &SetRef, pkt: &Packet) -> bool;
}

/// No sets: every membership test is false. For rulesets without sets.
#[derive(Copy, Clone, Debug, Default)]
pub struct NoSets;

impl SetLookup for NoSets {
    fn contains(&self, _: &SetRef, _: &Packet) -> bool {
        false
    }
}

/// The outcome of classifying one packet.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Decision {
    /// Id of the rule that decided; 0 when the chain policy did.
    pub rule_id: u32,
    /// What happens to the packet.
    pub verdict: Verdict,
    /// Ids of the non-terminal rules that matched on the way (LOG, counters,
    /// jumps, gotos, RETURNs), in evaluation order.
    pub nonterminal: Vec<u32>,
    /// What the rules that matched (`-j MARK`, `meta mark set`) did to the
    /// packet's mark, as one change; `None` when none did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mark: Option<MarkSet>,
}

impl Decision {
    /// The decision of `rule_id` (0: the policy) with `verdict`, after the
    /// non-terminal rules `nonterminal`, with no mark change.
    pub fn new(rule_id: u32, verdict: Verdict, nonterminal: Vec<u32>) -> Self {
        Decision {
            rule_id,
            verdict,
            nonterminal,
            mark: None,
        }
    }
}

/// `so_far` and then `next`, for a decision's mark.
pub(crate) fn then_mark(so_far: Option<MarkSet>, next: Option<MarkSet>) -> Option<MarkSet> {
    match (so_far, next) {
        (Some(a), Some(b)) => Some(a.then(b)),
        (a, b) => a.or(b),
    }
}

/// One rule a packet was checked against, for [`LinearEngine::trace`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceStep {
    /// The rule.
    pub rule_id: u32,
    /// The chain it is in.
    pub chain: String,
    /// Where the rule is: (index into [`Ruleset::tables`], chain index,
    /// index in the chain). Several rules share an id when one written rule
    /// lowers to several (an nft verdict map), so the id alone is not enough.
    pub at: (usize, usize, usize),
    /// How many jumps deep the walk was.
    pub depth: usize,
    /// `None` when the rule matched; otherwise the first field (in field
    /// order) whose constraint the packet fails.
    pub failed_on: Option<Field>,
    /// For a rule with a stateful condition (`limit`) whose fields matched:
    /// the condition's answer (false: the rule did not match, the walk went
    /// on). `None` when there was nothing to check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stateful: Option<bool>,
    /// For a rule that matched and sets the mark (`-j MARK`): the packet's
    /// mark after it, which the rules after it read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mark: Option<u32>,
}

/// Why evaluation could not finish.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EvalError {
    /// A jump or goto names a chain the table does not have.
    UnknownChain(String),
    /// Jumps nested deeper than [`MAX_DEPTH`] (iptables rejects loops at
    /// load time; this catches them at run time).
    TooDeep,
    /// The chain has no policy (it is not a base chain).
    NotABaseChain(String),
}

impl std::fmt::Display for EvalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EvalError::UnknownChain(c) => write!(f, "jump to unknown chain '{c}'"),
            EvalError::TooDeep => write!(f, "chain jumps nest deeper than {MAX_DEPTH}"),
            EvalError::NotABaseChain(c) => {
                write!(f, "chain '{c}' is not a base chain and has no policy")
            }
        }
    }
}

impl std::error::Error for EvalError {}

/// Deepest jump nesting evaluated.
pub const MAX_DEPTH: usize = 64;

/// The linear reference engine over one base chain of a ruleset.
///
/// ```
/// use parapet_model::*;
/// let mut m = Matches::any();
/// m.constrain(Field::DstPort, IntervalSet::point(22));
/// let rs = Ruleset {
///     tables: vec![Table {
///         name: "filter".into(),
///         family: TableFamily::Ip,
///         chains: vec![Chain {
///             name: "INPUT".into(),
///             base: Some(BaseChain { hook: Hook::Input, priority: 0, policy: Verdict::Drop, counters: Counters::default() }),
///             rules: vec![Rule::new(1, m, Action::Verdict(Verdict::Accept))],
///         }],
///     }],
///     set_refs: vec![],
///     left_to_kernel: vec![],
/// };
/// let engine = LinearEngine::new(&rs, rs.select_chain(None).unwrap()).unwrap();
/// let d = engine.classify(&Packet::v4(1, 2, 6, 1000, 22), &NoSets).unwrap();
/// assert_eq!((d.rule_id, d.verdict), (1, Verdict::Accept));
/// ```
pub struct LinearEngine<'a> {
    ruleset: &'a Ruleset,
    start: ChainId,
    policy: Verdict,
    /// Per table: chain name → chain index.
    chains_by_name: Vec<HashMap<&'a str, usize>>,
}

impl<'a> LinearEngine<'a> {
    /// Prepares evaluation of base chain `start`.
    pub fn new(ruleset: &'a Ruleset, start: ChainId) -> Result<Self, EvalError> {
        let chain = ruleset.chain(start);
        let policy = chain
            .base
            .as_ref()
            .map(|b| b.policy.clone())
            .ok_or_else(|| EvalError::NotABaseChain(chain.name.clone()))?;
        let chains_by_name = ruleset
            .tables
            .iter()
            .map(|t| {
                t.chains
                    .iter()
                    .enumerate()
                    .map(|(i, c)| (c.name.as_str(), i))
                    .collect()
            })
            .collect();
        Ok(LinearEngine {
            ruleset,
            start,
            policy,
            chains_by_name,
        })
    }

    /// Classifies one packet, assuming every stateful condition (`limit`)
    /// matches — the offline assumption; [`LinearEngine::classify_with`]
    /// checks them against state.
    pub fn classify(&self, pkt: &Packet, sets: &dyn SetLookup) -> Result<Decision, EvalError> {
        self.walk(pkt, sets, &mut Assume(true), &mut |_| {})
    }

    /// Classifies one packet, checking stateful conditions with `stateful`
    /// (which their state lives in, or an [`Assume`]d answer).
    pub fn classify_with(
        &self,
        pkt: &Packet,
        sets: &dyn SetLookup,
        stateful: &mut dyn Stateful,
    ) -> Result<Decision, EvalError> {
        self.walk(pkt, sets, stateful, &mut |_| {})
    }

    /// Classifies one packet and reports every rule it was checked against,
    /// in order: the debugger behind `parapet trace`. Uses the same walk as
    /// [`LinearEngine::classify`], so the two cannot disagree.
    /// Stateful conditions are assumed to match, as in
    /// [`LinearEngine::classify`]; [`LinearEngine::trace_with`] checks them.
    pub fn trace(
        &self,
        pkt: &Packet,
        sets: &dyn SetLookup,
    ) -> Result<(Decision, Vec<TraceStep>), EvalError> {
        self.trace_with(pkt, sets, &mut Assume(true))
    }

    /// As [`LinearEngine::trace`], checking stateful conditions with
    /// `stateful`; each step says what its condition answered.
    pub fn trace_with(
        &self,
        pkt: &Packet,
        sets: &dyn SetLookup,
        stateful: &mut dyn Stateful,
    ) -> Result<(Decision, Vec<TraceStep>), EvalError> {
        let mut steps = Vec::new();
        let d = self.walk(pkt, sets, stateful, &mut |s| steps.push(s))?;
        Ok((d, steps))
    }

    fn walk(
        &self,
        pkt: &Packet,
        sets: &dyn SetLookup,
        stateful: &mut dyn Stateful,
        observe: &mut dyn FnMut(TraceStep),
    ) -> Result<Decision, EvalError> {
        let table = &self.ruleset.tables[self.start.table];
        // Membership is looked up at most once per set reference per packet.
        let mut set_cache: Vec<Option<bool>> = vec![None; self.ruleset.set_refs.len()];
        let mut set_bit = |n: u16| {
            let slot = &mut set_cache[n as usize];
            *slot.get_or_insert_with(|| sets.contains(&self.ruleset.set_refs[n as usize], pkt))
        };
        let mut nonterminal = Vec::new();
        // The packet as the rules see it: a MARK rule changes its mark for
        // every rule after it. (Set keys never hold the mark, so the set
        // answers above, for `pkt`, stay right.)
        let mut seen = pkt.clone();
        let mut mark: Option<MarkSet> = None;
        // Return addresses: (chain index, index of the next rule).
        let mut stack: Vec<(usize, usize)> = Vec::new();
        let (mut chain, mut next) = (self.start.chain, 0usize);
        loop {
            let rules = &table.chains[chain].rules;
            let Some(rule) = rules.get(next) else {
                // Fell off the end of a chain: back to the caller, or the policy.
                match stack.pop() {
                    Some((c, n)) => {
                        (chain, next) = (c, n);
                        continue;
                    }
                    None => return Ok(self.policy_decision(nonterminal, mark)),
                }
            };
            next += 1;
            let failed = rule.matches.first_failure(&seen, &mut set_bit);
            // The stateful condition comes last, and only when the fields
            // matched: its state changes only then, as in the kernel.
            // A time window first: it keeps no state, and a closed one
            // spends no token (nor records a hit).
            let open = match (&rule.time, failed) {
                (Some(w), None) => Some(stateful.time(rule.id, w)),
                _ => None,
            };
            // Several conditions run in their written order, each only
            // once every one before it admitted the packet (`all` stops
            // at the first refusal), as the kernel runs a rule's matches.
            let admitted = match (failed, open) {
                (_, Some(false)) => Some(false),
                (None, _) => {
                    let conditions = rule.conditions();
                    if conditions.is_empty() {
                        open
                    } else {
                        Some(conditions.iter().all(|c| c.admit(stateful, rule.id, &seen)))
                    }
                }
                _ => open,
            };
            // Matches written after the stateful one run only once it
            // admitted the packet, as the kernel runs them in order.
            let failed = match (&rule.after_stateful, admitted) {
                (Some(after), a) if failed.is_none() && a != Some(false) => {
                    after.first_failure(&seen, &mut set_bit)
                }
                _ => failed,
            };
            let matched = failed.is_none() && admitted != Some(false);
            let new_mark = rule
                .set_mark
                .filter(|_| matched)
                .map(|c| c.apply(seen.mark));
            observe(TraceStep {
                rule_id: rule.id,
                chain: table.chains[chain].name.clone(),
                at: (self.start.table, chain, next - 1),
                depth: stack.len(),
                failed_on: failed,
                stateful: admitted,
                mark: new_mark,
            });
            if !matched {
                continue;
            }
            if let Some(new_mark) = new_mark {
                seen.mark = new_mark;
                mark = then_mark(mark, rule.set_mark);
            }
            match &rule.action {
                Action::Verdict(v) => {
                    return Ok(Decision {
                        rule_id: rule.id,
                        verdict: v.clone(),
                        nonterminal,
                        mark,
                    });
                }
                Action::Log(_) | Action::Count => nonterminal.push(rule.id),
                Action::Return => {
                    nonterminal.push(rule.id);
                    match stack.pop() {
                        Some((c, n)) => (chain, next) = (c, n),
                        None => return Ok(self.policy_decision(nonterminal, mark)),
                    }
                }
                Action::Jump(target) | Action::Goto(target) => {
                    nonterminal.push(rule.id);
                    let target_index = *self.chains_by_name[self.start.table]
                        .get(target.as_str())
                        .ok_or_else(|| EvalError::UnknownChain(target.clone()))?;
                    if matches!(rule.action, Action::Jump(_)) {
                        if stack.len() >= MAX_DEPTH {
                            return Err(EvalError::TooDeep);
                        }
                        stack.push((chain, next));
                    }
                    (chain, next) = (target_index, 0);
                }
            }
        }
    }

    fn policy_decision(&self, nonterminal: Vec<u32>, mark: Option<MarkSet>) -> Decision {
        Decision {
            rule_id: 0,
            verdict: self.policy.clone(),
            nonterminal,
            mark,
        }
    }
}
