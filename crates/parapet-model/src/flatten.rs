//! Flattening: chains, jumps, gotos and RETURNs into one ordered decision
//! list per base chain.
//!
//! A jump is inlined: the target chain's rules are copied in place, each
//! conjoined with the jump rule's matches (empty conjunctions are dropped —
//! they can never match). `RETURN` cannot be a conjunction — the rules after
//! it apply only to packets it did *not* match — so it stays an entry that,
//! when it matches, resumes the scan at the end of its inlined block. A goto
//! is a jump followed by a RETURN with the same matches: when the target
//! chain ends, the rest of the calling chain is skipped. A jump or goto
//! with a stateful condition (`-m limit -j CHAIN`), and a rule with matches
//! after its stateful one (`Rule::after_stateful`), check the condition
//! once, by an uncounted RETURN before the rule's entries: admitted, it
//! resumes into them; not admitted, the next entry skips them (see
//! `emit_chain`).
//!
//! Semantics of a [`DecisionList`]: scan entries in order; at the first
//! matching `Decide`, stop; a matching `Return` moves the scan to its
//! `resume` index; every other matching entry is recorded and the scan goes
//! on; at the end the policy decides. This is exactly what
//! [`crate::LinearEngine`] computes, which the tests check.

use crate::dynset::Dynset;
use crate::hashlimit::Hashlimit;
use crate::linear::then_mark;
use crate::linear::{Decision, EvalError, SetLookup, MAX_DEPTH};
use crate::mark_set::MarkSet;
use crate::packet::Packet;
use crate::quota::Quota;
use crate::recent::Recent;
use crate::rule::{Action, ChainId, Condition, Limit, Matches, Ruleset, Verdict};
use crate::stateful::{Assume, Stateful};
use crate::statistic::Statistic;
use crate::time_window::TimeWindow;
use serde::{Deserialize, Serialize};

/// What a decision-list entry does when it matches.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EntryKind {
    /// Terminal: the packet's fate.
    Decide(Verdict),
    /// Non-terminal LOG.
    Log,
    /// Non-terminal counter-only rule.
    Count,
    /// Non-terminal marker that a jump or goto rule matched (for its counters).
    Jump,
    /// Skip to entry `resume` (the end of the enclosing inlined chain).
    /// `counted` is false for the RETURN a goto implies, which is not a rule
    /// of its own.
    Return {
        /// Index of the entry to continue from.
        resume: u32,
        /// Whether the match is reported as a non-terminal rule.
        counted: bool,
    },
}

impl EntryKind {
    /// True for entries that end the scan.
    pub fn is_terminal(&self) -> bool {
        matches!(self, EntryKind::Decide(_))
    }
}

/// One entry of a decision list.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Entry {
    /// The rule this entry came from (several entries may share one when a
    /// chain is jumped to from several places).
    pub rule_id: u32,
    /// The conjunction of the rule's matches and of every jump leading to it.
    pub matches: Matches,
    /// What it does.
    pub kind: EntryKind,
    /// The rule's stateful condition, checked (with rule `rule_id`'s
    /// state) once `matches` hold; when it fails the entry does not match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<Limit>,
    /// The rule's `-m recent` condition, checked as `limit` is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recent: Option<Recent>,
    /// The rule's `-m hashlimit` condition, checked as `limit` is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hashlimit: Option<Hashlimit>,
    /// The rule's time window, checked before the stateful condition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<TimeWindow>,
    /// The rule's nft dynamic-set condition, checked as `limit` is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dynset: Option<Dynset>,
    /// The rule's nft `quota`, checked as `limit` is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota: Option<Quota>,
    /// The rule's `-m statistic`, checked as `limit` is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub statistic: Option<Statistic>,
    /// The rule's mark change (`-j MARK`), made when the entry matches. In
    /// a flattened list the entries after it already read the mark from
    /// before every change ([`DecisionList::resolve_marks`]): this only
    /// says what the decision does to the mark.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set_mark: Option<MarkSet>,
}

impl Entry {
    /// True when the entry has a stateful condition (it decides only some
    /// of the packets its matches hold for).
    pub fn is_stateful(&self) -> bool {
        self.limit.is_some()
            || self.recent.is_some()
            || self.hashlimit.is_some()
            || self.time.is_some()
            || self.dynset.is_some()
            || self.quota.is_some()
            || self.statistic.is_some()
    }

