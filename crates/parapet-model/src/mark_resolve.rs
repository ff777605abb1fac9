//! Mark changes in a decision list, rewritten away for the classifiers.
//!
//! After `-j MARK` (or nft `meta mark set`) the rules that follow read the
//! new mark; a first-match classifier looks up one key and cannot change a
//! field mid-walk. So the list is rewritten: at an entry that changes the
//! mark, when some later entry reads it, the rest of the list is copied
//! right after it for the packets the entry matched — each copied entry
//! conjoined with the entry's matches and its mark constraint rewritten
//! onto the mark the packet came with ([`rewrite`]) — and closed
//! by an uncounted `Return` to the end of the list (the policy). Packets
//! the entry did not match never match a copy and go on past it with the
//! original entries. The copy of a copy composes the changes
//! ([`MarkSet::then`]), so every entry of the result reads the mark from
//! before any change: the list means what [`DecisionList`] documents, and
//! the mark changes only say what the decision does to the mark.
//!
//! Each change followed by a mark match doubles the rest of the list; the
//! number of copies is bounded ([`MAX_MARK_FORKS`]) and a list past it is
//! refused with the reason. Changes no later entry reads (fw4's mark
//! rules, a mark for routing) copy nothing.

use crate::field::Field;
use crate::flatten::{DecisionList, Entry, EntryKind, FlattenError};
use crate::linear::{then_mark, Decision};
use crate::mark_set::{MarkSet, MaskedPreimage, MAX_PREIMAGE_INTERVALS};
use crate::masked::MaskedMatch;
use crate::rule::Matches;
use std::collections::HashMap;

/// Most copies of the rest of a list the mark rewrite makes.
pub const MAX_MARK_FORKS: usize = 256;

impl DecisionList {
    /// Rewrites the entries after each mark change onto the mark the packet
    /// came with (see the module documentation). A list without a change
    /// followed by a mark match is left as it is. `max_entries` bounds the
    /// result as it bounds flattening.
    pub fn resolve_marks(&mut self, max_entries: usize) -> Result<(), FlattenError> {
        // reads_from[j]: some entry at j or after reads the mark
        let mut reads_from = vec![false; self.entries.len() + 1];
        for j in (0..self.entries.len()).rev() {
            reads_from[j] = reads_from[j + 1] || reads_mark(&self.entries[j].matches);
        }
        let forks_somewhere = self
            .entries
            .iter()
            .enumerate()
            .any(|(j, e)| fork_at(e, j).is_some_and(|c| reads_from[c]));
        if !forks_somewhere {
            return Ok(());
        }
        let mut r = Rewriter {
            src: &self.entries,
            reads_from,
            out: Vec::new(),
            to_end: Vec::new(),
            forks: 0,
            max_entries,
        };
        r.block(0, MarkSet::default(), None)?;
        let end = r.out.len() as u32;
        let mut out = r.out;
        for i in r.to_end {
            if let EntryKind::Return { resume, .. } = &mut out[i].kind {
                *resume = end;
            }
        }
        self.entries = out;
        Ok(())
    }

    /// The mark change of each rule that has one, for engines that report
    /// rule ids only (the compiled classifiers): see [`MarkTable::fill`].
    pub fn mark_table(&self) -> MarkTable {
        MarkTable(
            self.entries
                .iter()
                .filter_map(|e| e.set_mark.map(|m| (e.rule_id, m)))
                .collect(),
        )
    }
}

/// Where the scan goes on after entry `j` matched, when it changes the
/// mark and is not terminal: the next entry, or a counted `Return`'s
/// resume index. (Uncounted RETURNs, which flatten adds, change no mark.)
fn fork_at(e: &Entry, j: usize) -> Option<usize> {
    e.set_mark?;
    match e.kind {
        EntryKind::Decide(_) | EntryKind::Return { counted: false, .. } => None,
        EntryKind::Return { resume, .. } => Some(resume as usize),
        _ => Some(j + 1),
    }
}

struct Rewriter<'a> {
    src: &'a [Entry],
    reads_from: Vec<bool>,
    out: Vec<Entry>,
    /// Output entries whose `Return` goes to the end of the list.
    to_end: Vec<usize>,
    forks: usize,
    max_entries: usize,
}

