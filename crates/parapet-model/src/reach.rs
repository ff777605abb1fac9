//! First-match regions: which packets reach, and are decided by, each
//! entry of a decision list — computed exactly with [`crate::region`].
//!
//! A walk carries a region of packets down the list exactly as
//! [`DecisionList::classify`] carries one packet: a matching `Decide` entry
//! takes its part out, a matching `Return` moves its part to the entry it
//! resumes at, every other entry lets packets pass. Only the entries whose
//! bounding box meets the walked region's are looked at, and a
//! [`HullIndex`] finds them without scanning the list, so the cost of a
//! walk grows with the rules that overlap it, not with the list.

use crate::flatten::{DecisionList, EntryKind};
use crate::hull_index::{hulls_meet, HullIndex};
use crate::region::{Budget, Cube, OverBudget, Region, Space};
use crate::rule::Verdict;
use std::collections::BTreeMap;

/// Where a walked packet ends: at a deciding entry or at the policy.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Stop {
    /// The entry with this index decided.
    Entry(usize),
    /// No entry decided: the chain policy did.
    Policy,
}

/// Which decisions a walk may settle in bulk. Within a run of deciding
/// entries with one verdict (nothing but LOG, count and jump entries
/// between), which entry decides a packet does not change its verdict; when
/// the caller only needs verdicts (or only what passes the run), the walk
/// looks for one entry of the run that covers the whole walked region and
/// settles everything there at once (the catch-all rule at the end of a
/// ClassBench list, instead of thousands of fragmenting subtractions).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Settle<'v> {
    /// Report every packet's exact deciding entry.
    Exact,
    /// Exact, except that runs with this verdict may be settled in bulk
    /// (and reported at the covering entry).
    SameAs(&'v Verdict),
    /// Only what passes the walk matters: any run may be settled in bulk.
    Any,
    /// Only which packets arrive at the end of the walk matters (is a rule
    /// reached, what reaches it): every run of deciding entries, whatever
    /// their verdicts (nothing but LOG, count and jump entries between, no
    /// RETURN), is one union and may be settled in bulk. A piece is then
    /// reported at an entry of the run that matches it, not necessarily
    /// the first, so its verdict means nothing. With runs of one verdict
    /// only, a list of alternating verdicts split every piece entry by
    /// entry in list order (ClassBench fw1 with every other rule DROP did
    /// not finish `lint` in 80 s of CPU).
    Arrival,
}

impl Settle<'_> {
    /// True when a run of deciding entries with verdict `v` may be settled
    /// in bulk.
    pub(crate) fn allows(self, v: &Verdict) -> bool {
        match self {
            Settle::Exact => false,
            Settle::SameAs(want) => want == v,
            Settle::Any | Settle::Arrival => true,
        }
    }
}

/// A decision list prepared for region walks.
pub struct Walker<'a> {
    /// The list.
    pub list: &'a DecisionList,
    /// The space its cubes live in.
    pub space: &'a Space,
    cubes: Vec<Cube>,
    /// Bounding boxes, `space.dims().len()` per entry.
    hulls: Vec<(u128, u128)>,
    /// The entries whose box meets a given box.
    index: HullIndex,
    /// Entries removed from the list (skipped by every walk).
    removed: Vec<bool>,
    /// For a deciding entry: the end of its run of same-verdict deciding
    /// entries (see [`Settle`]).
    run_end: Vec<usize>,
    /// For a deciding entry: the end of its run of deciding entries of any
    /// verdict (the runs of [`Settle::Arrival`]).
    arrival_run_end: Vec<usize>,
    /// Per family (its universe cube), for each index: the first deciding
    /// entry at or after it that matches every packet of the family (a
    /// catch-all), or `n`. A search settling a run
    /// that holds one settles every piece at once, where scanning the run
    /// for a covering entry costs the run's length per search (quadratic
    /// over `lint`'s per-rule searches of a 100,000-rule list).
    next_catch_all: Vec<(Cube, Vec<usize>)>,
    /// For each index: the first deciding or RETURN entry at or after it,
    /// or `n`.
    next_stop: Vec<usize>,
}

/// True when every side of `cube` holds the whole range of the hull's.
pub(crate) fn covers(cube: &Cube, hull: &[(u128, u128)]) -> bool {
    cube.sides().iter().zip(hull).all(|(side, &(lo, hi))| {
        let r = side.ranges();
        let i = r.partition_point(|&(_, end)| end < lo);
        i < r.len() && r[i].0 <= lo && hi <= r[i].1
    })
}

