//! `parapet diff`: the exact set of packets two decision lists give
//! different verdicts, as disjoint cubes with a witness packet each.
//!
//! When both lists have the same policy, only the packets matching an
//! entry that can change a verdict (a deciding entry, or a RETURN that
//! skips one: a goto's, one in the middle of a chain) and is not common to
//! both lists are compared (`common_entries.rs`: every other packet is
//! decided by the same entry in both), each box of such an entry
//! ([`compare_region`]): followed down A settling runs of one verdict in
//! bulk (only A's verdict matters so far), each piece down B settling in
//! bulk what B gives the same verdict, and only the pieces whose verdicts
//! differ followed down A again, exactly, for A's deciding rule — only
//! where a run settled them. For a 1 % edit of a ClassBench set that is 1 %
//! of the rules' boxes instead of all of them. The differing pieces of one
//! pair of deciding rules are merged into fewer boxes
//! ([`Cube::merge_all`]) before their witnesses are written.
//!
//! With different policies (and for `diff --rules`) the packets are
//! partitioned by who decides them: for every deciding
//! entry of A, its first-match region is walked down B; for every deciding
//! entry of B, its region is walked down A to find the part A's policy
//! decides; and, when the policies differ, what neither list decides. Each
//! piece whose two verdicts differ is a difference. The regions are
//! followed depth first ([`Walker::search`]), piece by piece, so no working
//! region grows with the number of rules a wide one overlaps.

use crate::common_entries::changed_entries;
use crate::depth_first::Outcome;
use crate::flatten::{DecisionList, EntryKind};
use crate::packet::Packet;
use crate::reach::{Settle, Stop, Walker};
use crate::region::{Budget, Cube, OverBudget, Region, Space};
use crate::rule::Verdict;
use crate::same_decider::{InB, SameDecider};
use std::collections::BTreeMap;

/// One box of packets the two lists treat differently.
#[derive(Clone, Debug, PartialEq)]
pub struct Difference {
    /// The box.
    pub cube: Cube,
    /// A packet of the box.
    pub witness: Packet,
    /// log2 of the number of points of the box.
    pub points_log2: f64,
    /// A's deciding rule (0: the policy) and verdict.
    pub a: (u32, Verdict),
    /// B's deciding rule (0: the policy) and verdict.
    pub b: (u32, Verdict),
    /// Set when the box differs in a non-terminal rule (`diff --rules`):
    /// which one, and on which side it matches.
    pub nonterminal: Option<NonTerminalDiff>,
}

/// A non-terminal rule that matches a box of packets in one list only.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NonTerminalDiff {
    /// The rule id.
    pub rule: u32,
    /// "log" or "counter".
    pub kind: &'static str,
    /// True when A's rule matches the packets (and B's does not).
    pub in_a: bool,
}

/// The result of a comparison.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DiffReport {
    /// Every box found, in A's order.
    pub differences: Vec<Difference>,
    /// Rule ids (A's, then B's with a `b:` marker in `describe`) whose
    /// regions hit the budget: packets there are not compared.
    pub unproven: Vec<Unproven>,
}

/// A part of the comparison that hit the budget.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unproven {
    /// The packets A's rule decides (when only changed rules are compared:
    /// the packets it matches, those of earlier changed rules excepted).
    A(u32),
    /// The packets B's rule decides and A's policy (when only changed
    /// rules are compared: the packets B's rule matches, those of earlier
    /// changed rules excepted).
    B(u32),
    /// The packets both policies decide.
    Policies,
}

impl DiffReport {
    /// True when every packet was compared and none differs.
    pub fn equivalent(&self) -> bool {
        self.differences.is_empty() && self.unproven.is_empty()
    }
}

