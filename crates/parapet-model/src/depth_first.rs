//! Depth-first region walks: the pieces [`Walker::walk`] would produce,
//! one at a time, with the option to stop at the first one that answers
//! the question.
//!
//! A breadth-first walk holds the whole working region: every entry it
//! meets is tested against every cube of it, and a wide rule (the
//! `0.0.0.0/0` lines at the end of a ClassBench list) fragments into
//! thousands of cubes that each later entry scans — quadratic, and the
//! reason `lint` and `diff` took tens of seconds on 10,000 rules. Most
//! questions are existential ("does any packet reach rule i?", "does any
//! packet the rule decides get another verdict without it?"), so a search
//! that follows one piece down the list at a time and stops at the first
//! witness does the work of one path instead of the whole tree; when the
//! answer is "no", it visits the same pieces as the walk, but never holds
//! more than one root-to-leaf path of them.
//!
//! Piece order: a piece's sub-pieces are visited in the order
//! [`Cube::subtract_into`] makes them, before the next piece — the order
//! of the walk's region (its `split` keeps that order) — except inside a
//! run of one verdict that the caller lets settle in bulk (see
//! [`Settle`]). There which entry of the run decides a packet does not
//! matter, only whether one does, so the run is taken as a union: a piece
//! is settled when one entry of the run holds it, and otherwise split by
//! the entry of the run that overlaps the largest part of it (by bounding
//! boxes), not by the first one in list order. Subtracting in list order
//! fragments a piece on every small rule it meets before the wide one
//! that would have swallowed it whole; largest first is what turned
//! `lint` on ClassBench fw1 and ipc1 (all ACCEPT: one run of 10,000
//! rules) from not finishing in a minute into seconds.

use crate::flatten::EntryKind;
use crate::hull_index::hulls_meet;
use crate::reach::{Settle, Stop, Walker};
use crate::region::{Budget, Cube, OverBudget, Region};
use std::rc::Rc;

/// Where a searched piece went.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// An entry decided it (for a bulk-settled piece: the covering entry).
    Decided(Stop),
    /// It arrived at the end of the searched range.
    Arrived,
}

/// A piece's bounding box, inline for up to 8 fields (a heap block per
/// piece was one of the allocations that took a quarter of `diff`'s CPU,
/// benchmarks.md §66).
type Hull = smallvec::SmallVec<[(u128, u128); 8]>;

/// One piece waiting to be followed.
struct Piece {
    cube: Cube,
    hull: Hull,
    /// The entries that may meet it (ascending); it looks at those from
    /// `at` on.
    candidates: Rc<Vec<usize>>,
    /// The next entry it stands at.
    at: usize,
    /// Inside a run settled in bulk: the run's entries that may still meet
    /// it, and the index one past the run, where it goes on when none does.
    run: Option<(Rc<Vec<usize>>, usize)>,
}

/// About log2 of the volume two boxes share (bit lengths of the common
/// sides' widths), from their bounding boxes: the measure by which a run's
/// entry is picked to split a piece.
fn shared_bits(a: &[(u128, u128)], b: &[(u128, u128)]) -> u32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| 128 - (x.1.min(y.1) - x.0.max(y.0)).leading_zeros())
        .sum()
}

/// True when box `outer` holds box `inner`.
fn holds(outer: &[(u128, u128)], inner: &[(u128, u128)]) -> bool {
    outer
        .iter()
        .zip(inner)
        .all(|(o, i)| o.0 <= i.0 && i.1 <= o.1)
}

