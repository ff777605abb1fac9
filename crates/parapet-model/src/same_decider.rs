//! When `diff` need not search B for a piece of A: A decides the piece by
//! an entry common to both lists, and the piece, followed down each list
//! to that entry (in B: to its partner), matches no changed entry on the
//! way. Then B decides every packet of the piece by the partner of A's
//! entry, with the same verdict.
//!
//! `diff` compares only the boxes of changed entries (those outside the
//! common subsequence `C` of `common_entries.rs`), and most of a changed
//! rule's box is usually decided by earlier rules that did not change: a
//! rule moved down the list, or edited in place, keeps the packets its
//! earlier neighbours take; a rule in a chain that a RETURN at its top
//! skips for one interface (Docker's `-i docker0 -j RETURN`) leaves that
//! interface's packets to common rules after the chain. Before this, every
//! such piece was followed down B (83 % of the CPU of a `diff` of
//! fw1_10k+mixed, benchmarks.md §53) only to find the verdict A gave it.
//!
//! **Why it holds.** Number the entries of `C` 0, 1, … in list order; the
//! `m`-th of A is `a_m`, the `m`-th of B is `b_m` (equal match, verdict and
//! limit; a common RETURN pair resumes, in both lists, just before the
//! same common entry: `common_entries.rs` unmatches pairs that do not).
//! For a list position `x`, `c(x)` is the number of common entries before
//! it. Take a packet `p` of the piece, decided in A by the common entry
//! `a_k`. The condition, checked by following the piece down the changed
//! entries and the common RETURNs of each list (a *check walk*): no changed
//! entry `p` comes to before `a_k` in A, or before `b_k` in B, matches `p`.
//!
//! Claim: for every `m ≤ k`, if `p` stands in A and in B at positions
//! with `c = m`, it arrives at `a_m` and at `b_m`. Between its position and
//! `a_m` there are only changed entries, which it comes to and which do not
//! match it, and entries that change no verdict: LOG, counter and jump
//! markers, and RETURNs that skip no deciding entry and no RETURN (they
//! resume before the next such entry, so `p` still arrives at `a_m`, and
//! they skip no changed entry). The same holds in B. Then `a_m` and `b_m`
//! have one match and action: if `m < k` and they decide, they do not
//! match `p` (A decides it at `a_k`), and `p` goes on to positions with
//! `c = m + 1` in both; if they are RETURNs matching `p`, both send it to
//! positions with the same `c`, at most `k` (in A `p` still reaches `a_k`).
//! By induction from `c = 0` (both lists start there), `p` arrives at
//! `a_k` and `b_k`, which match it and decide it alike.
//!
//! The check walk is that induction on the whole piece: it jumps at a
//! common RETURN that holds the piece and gives up (the piece is then
//! searched in B as before) at a changed entry that meets it. The search
//! of A splits a piece at every RETURN it comes to, so all of a piece
//! takes one path and a common RETURN it comes to holds all of it or none
//! (the walk gives up on one that holds part of it, a guard). A piece A settled in bulk (a run of
//! one verdict, reported at its covering entry `a_k`) is decided by some
//! entry of the run up to `a_k`; when the walk to `a_k` met no changed
//! entry, that entry is common, `a_k'` with `k' ≤ k`, whose partner
//! `b_k'` comes no later than `b_k`, and the argument is the same with
//! `k'`.
//!
//! **Where B's search starts otherwise.** A piece A decides by a changed
//! entry, or by its policy, or one whose check walk in B to the partner
//! fails, is searched in B — but not always from the top. Let `m` be the
//! number of common entries before the entry where the piece entered A's
//! deciding run (its deciding entry when decided exactly; no entry of A
//! from there to the decider meets it otherwise, so whatever decides `p`
//! in A comes at or after it). If the check walks find no changed entry
//! in A before the decider and none in B before `b_(m-1)`, the induction
//! above, run for `m' < m`, brings `p` in B past `b_(m-1)` (`b_(m-1)` and
//! `a_(m-1)` do not decide it, A deciding it later) to just after it, or,
//! when the last common RETURN it took sends it further, to where that
//! RETURN resumes, with `c = m` either way. So B's search starts there.
//! Taking `m` from A's reported decider instead of the entry where its run
//! was entered is wrong for pieces settled in bulk (a common entry of the
//! run before the reported one decides them): the property tests fail on
//! it.

use crate::flatten::EntryKind;
use crate::hull_index::{hulls_meet, HullIndex, SCAN_BELOW};
use crate::reach::{Stop, Walker};
use crate::region::Cube;

/// The entries of one list a check walk looks at: the changed ones and the
/// common RETURNs, indexed by bounding box.
struct CheckWalk<'w> {
    walker: &'w Walker<'w>,
    /// List indices, ascending, and whether each is changed.
    at: Vec<(usize, bool)>,
    /// Their bounding boxes, one after the other.
    hulls: Vec<(u128, u128)>,
    index: HullIndex,
}

impl<'w> CheckWalk<'w> {
    /// `changed`, `common`: ascending list indices.
    fn new(walker: &'w Walker<'w>, changed: &[usize], common: &[usize]) -> Self {
        let is_return =
            |&i: &usize| matches!(walker.list.entries[i].kind, EntryKind::Return { .. });
        let mut at: Vec<(usize, bool)> = changed
            .iter()
            .map(|&i| (i, true))
            .chain(common.iter().filter(|i| is_return(i)).map(|&i| (i, false)))
            .collect();
        at.sort_unstable();
        let hulls: Vec<(u128, u128)> = at
            .iter()
            .flat_map(|&(i, _)| walker.hull(i).iter().copied())
            .collect();
        let index = HullIndex::new(&hulls, walker.space.dims().len());
        CheckWalk {
            walker,
            at,
            hulls,
            index,
        }
    }

