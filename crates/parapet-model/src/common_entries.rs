//! The deciding entries two decision lists share, in the same order in
//! both: what lets `diff` look only where the lists differ.
//!
//! If the deciding entries `C` of A and of B are equal (same match, same
//! verdict, same limit) and in the same relative order in both, a packet
//! that matches none of the other deciding entries (of A or of B) is decided
//! in both lists by the first entry of `C` it matches, or by both policies:
//! with equal policies it gets the same verdict from both. So every packet
//! whose verdict differs lies in the box of some entry outside `C`, and for
//! a 1 % edit those boxes are 1 % of the rules — the rest of the packet
//! space drops out without a single subtraction. `C` need not be the longest
//! common subsequence for this to hold; a longer one only makes the
//! remainder smaller.
//!
//! `C` is found as a patience diff does, in O(n log n) whatever the number
//! of edits (a Myers diff is O(n·d) and needs a cap on d): the common
//! prefix and suffix, then, in between, the entries that occur exactly once
//! in each list, of which a longest increasing run by B's position is kept
//! (a reordered rule falls out of it), then every gap between two kept
//! entries is trimmed again from both ends (which picks up duplicates).
//! Non-deciding entries (LOG, counters, jump markers) change no verdict and
//! are left out, and so is a RETURN that skips no deciding entry (the last
//! rule of the chain a jump enters: every packet it takes would fall
//! through to the same next entry anyway). Lists with any other RETURN are
//! not handled here (its resume index ties entries to positions: a packet
//! it takes skips entries that may be common), see [`changed_entries`].

use crate::flatten::{DecisionList, Entry, EntryKind};
use std::collections::HashMap;

/// What makes two deciding entries the same: everything but the rule id.
type Key<'a> = (
    &'a crate::rule::Matches,
    &'a EntryKind,
    &'a Option<crate::rule::Limit>,
);

fn key(e: &Entry) -> Key<'_> {
    (&e.matches, &e.kind, &e.limit)
}

/// The deciding entries of A and of B that are not in the common
/// subsequence (indices into each list, ascending), or `None` when a list
/// has a RETURN entry that skips a deciding entry.
pub(crate) fn changed_entries(
    a: &DecisionList,
    b: &DecisionList,
) -> Option<(Vec<usize>, Vec<usize>)> {
    let deciding = |l: &DecisionList| -> Option<Vec<usize>> {
        let before = decisions_before(l);
        let mut out = Vec::new();
        for (i, e) in l.entries.iter().enumerate() {
            match e.kind {
                EntryKind::Decide(_) => out.push(i),
                // A RETURN that skips no deciding entry changes no verdict.
                EntryKind::Return { resume, .. } => {
                    let resume = (resume as usize).clamp(i + 1, l.entries.len());
                    if before[resume] != before[i + 1] {
                        return None;
                    }
                }
                _ => {}
            }
        }
        Some(out)
    };
    let (sa, sb) = (deciding(a)?, deciding(b)?);
    let ka: Vec<Key> = sa.iter().map(|&i| key(&a.entries[i])).collect();
    let kb: Vec<Key> = sb.iter().map(|&i| key(&b.entries[i])).collect();
    let mut common_a = vec![false; ka.len()];
    let mut common_b = vec![false; kb.len()];
    match_range(
        &ka,
        &kb,
        (0, ka.len()),
        (0, kb.len()),
        &mut common_a,
        &mut common_b,
        0,
    );
    let rest = |s: &[usize], common: &[bool]| -> Vec<usize> {
        s.iter()
            .zip(common)
            .filter(|(_, &c)| !c)
            .map(|(&i, _)| i)
            .collect()
    };
    Some((rest(&sa, &common_a), rest(&sb, &common_b)))
}

/// For each index `k` (0..=n): how many deciding entries come before it.
fn decisions_before(l: &DecisionList) -> Vec<usize> {
    let mut out = Vec::with_capacity(l.entries.len() + 1);
    out.push(0);
    for e in &l.entries {
        out.push(out.last().unwrap() + e.kind.is_terminal() as usize);
    }
    out
}

/// Gaps are matched again at most this deep: enough for any edit a person
/// makes, and a bound on the recursion for adversarial lists (what is left
/// unmatched only widens the region `diff` compares).
const MAX_DEPTH: u32 = 24;