impl Walker<'_> {
    /// Follows the packets of `start`, all standing at entry `from`, down
    /// to entry `to` (exclusive) piece by piece, depth first. Every piece
    /// an entry decides, and every piece arriving at `to`, is passed to
    /// `visit`; the search stops as soon as `visit` returns true (and then
    /// returns true). Every entry that took a non-empty part is passed to
    /// `touched` (in no particular order).
    ///
    /// Bounded like a walk: at most `budget.max_cubes` pieces wait at once,
    /// and nothing runs past the deadline.
    #[allow(clippy::too_many_arguments)]
    pub fn search(
        &self,
        start: &Region,
        from: usize,
        to: usize,
        budget: Budget,
        settle: Settle,
        visit: &mut dyn FnMut(Outcome, &Cube) -> bool,
        touched: &mut dyn FnMut(usize),
    ) -> Result<bool, OverBudget> {
        self.search_settling(
            start,
            from,
            to,
            budget,
            settle,
            &mut |o, _, c| visit(o, c),
            touched,
        )
    }

    /// [`Walker::search`], passing `visit` with every decided piece the
    /// first entry its exact deciding entry can be: the deciding entry
    /// itself when the piece was decided exactly, the entry where it
    /// entered the run (or the start) when a run settled it in bulk. No
    /// entry before that one meets the piece, so the exact deciding entry
    /// of a bulk-settled piece is found by a search of that stretch only
    /// (`diff` does, for the pieces whose verdicts differ).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn search_settling(
        &self,
        start: &Region,
        from: usize,
        to: usize,
        budget: Budget,
        settle: Settle,
        visit: &mut dyn FnMut(Outcome, usize, &Cube) -> bool,
        touched: &mut dyn FnMut(usize),
    ) -> Result<bool, OverBudget> {
        // A run with a catch-all settles every piece at once: no
        // candidates are needed (see `Walker::settled_in_bulk`).
        let bulk: Option<Vec<usize>> = start
            .cubes()
            .iter()
            .map(|c| self.settled_in_bulk(c, from, to, settle))
            .collect();
        if let Some(stops) = bulk.filter(|s| !s.is_empty()) {
            if budget
                .deadline
                .is_some_and(|t| std::time::Instant::now() > t)
            {
                return Err(OverBudget);
            }
            for (c, k) in start.cubes().iter().zip(stops) {
                touched(k);
                if visit(Outcome::Decided(Stop::Entry(k)), from, c) {
                    return Ok(true);
                }
            }
            return Ok(false);
        }
        let d = self.space.dims().len();
        let hull_of = |c: &Cube| -> Hull { c.hull().collect() };
        // Every piece lies in the start's box: only entries meeting it can
        // take anything.
        let mut whole = vec![(u128::MAX, 0u128); d];
        for c in start.cubes() {
            for (slot, (lo, hi)) in whole.iter_mut().zip(c.hull()) {
                slot.0 = slot.0.min(lo);
                slot.1 = slot.1.max(hi);
            }
        }
        let candidates = Rc::new(self.meeting(&whole, from, to));
        let mut stack: Vec<Piece> = start
            .cubes()
            .iter()
            .rev()
            .map(|c| Piece {
                hull: hull_of(c),
                cube: c.clone(),
                candidates: candidates.clone(),
                at: from,
                run: None,
            })
            .collect();
        let mut steps = 0u32;
        // The pieces of one split outside the entry, before they go on the
        // stack (one vector for the whole search).
        let mut outside: Vec<Cube> = Vec::new();
        'pieces: while let Some(mut piece) = stack.pop() {
            // The first piece of every search looks at the clock: `diff`
            // and `lint` run many short searches.
            steps = steps.wrapping_add(1);
            if steps % 256 == 1
                && budget
                    .deadline
                    .is_some_and(|t| std::time::Instant::now() > t)
            {
                return Err(OverBudget);
            }
            // A RETURN past `to` skips it: those packets never arrive.
            if piece.at > to {
                continue;
            }
            if let Some((run, end)) = piece.run.take() {
                let meet: Vec<usize> = run
                    .iter()
                    .copied()
                    .filter(|&k| {
                        hulls_meet(&piece.hull, self.hull(k)) && piece.cube.overlaps(self.cube(k))
                    })
                    .collect();
                if let Some(&k) = meet.iter().find(|&&k| {
                    holds(self.hull(k), &piece.hull) && piece.cube.is_subset(self.cube(k))
                }) {
                    touched(k);
                    if visit(Outcome::Decided(Stop::Entry(k)), piece.at, &piece.cube) {
                        return Ok(true);
                    }
                    continue 'pieces;
                }
                let widest = meet
                    .iter()
                    .copied()
                    .max_by_key(|&x| shared_bits(&piece.hull, self.hull(x)));
                let Some(k) = widest else {
                    // No entry of the run takes any of it: on past the run.
                    piece.at = end;
                    stack.push(piece);
                    continue 'pieces;
                };
                touched(k);
                let hit = piece.cube.split_into(self.cube(k), &mut outside);
                if visit(Outcome::Decided(Stop::Entry(k)), piece.at, &hit) {
                    return Ok(true);
                }
                let rest = Rc::new(meet.into_iter().filter(|&x| x != k).collect::<Vec<_>>());
                for c in outside.drain(..).rev() {
                    stack.push(Piece {
                        hull: hull_of(&c),
                        cube: c,
                        candidates: piece.candidates.clone(),
                        at: piece.at,
                        run: Some((rest.clone(), end)),
                    });
                }
                if stack.len() > budget.max_cubes {
                    return Err(OverBudget);
                }
                continue 'pieces;
            }
            let candidates = piece.candidates.clone();
            let mut p = candidates.partition_point(|&k| k < piece.at);
            while p < candidates.len() {
                let j = candidates[p];
                p += 1;
                if self.is_removed(j) || !hulls_meet(&piece.hull, self.hull(j)) {
                    continue;
                }
                let cube_j = self.cube(j);
                if !piece.cube.overlaps(cube_j) {
                    continue;
                }
                let resume = match &self.list.entries[j].kind {
                    EntryKind::Decide(v) => {
                        if settle.allows(v) {
                            let end = self.run_end(j, settle).min(to);
                            let k = self.next_catch_all(&piece.cube, j);
                            if k < end && !self.is_removed(k) {
                                touched(k);
                                if visit(Outcome::Decided(Stop::Entry(k)), j, &piece.cube) {
                                    return Ok(true);
                                }
                                continue 'pieces;
                            }
                            let run: Vec<usize> = candidates[p - 1..]
                                .iter()
                                .copied()
                                .take_while(|&k| k < end)
                                .filter(|&k| {
                                    !self.is_removed(k) && self.list.entries[k].kind.is_terminal()
                                })
                                .collect();
                            piece.run = Some((Rc::new(run), end));
                            // No entry before `j` meets the piece: the run
                            // is entered here.
                            piece.at = j;
                            stack.push(piece);
                            continue 'pieces;
                        }
                        None
                    }
                    EntryKind::Return { resume, .. } => Some(*resume as usize),
                    _ => continue,
                };
                touched(j);
                let hit = piece.cube.split_into(cube_j, &mut outside);
                // The outside pieces go on from the next entry, in order;
                // the part a RETURN took resumes after them.
                if let Some(r) = resume {
                    stack.push(Piece {
                        hull: hull_of(&hit),
                        cube: hit,
                        candidates: candidates.clone(),
                        at: r,
                        run: None,
                    });
                } else if visit(Outcome::Decided(Stop::Entry(j)), j, &hit) {
                    return Ok(true);
                }
                for c in outside.drain(..).rev() {
                    stack.push(Piece {
                        hull: hull_of(&c),
                        cube: c,
                        candidates: candidates.clone(),
                        at: j + 1,
                        run: None,
                    });
                }
                if stack.len() > budget.max_cubes {
                    return Err(OverBudget);
                }
                continue 'pieces;
            }
            if visit(Outcome::Arrived, piece.at, &piece.cube) {
                return Ok(true);
            }
        }
        Ok(false)
    }
}