fn hull_of(cubes: &[Cube], dims: usize) -> Vec<(u128, u128)> {
    let mut h = vec![(u128::MAX, 0u128); dims];
    for c in cubes {
        for (slot, (lo, hi)) in h.iter_mut().zip(c.hull()) {
            slot.0 = slot.0.min(lo);
            slot.1 = slot.1.max(hi);
        }
    }
    h
}

impl<'a> Walker<'a> {
    /// Prepares `list` in `space` (which must cover the list's fields).
    pub fn new(list: &'a DecisionList, space: &'a Space) -> Self {
        let cubes: Vec<Cube> = list
            .entries
            .iter()
            .map(|e| space.cube(&e.matches))
            .collect();
        let hulls: Vec<(u128, u128)> = cubes.iter().flat_map(|c| c.hull()).collect();
        let index = HullIndex::new(&hulls, space.dims().len());
        let n = list.entries.len();
        let mut run_end = vec![n; n];
        let mut end = n;
        let mut verdict: Option<&Verdict> = None;
        for i in (0..n).rev() {
            match &list.entries[i].kind {
                EntryKind::Decide(v) => {
                    if verdict != Some(v) {
                        end = i + 1;
                        verdict = Some(v);
                    }
                    // `end` is one past the last entry of the run.
                    run_end[i] = end;
                }
                EntryKind::Return { .. } => verdict = None,
                _ => {}
            }
        }
        let mut arrival_run_end = vec![n; n];
        let mut end = n;
        for i in (0..n).rev() {
            match &list.entries[i].kind {
                EntryKind::Decide(_) => arrival_run_end[i] = end,
                EntryKind::Return { .. } => end = i,
                _ => {}
            }
        }
        let mut next_stop = vec![n; n + 1];
        for i in (0..n).rev() {
            next_stop[i] = match list.entries[i].kind {
                EntryKind::Decide(_) | EntryKind::Return { .. } => i,
                _ => next_stop[i + 1],
            };
        }
        // Per family's universe cube, the entries that hold all of it.
        let next_catch_all: Vec<(Cube, Vec<usize>)> = space
            .universe()
            .cubes()
            .iter()
            .map(|u| {
                let mut next = vec![n; n + 1];
                for i in (0..n).rev() {
                    let all = list.entries[i].kind.is_terminal() && u.is_subset(&cubes[i]);
                    next[i] = if all { i } else { next[i + 1] };
                }
                (u.clone(), next)
            })
            .collect();
        Walker {
            list,
            space,
            next_catch_all,
            next_stop,
            removed: vec![false; n],
            cubes,
            hulls,
            index,
            run_end,
            arrival_run_end,
        }
    }

    /// The entries in `from..to` whose box meets `hull`, ascending.
    pub(crate) fn meeting(&self, hull: &[(u128, u128)], from: usize, to: usize) -> Vec<usize> {
        self.index.meeting(&self.hulls, hull, from, to)
    }

    /// Entry `i`'s bounding box.
    pub(crate) fn hull(&self, i: usize) -> &[(u128, u128)] {
        let d = self.space.dims().len();
        &self.hulls[i * d..(i + 1) * d]
    }

    /// The first deciding entry at or after `i` that matches every packet
    /// of `cube`'s family (`entries.len()` when none does).
    pub(crate) fn next_catch_all(&self, cube: &Cube, i: usize) -> usize {
        self.next_catch_all
            .iter()
            .find(|(u, _)| cube.is_subset(u))
            .map_or(self.list.entries.len(), |(_, next)| next[i])
    }

    /// The catch-all that decides every packet of `cube` standing at entry
    /// `from`, when `settle` lets that be settled in bulk: the first entry
    /// from `from` on that can decide or RETURN decides, with a verdict
    /// `settle` allows, in a run that holds a catch-all before `to`. Every
    /// piece of `cube` a search would follow from `from` then ends at that
    /// catch-all, so a search answers for `cube` without asking the index
    /// for the entries it meets (for a wide rule of a 100,000-rule list,
    /// tens of thousands of them).
    pub(crate) fn settled_in_bulk(
        &self,
        cube: &Cube,
        from: usize,
        to: usize,
        settle: Settle,
    ) -> Option<usize> {
        if cube.is_empty() || from >= to {
            return None;
        }
        let first = *self.next_stop.get(from)?;
        let EntryKind::Decide(v) = &self.list.entries.get(first)?.kind else {
            return None;
        };
        let k = self.next_catch_all(cube, from);
        (settle.allows(v) && k < to && k < self.run_end(first, settle) && !self.removed[k])
            .then_some(k)
    }