/// The analysis space of both lists, or why they cannot be analysed.
pub fn space_of(lists: &[&DecisionList]) -> Result<Space, String> {
    // The regions are boxes: a masked comparison (`mark & 0x1 == 0x1`) is
    // not one, and comparing its box would report wrong witnesses.
    // Nor is a `-m string` match (it reads the packet's bytes).
    if let Some(e) = lists
        .iter()
        .flat_map(|l| l.entries.iter())
        .find(|e| e.matches.has_payload())
    {
        return Err(format!(
            "rule {}: a -m string match (the packet's bytes) is not analysed by diff; it cannot compare such rules exactly",
            e.rule_id
        ));
    }
    if let Some(e) = lists
        .iter()
        .flat_map(|l| l.entries.iter())
        .find(|e| e.matches.has_masked())
    {
        let m = &e.matches.masked()[0];
        return Err(format!(
            "rule {}: a masked comparison ({} & {:#x}) is not analysed by diff; it cannot compare such rules exactly",
            e.rule_id, m.field, m.mask
        ));
    }
    Space::of(
        lists
            .iter()
            .flat_map(|l| l.entries.iter().map(|e| &e.matches)),
    )
}

/// The packets that differ by the deciding rule, not only by verdict
/// (`diff --rules`): every deciding region of both lists is compared
/// exactly (see `diff_rules.rs` for the non-terminal rules).
pub(crate) fn diff_by_rule(
    a: &DecisionList,
    b: &DecisionList,
    budget: Budget,
) -> Result<(Space, DiffReport), String> {
    let space = space_of(&[a, b])?;
    let report = {
        let (wa, wb) = (Walker::new(a, &space), Walker::new(b, &space));
        every_region(&space, &wa, &wb, budget, Compare::Rules)
    };
    Ok((space, report))
}

/// What [`every_region`] compares per packet.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Compare {
    /// The verdicts.
    Verdicts,
    /// The deciding rule's id and verdict.
    Rules,
}

/// How many bytes of differing pieces `diff` holds for merging per cube of
/// the budget's working region (`Budget::max_cubes`): 320 MiB with the
/// default budget. A bound in pieces (40 per budget cube, 800,000) let a
/// `diff` of 100,000-rule lists (~560 MiB of its own) pass 1 GiB
/// (benchmarks.md §66); counted in bytes, a piece whose sides were cut into
/// many ranges weighs what it takes. fw1_10k's mixed-verdict edit holds
/// 230,560 pieces, ipc1_10k's +flow variant 770,179 (§62; 408 bytes with
/// 8 fields of one range each, since sides keep one range inline; the
/// latter now merges in place once, §70).
pub const HELD_BYTES_PER_BUDGET_CUBE: usize = 16 << 10;

/// Compares two decision lists packet by packet, exactly, within `budget`
/// (per working region; the differing pieces held for merging are bounded
/// by [`HELD_BYTES_PER_BUDGET_CUBE`] times its cubes, see
/// [`diff_holding`]).
pub fn diff(a: &DecisionList, b: &DecisionList, budget: Budget) -> Result<DiffReport, String> {
    let max_held = budget.max_cubes.saturating_mul(HELD_BYTES_PER_BUDGET_CUBE);
    diff_holding(a, b, budget, max_held)
}

/// [`diff`] holding at most about `max_held` bytes of differing pieces
/// ([`Cube::bytes`]) before they are written out. Past `max_held` every
/// pair's pieces are merged into boxes in place (the same packets, in
/// other boxes than one merge at the end might make); when that leaves
/// more than three quarters of `max_held` (so that a quarter of it comes
/// between two merges: the merges cost a bounded multiple of the pieces),
/// the comparison stops there: the boxes found so far are reported (each
/// is a real difference) and the changed rules not yet compared, the one
/// being compared included, are reported as not proven.
pub fn diff_holding(
    a: &DecisionList,
    b: &DecisionList,
    budget: Budget,
    max_held: usize,
) -> Result<DiffReport, String> {
    let space = space_of(&[a, b])?;
    let (wa, wb) = (Walker::new(a, &space), Walker::new(b, &space));
    if a.policy == b.policy {
        let c = changed_entries(a, b);
        let same = SameDecider::new(&wa, &wb, &c.changed_a, &c.changed_b, c.partner);
        return Ok(diff_changed(
            &space,
            (&wa, &wb),
            (&c.changed_a, &c.changed_b),
            &same,
            budget,
            max_held,
        ));
    }
    Ok(every_region(&space, &wa, &wb, budget, Compare::Verdicts))
}

