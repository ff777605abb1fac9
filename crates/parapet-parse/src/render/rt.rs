//! The first IPv6 routing header in both syntaxes: ip6tables' `-m rt [!]
//! --rt-type T [!] --rt-segsleft A[:B] [!] --rt-len BYTES`, nft's `rt
//! type|seg-left|hdrlength` and `exthdr rt exists|missing`. The field's
//! values are factored back into their three byte sets
//! (`parapet_model::routing::factor`).

use super::header::nft_values;
use super::spelling::{rerr, RenderError};
use parapet_model::routing::{self, BYTE_MAX};
use parapet_model::*;
use std::fmt::Write;

/// The three byte sets of the rule's routing constraint; `None` without
/// one.
fn parts(r: &Rule, syntax: &str) -> Result<Option<(IntervalSet, [IntervalSet; 3])>, RenderError> {
    let Some(v) = r.matches.get(Field::Routing) else {
        return Ok(None);
    };
    if *v == IntervalSet::point(0) {
        return Ok(Some((
            v.clone(),
            [
                IntervalSet::empty(),
                IntervalSet::empty(),
                IntervalSet::empty(),
            ],
        )));
    }
    let p = routing::factor(v).ok_or_else(|| {
        rerr(r.id, format!("the routing header condition is not one type, segments-left and length condition together, which {syntax} cannot write"))
    })?;
    Ok(Some((v.clone(), p)))
}

/// `(negated, lo, hi)` when the set or its complement is one range.
fn one_range(set: &IntervalSet) -> Option<(bool, u128, u128)> {
    match (set.ranges(), set.complement(BYTE_MAX).ranges()) {
        ([(lo, hi)], _) => Some((false, *lo, *hi)),
        (_, [(lo, hi)]) => Some((true, *lo, *hi)),
        _ => None,
    }
}

/// `(negated, v)` when the set or its complement is one value.
fn one_value(set: &IntervalSet) -> Option<(bool, u128)> {
    match (set.ranges(), set.complement(BYTE_MAX).ranges()) {
        ([(lo, hi)], _) if lo == hi => Some((false, *lo)),
        (_, [(lo, hi)]) if lo == hi => Some((true, *lo)),
        _ => None,
    }
}

/// Writes the rule's `-m rt` (ip6tables-save's option order).
pub(super) fn ipt_rt(out: &mut String, r: &Rule) -> Result<(), RenderError> {
    let Some((v, [types, segs, lens])) = parts(r, "ip6tables")? else {
        return Ok(());
    };
    if v == IntervalSet::point(0) {
        return Err(rerr(r.id, "the rule matches packets without a routing header (nft exthdr rt missing), which ip6tables' -m rt cannot write"));
    }
    out.push_str(" -m rt");
    let neg = |n: bool| if n { "! " } else { "" };
    let full = |s: &IntervalSet| s.is_full(BYTE_MAX);
    let bad = |what: &str| {
        rerr(r.id, format!("the routing header's {what} values are not what -m rt can write (one value or all but one; segments left: one range or all but one range)"))
    };
    if !full(&types) {
        let (n, t) = one_value(&types).ok_or_else(|| bad("type"))?;
        let _ = write!(out, " {}--rt-type {t}", neg(n));
    }
    if !full(&segs) {
        let (n, lo, hi) = one_range(&segs).ok_or_else(|| bad("segments-left"))?;
        let _ = if lo == hi {
            write!(out, " {}--rt-segsleft {lo}", neg(n))
        } else {
            write!(out, " {}--rt-segsleft {lo}:{hi}", neg(n))
        };
    }
    if !full(&lens) {
        let (n, b) = one_value(&lens).ok_or_else(|| bad("length"))?;
        let _ = write!(out, " {}--rt-len {}", neg(n), (b + 1) * 8);
    }
    Ok(())
}

/// nft's `rt type …`, `rt seg-left …`, `rt hdrlength …` (the length
/// byte, as nft reads it), or `exthdr rt exists|missing`.
pub(super) fn nft_rt(parts_out: &mut Vec<String>, r: &Rule) -> Result<(), RenderError> {
    let Some((v, sets)) = parts(r, "nft")? else {
        return Ok(());
    };
    if v == IntervalSet::point(0) {
        parts_out.push("exthdr rt missing".into());
        return Ok(());
    }
    let mut any = false;
    for (set, key) in sets.iter().zip(["rt type", "rt seg-left", "rt hdrlength"]) {
        if !set.is_full(BYTE_MAX) {
            any = true;
            parts_out.push(format!(
                "{key} {}",
                nft_values(set, BYTE_MAX, |v| v.to_string())
            ));
        }
    }
    if !any {
        parts_out.push("exthdr rt exists".into());
    }
    Ok(())
}