    /// True when the entry matches only part of its box: a stateful
    /// condition, or a masked comparison ([`Matches::has_masked`]). Such an
    /// entry never decides a whole region.
    pub fn is_conditional(&self) -> bool {
        self.is_stateful() || self.matches.has_masked() || self.matches.has_payload()
    }
}

/// A base chain flattened into a first-match list.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DecisionList {
    /// Entries in evaluation order.
    pub entries: Vec<Entry>,
    /// The chain policy.
    pub policy: Verdict,
    /// Number of set references the entries may use (`Field::Set(n)`, n < this).
    pub set_ref_count: usize,
}

/// Why a chain could not be flattened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FlattenError {
    /// As for the linear engine.
    Eval(EvalError),
    /// The chains call each other in a loop.
    Loop(Vec<String>),
    /// Inlining would produce more than the allowed number of entries
    /// (chains jumped to from many places, nested).
    TooLarge {
        /// The configured bound.
        limit: usize,
    },
    /// Rules read the mark after a rule that changes it, in a way the
    /// rewrite for the classifiers does not take (`mark_resolve.rs`).
    Mark(String),
}

impl std::fmt::Display for FlattenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FlattenError::Eval(e) => e.fmt(f),
            FlattenError::Loop(path) => write!(f, "chains jump in a loop: {}", path.join(" -> ")),
            FlattenError::TooLarge { limit } => write!(
                f,
                "inlining the chains' jumps gives more than {limit} entries"
            ),
            FlattenError::Mark(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for FlattenError {}

/// Default bound on the entries a flattened chain may have.
pub const DEFAULT_MAX_ENTRIES: usize = 4_000_000;

/// Flattens base chain `start` of `ruleset`.
pub fn flatten(ruleset: &Ruleset, start: ChainId) -> Result<DecisionList, FlattenError> {
    flatten_with_limit(ruleset, start, DEFAULT_MAX_ENTRIES)
}

/// As [`flatten`], with an explicit bound on the number of entries.
pub fn flatten_with_limit(
    ruleset: &Ruleset,
    start: ChainId,
    max_entries: usize,
) -> Result<DecisionList, FlattenError> {
    let mut list = flatten_unpruned(ruleset, start, max_entries)?;
    list.prune_shadowed();
    Ok(list)
}

/// As [`flatten_with_limit`], keeping entries that repeat an earlier
/// terminal entry: analysis (`parapet lint`) must see every rule to say
/// which earlier rule shadows it.
pub fn flatten_unpruned(
    ruleset: &Ruleset,
    start: ChainId,
    max_entries: usize,
) -> Result<DecisionList, FlattenError> {
    let mut list = flatten_marks_unresolved(ruleset, start, max_entries)?;
    list.resolve_marks(max_entries)?;
    Ok(list)
}

/// As [`flatten_unpruned`], leaving the entries after a mark change
/// reading the changed mark: for joining several base chains at one hook
/// (`hook_join.rs`), whose result is then resolved once
/// ([`DecisionList::resolve_marks`]) — a mark one chain sets is the mark
/// the next one reads.
pub fn flatten_marks_unresolved(
    ruleset: &Ruleset,
    start: ChainId,
    max_entries: usize,
) -> Result<DecisionList, FlattenError> {
    let chain = ruleset.chain(start);
    let policy = chain
        .base
        .as_ref()
        .map(|b| b.policy.clone())
        .ok_or_else(|| FlattenError::Eval(EvalError::NotABaseChain(chain.name.clone())))?;
    let mut f = Flattener {
        ruleset,
        table: start.table,
        entries: Vec::new(),
        path: Vec::new(),
        max_entries,
    };
    f.emit_chain(start.chain, &Matches::any())?;
    Ok(DecisionList {
        entries: f.entries,
        policy,
        set_ref_count: ruleset.set_refs.len(),
    })
}

struct Flattener<'a> {
    ruleset: &'a Ruleset,
    table: usize,
    entries: Vec<Entry>,
    /// Chains being inlined, outermost first, to detect loops.
    path: Vec<usize>,
    max_entries: usize,
}