/// [`diff`] without looking for common entries: every deciding region of
/// both lists is compared (the path for lists with a RETURN that skips
/// deciding entries or with different policies; public so that tests and
/// benchmarks can hold the two paths against each other).
pub fn diff_every_region(
    a: &DecisionList,
    b: &DecisionList,
    budget: Budget,
) -> Result<DiffReport, String> {
    let space = space_of(&[a, b])?;
    let (wa, wb) = (Walker::new(a, &space), Walker::new(b, &space));
    Ok(every_region(&space, &wa, &wb, budget, Compare::Verdicts))
}

/// With [`Compare::Rules`] every piece is followed exactly on both sides
/// (no run is settled in bulk) and B's rules with A's policy's verdict are
/// followed too.
fn every_region(
    space: &Space,
    wa: &Walker,
    wb: &Walker,
    budget: Budget,
    compare: Compare,
) -> DiffReport {
    let (a, b) = (wa.list, wb.list);
    let by_rule = compare == Compare::Rules;
    let mut report = DiffReport::default();
    let emit = |report: &mut DiffReport, region: Region, sa: (u32, &Verdict), sb| {
        let (sb_id, sb_verdict): (u32, &Verdict) = sb;
        if sa.1 == sb_verdict && (!by_rule || sa.0 == sb_id) {
            return;
        }
        for cube in region.cubes() {
            if let Some(witness) = space.witness(cube) {
                report.differences.push(Difference {
                    cube: cube.clone(),
                    witness,
                    points_log2: space.points_log2(cube),
                    a: (sa.0, sa.1.clone()),
                    b: (sb_id, sb_verdict.clone()),
                    nonterminal: None,
                });
            }
        }
    };
    // Packets A's entries decide, followed down B.
    for (i, e) in a.entries.iter().enumerate() {
        let EntryKind::Decide(va) = &e.kind else {
            continue;
        };
        let mut pieces: Vec<(Stop, Cube)> = Vec::new();
        let settle = if by_rule {
            Settle::Exact
        } else {
            Settle::SameAs(va)
        };
        let outcome = follow(wa, i, wb, budget, settle, &mut |s, c| {
            if wb.verdict(s) != va || (by_rule && wb.rule_id(s) != e.rule_id) {
                pieces.push((s, c.clone()));
            }
        });
        if outcome.is_err() {
            report.unproven.push(Unproven::A(e.rule_id));
            continue;
        }
        // In the order a breadth-first walk reports them: by B's entry,
        // the policy last, and in region order within one.
        pieces.sort_by_key(|(s, _)| match s {
            Stop::Entry(k) => *k,
            Stop::Policy => usize::MAX,
        });
        for (s, c) in pieces {
            emit(
                &mut report,
                Region::from_cube(c),
                (e.rule_id, va),
                (wb.rule_id(s), wb.verdict(s)),
            );
        }
    }
    // Packets B's entries decide and A's policy does.
    for (j, e) in b.entries.iter().enumerate() {
        let EntryKind::Decide(vb) = &e.kind else {
            continue;
        };
        if *vb == a.policy && !by_rule {
            continue;
        }
        let mut rest = Region::empty();
        let outcome = follow(wb, j, wa, budget, Settle::Any, &mut |s, c| {
            if s == Stop::Policy {
                rest.extend_disjoint(Region::from_cube(c.clone()));
            }
        });
        match outcome {
            Ok(()) => emit(&mut report, rest, (0, &a.policy), (e.rule_id, vb)),
            Err(_) => report.unproven.push(Unproven::B(e.rule_id)),
        }
    }
    // Packets both policies decide.
    if a.policy != b.policy {
        let mut rest = Region::empty();
        let both = through(
            wa,
            space.universe(),
            wb,
            budget,
            Settle::Any,
            &mut |s, c| {
                if s == Stop::Policy {
                    rest.extend_disjoint(Region::from_cube(c.clone()));
                }
            },
        );
        match both {
            Ok(()) => emit(&mut report, rest, (0, &a.policy), (0, &b.policy)),
            Err(_) => report.unproven.push(Unproven::Policies),
        }
    }
    report
}

/// A stop as a sort key: its entry, the policy last.
fn order(s: Stop) -> usize {
    match s {
        Stop::Entry(k) => k,
        Stop::Policy => usize::MAX,
    }
}

fn stop_of(o: Outcome) -> Stop {
    match o {
        Outcome::Decided(s) => s,
        Outcome::Arrived => Stop::Policy,
    }
}