    /// Where `piece` (bounding box `hull`), standing at the top of the
    /// list, stands once it has passed every entry before `to` (the resume
    /// index of the last RETURN it took, or 0), when it matches no changed
    /// entry on the way and each common RETURN it comes to holds all of it
    /// or none of it; `None` otherwise.
    fn walk_to(&self, piece: &Cube, hull: &[(u128, u128)], to: usize) -> Option<usize> {
        let n = self.at.partition_point(|&(i, _)| i < to);
        let mut position = 0;
        // One step of the walk at watched entry `k`; `None` to give up.
        let mut step = |k: usize| -> Option<()> {
            let (i, changed) = self.at[k];
            let cube = self.walker.cube(i);
            if i < position || !piece.overlaps(cube) {
                return Some(());
            }
            if changed || !piece.is_subset(cube) {
                return None;
            }
            let EntryKind::Return { resume, .. } = self.walker.list.entries[i].kind else {
                unreachable!("only RETURNs are watched among the common entries");
            };
            position = (resume as usize).max(i + 1);
            Some(())
        };
        // A short list is scanned in place, stopping at the first changed
        // entry the piece meets: the index's answer for it (a vector per
        // walk, every entry's box tested before the first step) was a
        // tenth of a `diff` of fw1_10k with mixed verdicts, three walks a
        // piece (benchmarks.md §70).
        if n < SCAN_BELOW {
            let d = hull.len();
            for k in 0..n {
                if hulls_meet(hull, &self.hulls[k * d..(k + 1) * d]) {
                    step(k)?;
                }
            }
        } else {
            for k in self.index.meeting(&self.hulls, hull, 0, n) {
                step(k)?;
            }
        }
        Some(position)
    }
}

/// What [`SameDecider::in_b`] knows of how B decides a piece.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum InB {
    /// This entry of B decides all of it.
    Decided(usize),
    /// Every packet of it comes to this entry of B undecided: a search of
    /// B can start there.
    From(usize),
}

/// Answers, for a piece of A and A's deciding stop, whether B decides the
/// piece by the partner of A's entry, or else where in B its search can
/// start (see the module documentation).
pub(crate) struct SameDecider<'w> {
    /// For each entry of A: its partner in B when it is common.
    partner: Vec<Option<usize>>,
    /// The common entries of each list, ascending (the `k`-th of A is the
    /// partner of the `k`-th of B).
    common_a: Vec<usize>,
    common_b: Vec<usize>,
    in_a: CheckWalk<'w>,
    in_b: CheckWalk<'w>,
}

impl<'w> SameDecider<'w> {
    /// `ca`, `cb`: the changed entries of each list (ascending);
    /// `partner`: for each entry of A, its common partner in B.
    pub(crate) fn new(
        wa: &'w Walker<'w>,
        wb: &'w Walker<'w>,
        ca: &[usize],
        cb: &[usize],
        partner: Vec<Option<usize>>,
    ) -> Self {
        let common_a: Vec<usize> = (0..partner.len())
            .filter(|&i| partner[i].is_some())
            .collect();
        let common_b: Vec<usize> = partner.iter().flatten().copied().collect();
        SameDecider {
            in_a: CheckWalk::new(wa, ca, &common_a),
            in_b: CheckWalk::new(wb, cb, &common_b),
            partner,
            common_a,
            common_b,
        }
    }

    /// How B decides `piece`, which A decides at `sa` (its exact entry,
    /// or the covering entry of a run of one verdict that settled it, or
    /// the policy), having entered that run (or arrived) at `entered`, no
    /// entry from `entered` on before `sa` meeting it otherwise.
    /// [`InB::Decided`] when `sa` is a common entry the piece comes to in
    /// A, and to its partner in B, matching no changed entry; else
    /// [`InB::From`] where B's search can start: past B's partners of the
    /// common entries before `entered`, when the piece gets there matching
    /// no changed entry in either list, or 0.
    pub(crate) fn in_b(&self, sa: Stop, entered: usize, piece: &Cube) -> InB {
        let i = match sa {
            Stop::Entry(i) => i,
            Stop::Policy => self.partner.len(),
        };
        let hull: Vec<(u128, u128)> = piece.hull().collect();
        // A RETURN past `i` would skip it (A's search says the piece gets
        // there; this is a guard).
        if self.in_a.walk_to(piece, &hull, i).is_none_or(|at| at > i) {
            return InB::From(0);
        }
        if let Some(j) = self.partner.get(i).copied().flatten() {
            if self.in_b.walk_to(piece, &hull, j).is_some_and(|at| at <= j) {
                return InB::Decided(j);
            }
        }
        // The common entries before where the piece entered: it passes
        // them in A, so it passes their partners in B.
        let m = self.common_a.partition_point(|&x| x < entered.min(i));
        let past = m.checked_sub(1).map_or(0, |k| self.common_b[k] + 1);
        match self.in_b.walk_to(piece, &hull, past) {
            Some(at) => InB::From(at.max(past)),
            None => InB::From(0),
        }
    }
}