/// Appends `entry` to a list that may hold at most `max` entries: a list
/// past its bound is refused, never cut short.
pub(crate) fn push_bounded(
    entries: &mut Vec<Entry>,
    max: usize,
    entry: Entry,
) -> Result<(), FlattenError> {
    if entries.len() >= max {
        return Err(FlattenError::TooLarge { limit: max });
    }
    entries.push(entry);
    Ok(())
}

impl Flattener<'_> {
    fn push(&mut self, entry: Entry) -> Result<(), FlattenError> {
        push_bounded(&mut self.entries, self.max_entries, entry)
    }

    fn emit_chain(&mut self, chain_index: usize, context: &Matches) -> Result<(), FlattenError> {
        let table = &self.ruleset.tables[self.table];
        if self.path.contains(&chain_index) {
            let mut names: Vec<String> = self
                .path
                .iter()
                .map(|&c| table.chains[c].name.clone())
                .collect();
            names.push(table.chains[chain_index].name.clone());
            return Err(FlattenError::Loop(names));
        }
        if self.path.len() >= MAX_DEPTH {
            return Err(FlattenError::Eval(EvalError::TooDeep));
        }
        self.path.push(chain_index);
        // RETURNs of this block, patched to the block's end once known.
        let mut returns = Vec::new();
        for rule in &table.chains[chain_index].rules {
            let matches = context.and(&rule.matches);
            if matches.is_unsatisfiable() {
                continue;
            }
            let jumps = matches!(rule.action, Action::Jump(_) | Action::Goto(_));
            // A stateful jump (`-m limit -j CHAIN`), or a rule with matches
            // after its stateful one, checks the condition once, before
            // the rest: when it admits the packet, an uncounted RETURN hops
            // over the next entry; when it does not, that next entry (the
            // rule's first matches alone) skips the rule's entries, as the
            // kernel goes on with the next rule. The entries between carry
            // no condition.
            // Several conditions (`-m recent … -m limit …`) are guards in
            // a row, one condition each, in the rule's order: the second
            // pair is reached only when the first admitted the packet.
            // A mark change with a stateful condition is guarded too, so
            // the entry that changes the mark is unconditional: the rules
            // after it are rewritten for the packets it matched
            // (`mark_resolve.rs`), which must be all of its box.
            let conditions = rule.conditions();
            let guarded = rule.is_stateful()
                && (jumps
                    || rule.after_stateful.is_some()
                    || rule.set_mark.is_some()
                    || conditions.len() > 1);
            let checked = match &rule.after_stateful {
                Some(after) if guarded => context.and(after),
                _ => matches.clone(),
            };
            let guard = |kind| Entry {
                rule_id: rule.id,
                matches: matches.clone(),
                kind,
                limit: rule.limit.clone(),
                recent: rule.recent.clone(),
                hashlimit: rule.hashlimit.clone(),
                time: rule.time.clone(),
                dynset: rule.dynset.clone(),
                quota: rule.quota.clone(),
                statistic: rule.statistic.clone(),
                set_mark: rule.set_mark,
            };
            let entry = |kind| {
                if guarded {
                    Entry {
                        matches: checked.clone(),
                        limit: None,
                        recent: None,
                        hashlimit: None,
                        time: None,
                        dynset: None,
                        quota: None,
                        statistic: None,
                        ..guard(kind)
                    }
                } else {
                    guard(kind)
                }
            };
            let mut skips = Vec::new();
            if guarded {
                let bare = |kind| Entry {
                    limit: None,
                    recent: None,
                    hashlimit: None,
                    time: None,
                    dynset: None,
                    quota: None,
                    statistic: None,
                    set_mark: None,
                    ..guard(kind)
                };
                // One guard per condition (the time window with the
                // first); with one condition, the rule's own.
                let guards: Vec<Entry> = if conditions.len() > 1 {
                    conditions
                        .iter()
                        .enumerate()
                        .map(|(k, c)| {
                            let mut g = with_condition(bare(EntryKind::Count), c);
                            if k == 0 {
                                g.time = rule.time.clone();
                            }
                            g
                        })
                        .collect()
                } else {
                    vec![guard(EntryKind::Count)]
                };
                for g in guards {
                    let admitted = self.entries.len() as u32 + 2;
                    self.push(Entry {
                        kind: EntryKind::Return {
                            resume: admitted,
                            counted: false,
                        },
                        set_mark: None,
                        ..g
                    })?;
                    self.push(bare(EntryKind::Return {
                        resume: 0,
                        counted: false,
                    }))?;
                    skips.push(self.entries.len() - 1);
                }
            }
            match &rule.action {
                _ if checked.is_unsatisfiable() => {}
                Action::Verdict(v) => self.push(entry(EntryKind::Decide(v.clone())))?,
                Action::Log(_) => self.push(entry(EntryKind::Log))?,
                Action::Count => self.push(entry(EntryKind::Count))?,
                Action::Return => {
                    returns.push(self.entries.len());
                    self.push(entry(EntryKind::Return {
                        resume: 0,
                        counted: true,
                    }))?;
                }
                Action::Jump(target) | Action::Goto(target) => {
                    let target_index = table
                        .chains
                        .iter()
                        .position(|c| &c.name == target)
                        .ok_or_else(|| {
                            FlattenError::Eval(EvalError::UnknownChain(target.clone()))
                        })?;
                    let marker = Entry {
                        limit: None,
                        recent: None,
                        hashlimit: None,
                        time: None,
                        dynset: None,
                        quota: None,
                        statistic: None,
                        ..entry(EntryKind::Jump)
                    };
                    self.push(marker.clone())?;
                    self.emit_chain(target_index, &checked)?;
                    if matches!(rule.action, Action::Goto(_)) {
                        returns.push(self.entries.len());
                        self.push(Entry {
                            kind: EntryKind::Return {
                                resume: 0,
                                counted: false,
                            },
                            set_mark: None,
                            ..marker
                        })?;
                    }
                }
            }
            let past = self.entries.len() as u32;
            for skip in skips {
                if let EntryKind::Return { resume, .. } = &mut self.entries[skip].kind {
                    *resume = past;
                }
            }
        }
        let end = self.entries.len() as u32;
        for i in returns {
            if let EntryKind::Return { resume, .. } = &mut self.entries[i].kind {
                *resume = end;
            }
        }
        self.path.pop();
        Ok(())
    }
}