    /// For a deciding entry, one past the end of its run as `settle` counts
    /// runs (see [`Settle`]).
    pub(crate) fn run_end(&self, i: usize, settle: Settle) -> usize {
        match settle {
            Settle::Arrival => self.arrival_run_end[i],
            _ => self.run_end[i],
        }
    }

    /// True when entry `i` was removed.
    pub(crate) fn is_removed(&self, i: usize) -> bool {
        self.removed[i]
    }

    /// The cube of entry `i`'s match.
    pub fn cube(&self, i: usize) -> &Cube {
        &self.cubes[i]
    }

    /// Removes entry `i` from every later walk.
    pub fn remove(&mut self, i: usize) {
        self.removed[i] = true;
    }

    /// The verdict at a stop.
    pub fn verdict(&self, stop: Stop) -> &Verdict {
        match stop {
            Stop::Entry(i) => match &self.list.entries[i].kind {
                EntryKind::Decide(v) => v,
                _ => unreachable!("only deciding entries stop a walk"),
            },
            Stop::Policy => &self.list.policy,
        }
    }

    /// The rule id at a stop (0 for the policy).
    pub fn rule_id(&self, stop: Stop) -> u32 {
        match stop {
            Stop::Entry(i) => self.list.entries[i].rule_id,
            Stop::Policy => 0,
        }
    }

    /// Walks the packets of `region`, all standing at entry `from`, down to
    /// entry `to` (exclusive; `entries.len()` for the whole list). Every
    /// non-empty part a `Decide` entry takes is passed to `decided`, and
    /// every entry that took or skipped a non-empty part is passed to
    /// `touched`. Returns the packets that arrive at `to` (at the end of
    /// the list: those the policy decides).
    #[allow(clippy::too_many_arguments)]
    pub fn walk(
        &self,
        region: Region,
        from: usize,
        to: usize,
        budget: Budget,
        settle: Settle,
        decided: &mut dyn FnMut(Stop, Region),
        touched: &mut dyn FnMut(usize),
    ) -> Result<Region, OverBudget> {
        let d = self.space.dims().len();
        let mut live = region;
        let mut pending: BTreeMap<usize, Region> = BTreeMap::new();
        let mut hull = hull_of(live.cubes(), d);
        // Every packet the walk carries lies in the box it starts with:
        // the entries that miss that box are skipped without a look.
        let candidates = self.index.meeting(&self.hulls, &hull, from, to);
        let mut hits = 0usize;
        // Runs before this index have been looked at for a covering entry.
        let mut settled_until = from;
        for (p, &j) in candidates.iter().enumerate() {
            // Packets a RETURN sent to an entry at or before `j` are back.
            let mut back = false;
            while let Some(entry) = pending.first_entry() {
                if *entry.key() > j {
                    break;
                }
                live.extend_disjoint(entry.remove());
                back = true;
            }
            if back {
                hull = hull_of(live.cubes(), d);
            }
            if live.is_empty() {
                match pending.keys().next() {
                    Some(_) => continue,
                    None => break,
                }
            }
            if self.removed[j] || !hulls_meet(&hull, &self.hulls[j * d..(j + 1) * d]) {
                continue;
            }
            let resume = match &self.list.entries[j].kind {
                EntryKind::Decide(v) => {
                    if settle.allows(v) && j >= settled_until {
                        let end = self.run_end(j, settle).min(to);
                        settled_until = end;
                        // A covering entry's box holds the walked box, so
                        // it is among the candidates.
                        if let Some(&k) =
                            candidates[p..]
                                .iter()
                                .take_while(|&&k| k < end)
                                .find(|&&k| {
                                    !self.removed[k]
                                        && self.list.entries[k].kind.is_terminal()
                                        && covers(&self.cubes[k], &hull)
                                })
                        {
                            touched(k);
                            decided(Stop::Entry(k), std::mem::take(&mut live));
                            continue;
                        }
                    }
                    None
                }
                EntryKind::Return { resume, .. } => Some(*resume as usize),
                _ => continue,
            };
            let (hit, miss) = live.split(&self.cubes[j], budget)?;
            live = miss;
            if hit.is_empty() {
                continue;
            }
            touched(j);
            // A stale hull is still a bound; recomputing it after every
            // hit cost more than the splits it saves.
            hits += 1;
            if hits.is_multiple_of(8) || live.cubes().len() <= 16 {
                hull = hull_of(live.cubes(), d);
            }
            match resume {
                None => decided(Stop::Entry(j), hit),
                Some(r) => pending.entry(r).or_default().extend_disjoint(hit),
            }
        }
        // Packets that skipped to `to` or before it arrive there; those
        // that skipped past it never see it.
        while let Some(entry) = pending.first_entry() {
            if *entry.key() > to {
                break;
            }
            live.extend_disjoint(entry.remove());
        }
        Ok(live)
    }

