//! The deciding entries (and RETURNs) two decision lists share, in the
//! same order in both: what lets `diff` look only where the lists differ.
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
//! are left out, and so is a RETURN that skips no deciding entry and no
//! RETURN (the last rule of the chain a jump enters: every packet it takes
//! would go on at the same next entry anyway).
//!
//! **RETURNs** (a goto's implied one, one in the middle of a chain, as
//! Docker's `DOCKER` chain starts with `-i docker0 -j RETURN`) are matched
//! like deciding entries, by their match alone: where they resume is a
//! position, and positions differ between the lists. After matching, a
//! common RETURN pair must skip the same common entries in both lists (as
//! many common entries come before A's resume index as before B's);
//! pairs that do not are unmatched, until none is left. Then a packet that
//! matches no entry outside the common subsequence walks, in both lists,
//! the same common entries and is sent by the same common RETURNs to the
//! same common entry: the same entry decides it, or both policies. So
//! every packet whose verdict differs again lies in the box of an entry
//! outside it (a deciding entry or a RETURN), and `diff` compares only
//! those boxes, exactly, through the whole lists (RETURNs and all).
//!
//! The proof for one packet `p` that matches no unmatched entry: unmatched
//! entries do nothing to `p` (a deciding entry or RETURN that does not
//! match passes it on), and non-deciding entries and RETURNs that skip
//! nothing that counts change no verdict; what remains of either list for
//! `p` is the common subsequence, where the `k`-th entry is the same match
//! and action in both, and a RETURN at `k` resumes at the same common
//! index in both. By induction over `k`, `p` stands at the same common
//! entry in both lists at every step.

use crate::flatten::{DecisionList, Entry, EntryKind};
use std::collections::HashMap;

/// What makes two entries the same: everything but the rule id and, for a
/// RETURN, where it resumes (positions differ between the lists; whether
/// two RETURNs skip the same common entries is checked after matching, see
/// [`unmatch_misaligned_returns`]). `None` for a RETURN's verdict.
type Key<'a> = (
    &'a crate::rule::Matches,
    Option<&'a crate::rule::Verdict>,
    &'a Option<crate::rule::Limit>,
);

fn key(e: &Entry) -> Key<'_> {
    let verdict = match &e.kind {
        EntryKind::Decide(v) => Some(v),
        _ => None,
    };
    (&e.matches, verdict, &e.limit)
}

/// How the entries of two lists that can change a verdict (deciding
/// entries and the RETURNs that skip one of those) correspond.
pub(crate) struct Correspondence {
    /// A's entries outside the common subsequence (indices, ascending).
    pub changed_a: Vec<usize>,
    /// B's entries outside the common subsequence (indices, ascending).
    pub changed_b: Vec<usize>,
    /// For each entry of A in the common subsequence: its partner in B
    /// (the `k`-th common entry of A is matched with the `k`-th of B).
    pub partner: Vec<Option<usize>>,
}

/// The entries of A and of B that are not in the common subsequence of
/// the entries that can change a verdict, and the partners of those that
/// are. Every packet whose verdict differs matches a changed entry.
pub(crate) fn changed_entries(a: &DecisionList, b: &DecisionList) -> Correspondence {
    let (sa, sb) = (verdict_entries(a), verdict_entries(b));
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
    unmatch_misaligned_returns((a, &sa, &mut common_a), (b, &sb, &mut common_b));
    let pick = |s: &[usize], common: &[bool], want: bool| -> Vec<usize> {
        s.iter()
            .zip(common)
            .filter(|(_, &c)| c == want)
            .map(|(&i, _)| i)
            .collect()
    };
    let mut partner = vec![None; a.entries.len()];
    for (i, j) in pick(&sa, &common_a, true)
        .into_iter()
        .zip(pick(&sb, &common_b, true))
    {
        partner[i] = Some(j);
    }
    Correspondence {
        changed_a: pick(&sa, &common_a, false),
        changed_b: pick(&sb, &common_b, false),
        partner,
    }
}