/// `e` with one stateful condition (a guard of a rule with several).
fn with_condition(e: Entry, c: &Condition) -> Entry {
    match c {
        Condition::Limit(l) => Entry {
            limit: Some((*l).clone()),
            ..e
        },
        Condition::Recent(r) => Entry {
            recent: Some((*r).clone()),
            ..e
        },
        Condition::Hashlimit(h) => Entry {
            hashlimit: Some((*h).clone()),
            ..e
        },
        Condition::Dynset(d) => Entry {
            dynset: Some((*d).clone()),
            ..e
        },
        Condition::Quota(q) => Entry {
            quota: Some((*q).clone()),
            ..e
        },
        Condition::Statistic(st) => Entry {
            statistic: Some((*st).clone()),
            ..e
        },
    }
}

impl DecisionList {
    /// Removes entries no packet can reach: those whose matches equal an
    /// earlier terminal entry's (every packet they match was decided
    /// there). Returns how many were removed. Decisions, including the
    /// non-terminal rules reported, are unchanged.
    ///
    /// Why: rulesets repeat rules (ipfw's classic "fail early" test is 1,000
    /// copies of one rule); a decision tree cannot separate identical boxes,
    /// so copies would all land in one leaf and be scanned. Only lists
    /// without RETURN entries are pruned, because a RETURN can skip the
    /// earlier copy and land before the later one.
    pub fn prune_shadowed(&mut self) -> usize {
        if self
            .entries
            .iter()
            .any(|e| matches!(e.kind, EntryKind::Return { .. }))
        {
            return 0;
        }
        let mut decided: std::collections::HashSet<&Matches> = std::collections::HashSet::new();
        let keep: Vec<bool> = self
            .entries
            .iter()
            .map(|e| {
                if decided.contains(&e.matches) {
                    return false;
                }
                // A conditional entry decides only some of its packets.
                // (Equal matches include equal masked comparisons.)
                if e.kind.is_terminal() && !e.is_stateful() {
                    decided.insert(&e.matches);
                }
                true
            })
            .collect();
        let before = self.entries.len();
        let mut i = 0;
        self.entries.retain(|_| {
            i += 1;
            keep[i - 1]
        });
        before - self.entries.len()
    }

