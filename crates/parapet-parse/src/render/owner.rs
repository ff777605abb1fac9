//! The socket owner in both syntaxes: iptables' `-m owner [!]
//! --socket-exists [!] --uid-owner A[-B] [!] --gid-owner A[-B]`, nft's
//! `meta skuid`/`meta skgid` (values packed as `parapet_model::owner`
//! says: 0 no socket, 1 no file, id + 2).

use super::header::nft_values;
use super::spelling::{rerr, RenderError};
use parapet_model::*;
use std::fmt::Write;

const MAX: u128 = u32::MAX as u128;

/// The ids of a packed value set: those of sockets with a file, unpacked.
fn ids(set: &IntervalSet) -> IntervalSet {
    IntervalSet::from_ranges(
        set.intersect(&IntervalSet::range(2, MAX))
            .ranges()
            .iter()
            .map(|r| (r.0 - 2, r.1 - 2)),
    )
}

/// `lo` or `lo-hi`.
fn range(lo: u128, hi: u128) -> String {
    if lo == hi {
        lo.to_string()
    } else {
        format!("{lo}-{hi}")
    }
}

/// One field's options: `(socket-exists: None/Some(negated), the id
/// option: None/Some((negated, lo, hi)))`, or None when xt_owner cannot
/// say it.
type XtOwner = (Option<bool>, Option<(bool, u128, u128)>);

fn xt_spelling(set: &IntervalSet, socket_option: bool) -> Option<XtOwner> {
    let all_ids = MAX - 2;
    let low = (set.contains(owner::NO_SOCKET), set.contains(owner::NO_FILE));
    let u = ids(set);
    if *set == IntervalSet::point(owner::NO_SOCKET) && socket_option {
        return Some((Some(true), None));
    }
    let se = (low == (false, true)).then_some(Some(false));
    let one = |s: &IntervalSet| match s.ranges() {
        [(lo, hi)] => Some((*lo, *hi)),
        _ => None,
    };
    match low {
        (false, false) => one(&u).map(|(lo, hi)| (None, Some((false, lo, hi)))),
        (true, true) | (false, true) => {
            let se = se.flatten();
            if se.is_some() && !socket_option {
                return None;
            }
            if u == IntervalSet::range(0, all_ids) {
                return se.map(|s| (Some(s), None));
            }
            let (lo, hi) = one(&u.complement(all_ids))?;
            Some((se, Some((true, lo, hi))))
        }
        (true, false) => None,
    }
}

/// Writes the rule's owner match in iptables-save's order.
pub(super) fn ipt_owner(out: &mut String, r: &Rule) -> Result<(), RenderError> {
    let uid = r.matches.get(Field::SkUid);
    let gid = r.matches.get(Field::SkGid);
    if uid.is_none() && gid.is_none() {
        return Ok(());
    }
    let bad = || {
        rerr(r.id, "the socket owner values are not what -m owner can write (one id range or all but one, with or without --socket-exists)")
    };
    let u = uid
        .map(|s| xt_spelling(s, true).ok_or_else(bad))
        .transpose()?;
    let g = gid
        .map(|s| xt_spelling(s, false).ok_or_else(bad))
        .transpose()?;
    out.push_str(" -m owner");
    let neg = |n: bool| if n { "! " } else { "" };
    if let Some((Some(n), _)) = u {
        let _ = write!(out, " {}--socket-exists", neg(n));
    }
    for (opt, part) in [("--uid-owner", u), ("--gid-owner", g)] {
        if let Some((_, Some((n, lo, hi)))) = part {
            let _ = write!(out, " {}{opt} {}", neg(n), range(lo, hi));
        }
    }
    Ok(())
}

/// nft's `meta skuid …`, `meta skgid …`: a socket with a file whose id is
/// (or, `!=`, is not) in the set; nft has no spelling for "no socket".
pub(super) fn nft_owner(parts: &mut Vec<String>, r: &Rule) -> Result<(), RenderError> {
    for (field, key) in [(Field::SkUid, "meta skuid"), (Field::SkGid, "meta skgid")] {
        let Some(set) = r.matches.get(field) else {
            continue;
        };
        if set.contains(owner::NO_SOCKET) || set.contains(owner::NO_FILE) || set.is_empty() {
            return Err(rerr(r.id, format!("the socket owner condition also holds for a packet without a socket (-m owner ! --uid-owner, ! --socket-exists), which {key} cannot write: nft's {key} never matches such a packet")));
        }
        parts.push(format!(
            "{key} {}",
            nft_values(&ids(set), MAX - 2, |v| v.to_string())
        ));
    }
    Ok(())
}
