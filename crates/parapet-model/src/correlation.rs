//! Correlation warnings (`parapet lint`): a later deciding rule that shares
//! packets with an earlier one of another verdict, where neither holds the
//! other (Al-Shaer and Hamed's "correlated" rules). Such a pair is often a
//! mistake: the author of the later rule meant it for packets the earlier
//! one already takes. When the later rule lies inside the earlier one it is
//! shadowed (an `unreachable` finding); when the earlier lies inside the
//! later one it is the usual exception before a general rule — neither is
//! a correlation.
//!
//! Cost: candidate pairs come from the walker's hull index (only earlier
//! entries whose bounding box meets the rule's), the overlap is one box
//! intersection, and only the largest `max` overlaps are searched for a
//! packet that really reaches the earlier rule (an earlier RETURN or rule
//! may take the shared packets first: then there is nothing to warn of).
//! Candidates are kept in a bounded heap, so memory does not grow with the
//! number of pairs; once it is full, rules and pairs whose packets (or
//! bounding boxes' shared packets) could not enter it are passed over
//! before any box arithmetic (on a mixed-verdict list most of them); at most [`MAX_PAIRS`] pairs are looked at (on a list
//! where every rule meets every other, that is the first few thousand
//! rules), and the search stops at the budget's deadline. Correlations are
//! warnings, ranked; when a bound cut the search short, the report says
//! so (`LintReport::correlations_complete`).

use crate::depth_first::Outcome;
use crate::finding::{fixed_memberships, Explain, Finding, FindingKind};
use crate::flatten::EntryKind;
use crate::reach::{Settle, Walker};
use crate::region::{Budget, Cube, Space};
use std::cmp::Ordering;
use std::collections::{BTreeSet, BinaryHeap, HashSet};

/// A candidate pair, ordered so that a max-heap pops the smallest overlap
/// first (the heap keeps the largest).
struct Candidate {
    points_log2: f64,
    list: usize,
    earlier: usize,
    later: usize,
    shared: Cube,
}

impl PartialEq for Candidate {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Candidate {}
impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Candidate {
    fn cmp(&self, other: &Self) -> Ordering {
        // Reversed on points (a min-heap on them), then by position, so
        // that ties keep the earliest pairs.
        other.points_log2.total_cmp(&self.points_log2).then(
            (self.list, self.later, self.earlier).cmp(&(other.list, other.later, other.earlier)),
        )
    }
}

/// The most rule pairs one lint looks at for correlations.
pub const MAX_PAIRS: usize = 4_000_000;

/// How far the bounding boxes' shared points (log2) may fall below the
/// exact figure through rounding: a pair is skipped on its bound only when
/// the bound is below the smallest kept overlap by more than this.
const SLACK: f64 = 1e-6;

/// log2 of the points two bounding boxes share (each side an inclusive
/// `(lo, hi)`; they meet): never less than the points the boxes' cubes
/// share, as each side of a cube lies within its hull's, counted as
/// `IntervalSet::cardinality` counts (saturating at 2^128).
fn hull_overlap_log2(a: &[(u128, u128)], b: &[(u128, u128)]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| {
            let (lo, hi) = (x.0.max(y.0), x.1.min(y.1));
            (hi.saturating_sub(lo).saturating_add(1) as f64).log2()
        })
        .sum()
}