/// Marks a common subsequence of `ka[a.0..a.1]` and `kb[b.0..b.1]`.
#[allow(clippy::too_many_arguments)]
fn match_range(
    ka: &[Key],
    kb: &[Key],
    (mut a0, mut a1): (usize, usize),
    (mut b0, mut b1): (usize, usize),
    common_a: &mut [bool],
    common_b: &mut [bool],
    depth: u32,
) {
    // Common prefix and suffix.
    while a0 < a1 && b0 < b1 && ka[a0] == kb[b0] {
        (common_a[a0], common_b[b0]) = (true, true);
        (a0, b0) = (a0 + 1, b0 + 1);
    }
    while a0 < a1 && b0 < b1 && ka[a1 - 1] == kb[b1 - 1] {
        (a1, b1) = (a1 - 1, b1 - 1);
        (common_a[a1], common_b[b1]) = (true, true);
    }
    if a0 == a1 || b0 == b1 || depth >= MAX_DEPTH {
        return;
    }
    // Entries occurring once on each side: (count in A, position in A,
    // count in B, position in B).
    let mut seen: HashMap<&Key, (u32, usize, u32, usize)> = HashMap::new();
    for (i, k) in ka.iter().enumerate().take(a1).skip(a0) {
        let s = seen.entry(k).or_insert((0, i, 0, 0));
        s.0 += 1;
    }
    for (j, k) in kb.iter().enumerate().take(b1).skip(b0) {
        if let Some(s) = seen.get_mut(k) {
            s.2 += 1;
            s.3 = j;
        }
    }
    let mut unique: Vec<(usize, usize)> = seen
        .values()
        .filter(|s| s.0 == 1 && s.2 == 1)
        .map(|s| (s.1, s.3))
        .collect();
    if unique.is_empty() {
        return;
    }
    unique.sort_unstable();
    let anchors = longest_increasing_by_second(&unique);
    // Every gap between anchors (and before the first, after the last)
    // is matched again: prefix and suffix pick up what was not unique.
    let (mut pa, mut pb) = (a0, b0);
    for &(i, j) in &anchors {
        match_range(ka, kb, (pa, i), (pb, j), common_a, common_b, depth + 1);
        (common_a[i], common_b[j]) = (true, true);
        (pa, pb) = (i + 1, j + 1);
    }
    match_range(ka, kb, (pa, a1), (pb, b1), common_a, common_b, depth + 1);
}

/// A longest subsequence of `pairs` (sorted by first) that also increases
/// in the second element (patience sorting, O(n log n)).
fn longest_increasing_by_second(pairs: &[(usize, usize)]) -> Vec<(usize, usize)> {
    // tails[k]: index into `pairs` of the smallest tail of an increasing
    // run of length k + 1; prev: the element before each in its run.
    let mut tails: Vec<usize> = Vec::new();
    let mut prev = vec![usize::MAX; pairs.len()];
    for (p, &(_, second)) in pairs.iter().enumerate() {
        let k = tails.partition_point(|&t| pairs[t].1 < second);
        if k > 0 {
            prev[p] = tails[k - 1];
        }
        if k == tails.len() {
            tails.push(p);
        } else {
            tails[k] = p;
        }
    }
    let mut out = Vec::with_capacity(tails.len());
    let mut at = tails.last().copied().unwrap_or(usize::MAX);
    while at != usize::MAX {
        out.push(pairs[at]);
        at = prev[at];
    }
    out.reverse();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The marked entries form a common subsequence: equal keys, in
        /// the same order on both sides; a list compared with itself is
        /// all common.
        #[test]
        fn marks_a_common_subsequence(
            a in prop::collection::vec(0u8..6, 0..40),
            b in prop::collection::vec(0u8..6, 0..40),
        ) {
            let kinds: Vec<EntryKind> = (0..6u8)
                .map(|v| EntryKind::Decide(if v % 2 == 0 {
                    crate::rule::Verdict::Accept
                } else {
                    crate::rule::Verdict::Drop
                }))
                .collect();
            let ms: Vec<crate::rule::Matches> = (0..6u8)
                .map(|v| {
                    let mut m = crate::rule::Matches::default();
                    m.constrain(crate::field::Field::DstPort, crate::interval::IntervalSet::point(v as u128 / 2));
                    m
                })
                .collect();
            let none = None;
            let ka: Vec<Key> = a.iter().map(|&v| (&ms[v as usize], &kinds[v as usize], &none)).collect();
            let kb: Vec<Key> = b.iter().map(|&v| (&ms[v as usize], &kinds[v as usize], &none)).collect();
            let (mut ca, mut cb) = (vec![false; a.len()], vec![false; b.len()]);
            match_range(&ka, &kb, (0, a.len()), (0, b.len()), &mut ca, &mut cb, 0);
            let pa: Vec<u8> = a.iter().zip(&ca).filter(|p| *p.1).map(|p| *p.0).collect();
            let pb: Vec<u8> = b.iter().zip(&cb).filter(|p| *p.1).map(|p| *p.0).collect();
            prop_assert_eq!(pa, pb);
            let (mut ca, mut cb) = (vec![false; a.len()], vec![false; a.len()]);
            match_range(&ka, &ka, (0, a.len()), (0, a.len()), &mut ca, &mut cb, 0);
            prop_assert!(ca.iter().all(|&c| c) && cb.iter().all(|&c| c));
        }
    }
}