/// [`diff`] of two lists with one policy, comparing only the packets in the
/// boxes of the deciding entries `ca` of A and `cb` of B (those outside
/// their common subsequence), each box less the earlier ones.
fn diff_changed(
    space: &Space,
    (wa, wb): (&Walker, &Walker),
    (ca, cb): (&[usize], &[usize]),
    same: &SameDecider,
    budget: Budget,
    max_held: usize,
) -> DiffReport {
    let mut report = DiffReport::default();
    let changed: Vec<(Unproven, &Cube)> = ca
        .iter()
        .map(|&i| (Unproven::A(wa.list.entries[i].rule_id), wa.cube(i)))
        .chain(
            cb.iter()
                .map(|&j| (Unproven::B(wb.list.entries[j].rule_id), wb.cube(j))),
        )
        .collect();
    // The differing pieces by (A's deciding stop, B's), merged into fewer
    // boxes before their witnesses are written: fw1_10k's mixed-verdict
    // edit cut into 230,560 pieces.
    let mut found: BTreeMap<(usize, usize), (Stop, Stop, Vec<Cube>)> = BTreeMap::new();
    // The bytes of the pieces `found` holds; `full` once merging them in
    // place left more than three quarters of `max_held` (nothing more is
    // compared).
    let (mut held, mut full) = (0usize, false);
    for (k, (tag, cube)) in changed.iter().enumerate() {
        if full {
            report.unproven.push(tag.clone());
            continue;
        }
        let mut compare = || -> Result<(), OverBudget> {
            let mut region = wa.universe_within(cube);
            for (_, earlier) in &changed[..k] {
                if region.is_empty() {
                    return Ok(());
                }
                if earlier.overlaps(cube) {
                    region = region.subtract(earlier, budget)?;
                }
            }
            compare_region(wa, wb, same, &region, budget, &mut |sa, sb, c| {
                // A box with no packet to show (no writable value on a
                // side) is not a difference.
                if space.witness(c).is_none() {
                    return false;
                }
                let piece = c.clone();
                held += piece.bytes();
                found
                    .entry((order(sa), order(sb)))
                    .or_insert_with(|| (sa, sb, Vec::new()))
                    .2
                    .push(piece);
                if held > max_held {
                    held = merge_held(&mut found);
                    full = held > max_held - max_held / 4;
                }
                full
            })
        };
        if compare().is_err() {
            report.unproven.push(tag.clone());
        }
    }
    // By A's deciding entry (the policy last), then B's.
    for (sa, sb, cubes) in found.into_values() {
        for c in Cube::merge_all(cubes) {
            let Some(witness) = space.witness(&c) else {
                continue;
            };
            report.differences.push(Difference {
                points_log2: space.points_log2(&c),
                cube: c,
                witness,
                a: (wa.rule_id(sa), wa.verdict(sa).clone()),
                b: (wb.rule_id(sb), wb.verdict(sb).clone()),
                nonterminal: None,
            });
        }
    }
    report
}

/// Merges every pair's held pieces into boxes in place; the bytes held
/// then.
fn merge_held(found: &mut BTreeMap<(usize, usize), (Stop, Stop, Vec<Cube>)>) -> usize {
    found
        .values_mut()
        .map(|(_, _, cubes)| {
            *cubes = Cube::merge_all(std::mem::take(cubes));
            cubes.iter().map(Cube::bytes).sum::<usize>()
        })
        .sum()
}