/// Up to `max` correlation warnings over `walkers`' lists, largest shared
/// region first; rules in `skip` (unreachable ones) take no part. The bool
/// is true when every pair was looked at.
pub(crate) fn correlations(
    walkers: &[Walker],
    space: &Space,
    skip: &BTreeSet<u32>,
    max: usize,
    budget: Budget,
) -> (Vec<Finding>, bool) {
    // Several candidates may turn out to reach nothing: keep a few more.
    let keep = max.saturating_mul(4).max(16);
    let mut heap: BinaryHeap<Candidate> = BinaryHeap::new();
    let late = || {
        budget
            .deadline
            .is_some_and(|t| std::time::Instant::now() > t)
    };
    let (mut pairs, mut complete) = (0usize, true);
    'lists: for (l, w) in walkers.iter().enumerate() {
        let entries = &w.list.entries;
        for (j, ej) in entries.iter().enumerate() {
            let EntryKind::Decide(vj) = &ej.kind else {
                continue;
            };
            if skip.contains(&ej.rule_id) {
                continue;
            }
            if pairs >= MAX_PAIRS || (j % 64 == 0 && late()) {
                complete = false;
                break 'lists;
            }
            let cj = w.cube(j);
            // Once the heap is full, a rule with no more points than the
            // smallest kept overlap shares no more with any earlier rule:
            // skip it before asking the index (most rules of a large list
            // are narrow).
            if heap.len() >= keep
                && heap
                    .peek()
                    .is_some_and(|m| space.points_log2(cj) + SLACK <= m.points_log2)
            {
                continue;
            }
            let hj = w.hull(j);
            let meeting = w.meeting(hj, 0, j);
            pairs += meeting.len();
            for i in meeting {
                let ei = &entries[i];
                let EntryKind::Decide(vi) = &ei.kind else {
                    continue;
                };
                if vi == vj || ei.rule_id == ej.rule_id || skip.contains(&ei.rule_id) {
                    continue;
                }
                // Once the heap is full, a pair whose bounding boxes share
                // no more points than the smallest kept overlap cannot
                // enter it: skip the exact box arithmetic (most pairs).
                if heap.len() >= keep
                    && heap
                        .peek()
                        .is_some_and(|m| hull_overlap_log2(w.hull(i), hj) + SLACK <= m.points_log2)
                {
                    continue;
                }
                let ci = w.cube(i);
                if !ci.overlaps(cj) || cj.is_subset(ci) || ci.is_subset(cj) {
                    continue;
                }
                let shared = ci.intersect(cj);
                let points_log2 = space.points_log2(&shared);
                if heap.len() >= keep && heap.peek().is_some_and(|m| points_log2 <= m.points_log2) {
                    continue;
                }
                heap.push(Candidate {
                    points_log2,
                    list: l,
                    earlier: i,
                    later: j,
                    shared,
                });
                if heap.len() > keep {
                    heap.pop();
                }
            }
        }
    }
    // Largest first (into_sorted_vec is ascending in the reversed order).
    let candidates = heap.into_sorted_vec();
    let mut out = Vec::new();
    let mut seen: HashSet<(u32, u32)> = HashSet::new();
    for c in candidates {
        if out.len() >= max {
            break;
        }
        if late() {
            complete = false;
            break;
        }
        let w = &walkers[c.list];
        let (ri, rj) = (
            w.list.entries[c.earlier].rule_id,
            w.list.entries[c.later].rule_id,
        );
        if seen.contains(&(rj, ri)) {
            continue;
        }
        // A shared packet that reaches the earlier rule: it takes the
        // packet the later one was perhaps written for.
        let start = w.universe_within(&c.shared);
        let mut witness = None;
        let mut witness_sets = Vec::new();
        let searched = w.search(
            &start,
            0,
            c.earlier,
            budget,
            Settle::Arrival,
            &mut |outcome, cube| {
                witness = (outcome == Outcome::Arrived)
                    .then(|| space.witness(cube))
                    .flatten();
                witness_sets = fixed_memberships(space, cube);
                witness.is_some()
            },
            &mut |_| {},
        );
        let Ok(true) = searched else { continue };
        seen.insert((rj, ri));
        let mut f = Finding::new(FindingKind::Correlation, rj, vec![ri]);
        f.explain = Explain {
            boxes: start.cubes().to_vec(),
            points_log2: Some(c.points_log2),
            witness,
            empty_fields: Vec::new(),
            list: Some(c.list),
            witness_sets,
        };
        out.push(f);
    }
    (out, complete)
}