    /// The packets that reach entry `i` and match it.
    pub fn reach(
        &self,
        i: usize,
        budget: Budget,
        touched: &mut dyn FnMut(usize),
    ) -> Result<Region, OverBudget> {
        let start = self.universe_within(&self.cubes[i]);
        self.walk(
            start,
            0,
            i,
            budget,
            Settle::Arrival,
            &mut |_, _| {},
            touched,
        )
    }

    /// The rule that decides `pkt` scanning from entry `from` (0: the
    /// policy), skipping removed entries; RETURNs skip as in a walk.
    pub fn decide_point(&self, pkt: &crate::packet::Packet, from: usize) -> u32 {
        match self.scan_point(pkt, from, self.list.entries.len()) {
            Ok(j) => self.list.entries[j].rule_id,
            Err(_) => 0,
        }
    }

    /// Where `pkt`, standing at entry `from`, is decided (skipping removed
    /// entries, RETURNs skipping as in a walk).
    pub(crate) fn stop_from(&self, pkt: &crate::packet::Packet, from: usize) -> Stop {
        match self.scan_point(pkt, from, self.list.entries.len()) {
            Ok(j) => Stop::Entry(j),
            Err(_) => Stop::Policy,
        }
    }

    /// True when `pkt`, scanned from the first entry, arrives at entry `i`
    /// (no earlier entry decides it, no RETURN skips past it).
    pub(crate) fn arrives_at(&self, pkt: &crate::packet::Packet, i: usize) -> bool {
        matches!(self.scan_point(pkt, 0, i), Err(at) if at <= i)
    }

    /// Scans `pkt` over entries `from..to` as a walk would: `Ok` with the
    /// deciding entry, or `Err` with the entry it goes on at (past the last
    /// RETURN it took, if any).
    fn scan_point(
        &self,
        pkt: &crate::packet::Packet,
        from: usize,
        to: usize,
    ) -> Result<usize, usize> {
        let point: Vec<(u128, u128)> = self
            .space
            .dims()
            .iter()
            .map(|&f| (Space::point_value(f, pkt), Space::point_value(f, pkt)))
            .collect();
        let mut at = from;
        for j in self.index.meeting(&self.hulls, &point, from, to) {
            if j < at || self.removed[j] || !self.space.contains(&self.cubes[j], pkt) {
                continue;
            }
            match &self.list.entries[j].kind {
                EntryKind::Decide(_) => return Ok(j),
                EntryKind::Return { resume, .. } => at = *resume as usize,
                _ => {}
            }
        }
        Err(at)
    }

    /// The packets of the universe inside `cube`.
    pub fn universe_within(&self, cube: &Cube) -> Region {
        self.space.universe().intersect(cube)
    }

    /// Every deciding stop with the packets it decides, policy last.
    /// Exponential in the worst case; for tests and small lists.
    pub fn decided_regions(&self, budget: Budget) -> Result<Vec<(Stop, Region)>, OverBudget> {
        let mut out = Vec::new();
        let rest = self.walk(
            self.space.universe(),
            0,
            self.list.entries.len(),
            budget,
            Settle::Exact,
            &mut |s, r| out.push((s, r)),
            &mut |_| {},
        )?;
        out.push((Stop::Policy, rest));
        Ok(out)
    }
}