impl Rewriter<'_> {
    fn push(&mut self, e: Entry) -> Result<(), FlattenError> {
        crate::flatten::push_bounded(&mut self.out, self.max_entries, e)
    }

    /// Emits entries `start..` of the source for packets that match
    /// `guard` (all of them when `None`) and whose mark has been changed
    /// by `change`.
    fn block(
        &mut self,
        start: usize,
        change: MarkSet,
        guard: Option<&Matches>,
    ) -> Result<(), FlattenError> {
        let len = self.src.len();
        // where each source index starts in the output, for RETURNs
        let mut at = vec![0u32; len + 1 - start];
        let mut returns: Vec<(usize, usize)> = Vec::new();
        for j in start..len {
            at[j - start] = self.out.len() as u32;
            let e = &self.src[j];
            let rewritten = rewrite(change, &e.matches).map_err(|_| {
                FlattenError::Mark(format!(
                    "rule {} matches the mark after a rule that changes it, and its mark match rewritten onto the mark from before would be more than {MAX_PREIMAGE_INTERVALS} intervals",
                    e.rule_id
                ))
            })?;
            let Some(m) = rewritten else { continue };
            let m = match guard {
                Some(g) => g.and(&m),
                None => m,
            };
            if m.is_unsatisfiable() {
                continue;
            }
            let fork = fork_at(e, j).filter(|&c| self.reads_from[c]);
            let mut copy = Entry {
                matches: m.clone(),
                ..e.clone()
            };
            match (&e.kind, fork) {
                // a RETURN that changes the mark goes on into its copy of
                // what follows the return, which comes next
                (EntryKind::Return { .. }, Some(_)) => copy.kind = EntryKind::Count,
                (EntryKind::Return { resume, .. }, None) => {
                    returns.push((self.out.len(), *resume as usize));
                }
                _ => {}
            }
            self.push(copy)?;
            let Some(next) = fork else { continue };
            if e.is_stateful() {
                // flatten guards such rules; a list built otherwise
                return Err(FlattenError::Mark(format!(
                    "rule {} changes the mark under a stateful condition",
                    e.rule_id
                )));
            }
            self.forks += 1;
            if self.forks > MAX_MARK_FORKS {
                return Err(FlattenError::Mark(format!(
                    "rules that change the mark (rule {} among them) are followed by rules that match it so often that the rewrite for the classifiers would copy the rest of the chain more than {MAX_MARK_FORKS} times",
                    e.rule_id
                )));
            }
            self.block(next, change.then(e.set_mark.unwrap_or_default()), Some(&m))?;
            // the marked packets end here: on to the policy
            self.to_end.push(self.out.len());
            self.push(Entry {
                rule_id: e.rule_id,
                matches: m,
                kind: EntryKind::Return {
                    resume: 0,
                    counted: false,
                },
                limit: None,
                recent: None,
                hashlimit: None,
                time: None,
                dynset: None,
                quota: None,
                statistic: None,
                set_mark: None,
            })?;
        }
        at[len - start] = self.out.len() as u32;
        for (i, target) in returns {
            if let EntryKind::Return { resume, .. } = &mut self.out[i].kind {
                *resume = at[target - start];
            }
        }
        Ok(())
    }
}

/// Rule id → its mark change: what a compiled classifier, which reports
/// the ids of the rules that matched, needs to say what its decision does
/// to the mark.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MarkTable(HashMap<u32, MarkSet>);

impl MarkTable {
    /// True when no rule changes the mark.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Sets `d.mark` from the rules `d` names: its non-terminal rules in
    /// order, then the deciding one.
    pub fn fill(&self, d: &mut Decision) {
        if self.0.is_empty() {
            return;
        }
        let mut mark = None;
        for id in d.nonterminal.iter().chain(std::iter::once(&d.rule_id)) {
            mark = then_mark(mark, self.0.get(id).copied());
        }
        d.mark = mark;
    }
}

/// `matches`, which read the mark after `change`, as matches on the mark
/// from before: `Ok(None)` when no old mark satisfies them, `Err` when a rewritten
/// mark constraint would be too many intervals.
pub fn rewrite(change: MarkSet, matches: &Matches) -> Result<Option<Matches>, MarkRewriteError> {
    if change.is_identity() || !reads_mark(matches) {
        return Ok(Some(matches.clone()));
    }
    let mut out = matches.without(Field::Mark).without_masked(Field::Mark);
    if let Some(new) = matches.get(Field::Mark) {
        match change.preimage(new) {
            Some(old) if old.is_empty() => return Ok(None),
            Some(old) => out.constrain(Field::Mark, old),
            // too many intervals: one pattern is one masked comparison
            None => match change.preimage_patterns(new).as_slice() {
                [(care, want)] => out.constrain_masked(MaskedMatch {
                    field: Field::Mark,
                    mask: *care as u128,
                    value: *want as u128,
                    negate: false,
                }),
                _ => return Err(MarkRewriteError),
            },
        }
    }
    for m in matches.masked().iter().filter(|m| m.field == Field::Mark) {
        match change.preimage_masked(m) {
            MaskedPreimage::Nothing => return Ok(None),
            MaskedPreimage::Every => {}
            MaskedPreimage::Only(old) => out.constrain_masked(old),
        }
    }
    Ok(Some(out))
}

/// A mark constraint after a mark change would be more than
/// [`MAX_PREIMAGE_INTERVALS`] intervals.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct MarkRewriteError;

/// True when `m` constrains the packet mark.
pub fn reads_mark(m: &Matches) -> bool {
    m.get(Field::Mark).is_some() || m.masked().iter().any(|x| x.field == Field::Mark)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interval::IntervalSet;

    #[test]
    fn a_preimage_of_too_many_intervals_is_one_masked_comparison_or_refused() {
        let f = MarkSet::and(0xf0f);
        let mut m = Matches::any();
        m.constrain(Field::Mark, IntervalSet::point(0x101));
        let r = rewrite(f, &m).unwrap().unwrap();
        assert_eq!(r.get(Field::Mark), None);
        let pkt_holds = |old: u32| r.masked().iter().all(|x| x.holds(old as u128));
        for old in [0x101u32, 0x1101, 0xfff1_f1f1, 0x100, 0x102] {
            assert_eq!(pkt_holds(old), f.apply(old) == 0x101, "{old:#x}");
        }
        let mut two = Matches::any();
        two.constrain(Field::Mark, IntervalSet::from_ranges([(0, 4), (9, 9)]));
        assert_eq!(rewrite(f, &two), Err(MarkRewriteError));
    }
}