    /// Classifies by scanning every entry: the flat linear engine. Correct
    /// by construction, O(entries) per packet; the baseline the compiled
    /// engines are measured against.
    ///
    /// Stateful conditions are assumed to match (the offline assumption);
    /// [`DecisionList::classify_stateful`] checks them.
    pub fn classify(&self, pkt: &Packet, set_bits: &[bool]) -> Decision {
        self.classify_from(0, pkt, set_bits, &mut Assume(true))
    }

    /// As [`DecisionList::classify`], checking stateful conditions with
    /// `stateful`.
    pub fn classify_stateful(
        &self,
        pkt: &Packet,
        set_bits: &[bool],
        stateful: &mut dyn Stateful,
    ) -> Decision {
        self.classify_from(0, pkt, set_bits, stateful)
    }

    /// As [`DecisionList::classify`], with membership answered by `sets`.
    pub fn classify_with_sets(
        &self,
        ruleset: &Ruleset,
        pkt: &Packet,
        sets: &dyn SetLookup,
    ) -> Decision {
        let bits: Vec<bool> = ruleset
            .set_refs
            .iter()
            .map(|r| sets.contains(r, pkt))
            .collect();
        self.classify(pkt, &bits)
    }

    fn classify_from(
        &self,
        start: usize,
        pkt: &Packet,
        set_bits: &[bool],
        stateful: &mut dyn Stateful,
    ) -> Decision {
        let mut nonterminal = Vec::new();
        let mut mark = None;
        let mut i = start;
        let mut set_bit = |n: u16| set_bits[n as usize];
        while let Some(e) = self.entries.get(i) {
            i += 1;
            if !e.matches.matches(pkt, &mut set_bit) {
                continue;
            }
            if let Some(w) = &e.time {
                if !stateful.time(e.rule_id, w) {
                    continue;
                }
            }
            if let Some(l) = &e.limit {
                if !stateful.check(e.rule_id, l) {
                    continue;
                }
            }
            if let Some(r) = &e.recent {
                if !stateful.recent(e.rule_id, r, pkt) {
                    continue;
                }
            }
            if let Some(h) = &e.hashlimit {
                if !stateful.hashlimit(e.rule_id, h, pkt) {
                    continue;
                }
            }
            if let Some(d) = &e.dynset {
                if !stateful.dynset(e.rule_id, d, pkt) {
                    continue;
                }
            }
            if let Some(q) = &e.quota {
                if !stateful.quota(e.rule_id, q, pkt) {
                    continue;
                }
            }
            if let Some(s) = &e.statistic {
                if !stateful.statistic(e.rule_id, s) {
                    continue;
                }
            }
            mark = then_mark(mark, e.set_mark);
            match &e.kind {
                EntryKind::Decide(v) => {
                    return Decision {
                        rule_id: e.rule_id,
                        verdict: v.clone(),
                        nonterminal,
                        mark,
                    }
                }
                EntryKind::Log | EntryKind::Count | EntryKind::Jump => nonterminal.push(e.rule_id),
                EntryKind::Return { resume, counted } => {
                    if *counted {
                        nonterminal.push(e.rule_id);
                    }
                    i = *resume as usize;
                }
            }
        }
        Decision {
            rule_id: 0,
            verdict: self.policy.clone(),
            nonterminal,
            mark,
        }
    }

    /// True when every entry is a terminal decision: no LOG, counter-only
    /// rule, jump or RETURN. Engines that find only the first match are
    /// exact on such lists.
    ///
    /// An entry with a stateful condition is not: when the condition fails
    /// the scan goes on past a matching entry. (A masked comparison is: it
    /// is part of the entry's record, checked with its other constraints.)
    pub fn is_pure_first_match(&self) -> bool {
        self.entries
            .iter()
            .all(|e| e.kind.is_terminal() && !e.is_stateful())
    }

    /// True when some entry has a stateful condition.
    pub fn has_stateful(&self) -> bool {
        self.entries.iter().any(|e| e.is_stateful())
    }
}