/// Passes every piece of `region` whose verdicts in A and B differ to
/// `emit` with its deciding stops (exact on both sides); when `emit`
/// returns true the comparison stops, over budget. Verdicts first:
/// A's runs of one verdict and B's runs of A's verdict are settled in
/// bulk; only differing pieces are split by A's exact deciding entries,
/// and only where a run settled them: a search of A from the entry where
/// the piece entered the run to the entry that settled it (no earlier
/// entry meets the piece). A piece decided exactly (a run one entry long,
/// as in a list whose verdicts alternate) needs no second search at all.
/// Nor does B need a search for a piece A decides by an entry common to
/// both lists with no changed entry before it meeting the piece
/// ([`SameDecider`]): B decides it by that entry's partner.
fn compare_region(
    wa: &Walker,
    wb: &Walker,
    same: &SameDecider,
    region: &Region,
    budget: Budget,
    emit: &mut dyn FnMut(Stop, Stop, &Cube) -> bool,
) -> Result<(), OverBudget> {
    let nb = wb.list.entries.len();
    let mut inner: Result<bool, OverBudget> = Ok(false);
    // Set when `emit` asked to stop.
    let mut stop = false;
    let outer = wa.search_settling(
        region,
        0,
        wa.list.entries.len(),
        budget,
        Settle::Any,
        &mut |oa, entered, piece| {
            let sa = stop_of(oa);
            let from_b = match same.in_b(sa, entered, piece) {
                InB::Decided(_) => return false,
                InB::From(at) => at,
            };
            let va = wa.verdict(sa);
            let mut exact: Result<bool, OverBudget> = Ok(false);
            let down_b = wb.search(
                &Region::from_cube(piece.clone()),
                from_b,
                nb,
                budget,
                Settle::SameAs(va),
                &mut |ob, differing| {
                    let sb = stop_of(ob);
                    if wb.verdict(sb) == va {
                        return false;
                    }
                    let settled_at = match sa {
                        Stop::Entry(k) if k != entered => k,
                        _ => {
                            stop = emit(sa, sb, differing);
                            return stop;
                        }
                    };
                    exact = wa.search(
                        &Region::from_cube(differing.clone()),
                        entered,
                        settled_at + 1,
                        budget,
                        Settle::Exact,
                        &mut |oa, c| {
                            debug_assert!(oa != Outcome::Arrived, "the settling entry holds it");
                            stop = emit(stop_of(oa), sb, c);
                            stop
                        },
                        &mut |_| {},
                    );
                    exact.is_err() || stop
                },
                &mut |_| {},
            );
            inner = down_b.and(exact);
            inner.is_err() || stop
        },
        &mut |_| {},
    );
    if stop {
        return Err(OverBudget);
    }
    outer.and(inner).map(|_| ())
}

/// Follows the packets `first`'s entry `i` decides down all of `second`,
/// passing every piece `second` decides (at its stop; the policy's at
/// [`Stop::Policy`]) to `visit`.
fn follow(
    first: &Walker,
    i: usize,
    second: &Walker,
    budget: Budget,
    settle: Settle,
    visit: &mut dyn FnMut(Stop, &Cube),
) -> Result<(), OverBudget> {
    let start = first.universe_within(first.cube(i));
    through_range(first, start, 0, i, second, budget, settle, visit)
}

/// Follows `start` down all of `first`, and what its policy decides down
/// all of `second`, as [`follow`].
fn through(
    first: &Walker,
    start: Region,
    second: &Walker,
    budget: Budget,
    settle: Settle,
    visit: &mut dyn FnMut(Stop, &Cube),
) -> Result<(), OverBudget> {
    let n = first.list.entries.len();
    through_range(first, start, 0, n, second, budget, settle, visit)
}

/// The packets of `start` that pass `first`'s entries `from..to`, piece by
/// piece (depth first, so no working region grows with the list), each
/// followed down `second`.
#[allow(clippy::too_many_arguments)]
fn through_range(
    first: &Walker,
    start: Region,
    from: usize,
    to: usize,
    second: &Walker,
    budget: Budget,
    settle: Settle,
    visit: &mut dyn FnMut(Stop, &Cube),
) -> Result<(), OverBudget> {
    let n = second.list.entries.len();
    let mut inner = Ok(false);
    first
        .search(
            &start,
            from,
            to,
            budget,
            Settle::Arrival,
            &mut |outcome, cube| {
                if outcome != Outcome::Arrived {
                    return false;
                }
                inner = second.search(
                    &Region::from_cube(cube.clone()),
                    0,
                    n,
                    budget,
                    settle,
                    &mut |o, c| {
                        let s = match o {
                            Outcome::Decided(s) => s,
                            Outcome::Arrived => Stop::Policy,
                        };
                        visit(s, c);
                        false
                    },
                    &mut |_| {},
                );
                inner.is_err()
            },
            &mut |_| {},
        )
        .and(inner)
        .map(|_| ())
}