/// The entries that can change a verdict, ascending: every deciding entry,
/// and every RETURN that skips one of those (a RETURN whose skip holds
/// only LOG, counter and jump entries, or nothing — the last rule of a
/// jumped-to chain — sends the packet where it would have gone anyway).
fn verdict_entries(l: &DecisionList) -> Vec<usize> {
    // For each index: how many deciding and RETURN entries come before it.
    let mut before = Vec::with_capacity(l.entries.len() + 1);
    before.push(0usize);
    for e in &l.entries {
        let counts = matches!(e.kind, EntryKind::Decide(_) | EntryKind::Return { .. });
        before.push(before.last().unwrap() + counts as usize);
    }
    l.entries
        .iter()
        .enumerate()
        .filter(|(i, e)| match e.kind {
            EntryKind::Decide(_) => true,
            EntryKind::Return { resume, .. } => {
                let resume = (resume as usize).clamp(i + 1, l.entries.len());
                before[resume] != before[i + 1]
            }
            _ => false,
        })
        .map(|(i, _)| i)
        .collect()
}

/// Unmarks every common RETURN pair that does not skip the same common
/// entries in both lists, until none is left. Then a packet that matches
/// no unmarked entry meets, in both lists, the same common entries in the
/// same order and is sent by the same common RETURNs to the same common
/// entry (the `k`-th common entry of A is the `k`-th of B): the same entry
/// decides it in both, or both policies do. Unmarking a RETURN only moves
/// its packets into the region `diff` compares exactly.
fn unmatch_misaligned_returns(
    (a, sa, common_a): (&DecisionList, &[usize], &mut [bool]),
    (b, sb, common_b): (&DecisionList, &[usize], &mut [bool]),
) {
    loop {
        // For each list index: how many common entries come before it.
        let common_before = |l: &DecisionList, s: &[usize], common: &[bool]| {
            let mut out = vec![0usize; l.entries.len() + 1];
            let mut count = 0;
            let mut next = s.iter().zip(common).peekable();
            for (i, slot) in out.iter_mut().enumerate() {
                while let Some((&at, &c)) = next.peek() {
                    if at >= i {
                        break;
                    }
                    count += c as usize;
                    next.next();
                }
                *slot = count;
            }
            out
        };
        let (ba, bb) = (
            common_before(a, sa, common_a),
            common_before(b, sb, common_b),
        );
        let resume = |l: &DecisionList, i: usize| match l.entries[i].kind {
            EntryKind::Return { resume, .. } => {
                Some((resume as usize).clamp(i + 1, l.entries.len()))
            }
            _ => None,
        };
        let pa = sa
            .iter()
            .zip(common_a.iter())
            .enumerate()
            .filter(|(_, (_, &c))| c);
        let pb = sb
            .iter()
            .zip(common_b.iter())
            .enumerate()
            .filter(|(_, (_, &c))| c);
        let misaligned: Vec<(usize, usize)> = pa
            .zip(pb)
            .filter_map(|((xa, (&ia, _)), (xb, (&ib, _)))| {
                let (ra, rb) = (resume(a, ia)?, resume(b, ib)?);
                (ba[ra] != bb[rb]).then_some((xa, xb))
            })
            .collect();
        if misaligned.is_empty() {
            return;
        }
        for (xa, xb) in misaligned {
            (common_a[xa], common_b[xb]) = (false, false);
        }
    }
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

    fn verdict_of(k: &EntryKind) -> Option<&crate::rule::Verdict> {
        match k {
            EntryKind::Decide(v) => Some(v),
            _ => None,
        }
    }

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
            let ka: Vec<Key> = a.iter().map(|&v| (&ms[v as usize], verdict_of(&kinds[v as usize]), &none)).collect();
            let kb: Vec<Key> = b.iter().map(|&v| (&ms[v as usize], verdict_of(&kinds[v as usize]), &none)).collect();
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
