//! Masked comparisons ([`MaskedMatch`]) and the marks written back: nft's
//! `SEL & MASK ==|!= VALUE`, `meta mark`, `ct mark`; iptables-save's
//! `-m mark`/`-m connmark --mark V/M` (its only masked spelling).

use super::spelling::{rerr, RenderError};
use parapet_model::*;

/// nft's `ip saddr & ::ffff == ::1` for each masked comparison of `r`.
pub(super) fn nft_masked(
    parts: &mut Vec<String>,
    r: &Rule,
    family: Option<Family>,
    port_key: Option<&str>,
) -> Result<(), RenderError> {
    for m in r.matches.masked() {
        let addr = |dir: &str| -> Result<(String, Family), RenderError> {
            let fam = family.ok_or_else(|| rerr(r.id, "a masked address needs one family"))?;
            let key = if fam == Family::V4 { "ip" } else { "ip6" };
            Ok((format!("{key} {dir}"), fam))
        };
        let (sel, fam) = match m.field {
            Field::SrcAddr => addr("saddr").map(|(s, f)| (s, Some(f)))?,
            Field::DstAddr => addr("daddr").map(|(s, f)| (s, Some(f)))?,
            Field::SrcPort | Field::DstPort => {
                let pk = super::spelling::port_selector(r, port_key).ok_or_else(|| {
                    rerr(r.id, "a masked port needs one of tcp, udp, sctp, udplite")
                })?;
                let dir = if m.field == Field::SrcPort {
                    "sport"
                } else {
                    "dport"
                };
                (format!("{pk} {dir}"), None)
            }
            Field::Proto => ("meta l4proto".into(), None),
            Field::Mark => ("meta mark".into(), None),
            Field::CtMark => ("ct mark".into(), None),
            other => {
                return Err(rerr(
                    r.id,
                    format!("a masked comparison on {other} has no nft spelling here"),
                ))
            }
        };
        let show = |v: u128| match fam {
            Some(f) => to_ip(f, v).to_string(),
            None => format!("{v:#x}"),
        };
        let op = if m.negate { "!=" } else { "==" };
        parts.push(format!("{sel} & {} {op} {}", show(m.mask), show(m.value)));
    }
    Ok(())
}

/// iptables-save writes masked marks as `-m mark --mark V/M`; another
/// masked comparison (its `-s ADDR/MASK` is not read back by parapet yet)
/// is an error naming the rule.
pub(super) fn iptables_masked(out: &mut String, r: &Rule) -> Result<(), RenderError> {
    for m in r.matches.masked() {
        let module = match m.field {
            Field::Mark => "mark",
            Field::CtMark => "connmark",
            _ => return Err(rerr(
                r.id,
                format!(
                    "the masked comparison '{} & {:#x}' has no iptables-save spelling; list it with --format nft",
                    m.field, m.mask
                ),
            )),
        };
        let neg = if m.negate { "! " } else { "" };
        out.push_str(&format!(
            " -m {module} {neg}--mark {:#x}/{:#x}",
            m.value, m.mask
        ));
    }
    Ok(())
}

/// A mark constraint (intervals) as `(negated, value, mask)`: the masked
/// comparison whose lowering gives exactly these intervals, or its
/// negation; `None` when it is no such thing (`meta mark { 1, 5 }`).
fn mark_form(field: Field, set: &IntervalSet) -> Option<(bool, u32, u32)> {
    let direct = |set: &IntervalSet| -> Option<(u32, u32)> {
        let r = set.ranges();
        let &(base, hi) = r.first()?;
        let span = hi - base;
        if span & (span + 1) != 0 {
            return None;
        }
        let varying = r.iter().fold(0u128, |acc, &(lo, _)| acc | (lo ^ base));
        let mask = !(varying | span) & 0xffff_ffff;
        let value = base & mask;
        let mut m = Matches::any();
        crate::common::constrain_masked(&mut m, field, 32, mask, value, false);
        (m.get(field) == Some(set) && !m.has_masked()).then_some((value as u32, mask as u32))
    };
    if let Some((v, m)) = direct(set) {
        return Some((false, v, m));
    }
    direct(&set.complement(0xffff_ffff)).map(|(v, m)| (true, v, m))
}

/// `-m mark --mark V[/M]`, `-m connmark --mark V[/M]` for the mark
/// constraints of `r`.
pub(super) fn iptables_marks(out: &mut String, r: &Rule) -> Result<(), RenderError> {
    for (field, module) in [(Field::Mark, "mark"), (Field::CtMark, "connmark")] {
        let Some(set) = r.matches.get(field) else {
            continue;
        };
        let (neg, v, m) = mark_form(field, set).ok_or_else(|| {
            rerr(
                r.id,
                format!("the {field} values are no VALUE/MASK (nor its negation): iptables-save cannot write them; list with --format nft"),
            )
        })?;
        let neg = if neg { "! " } else { "" };
        if m == u32::MAX {
            out.push_str(&format!(" -m {module} {neg}--mark {v:#x}"));
        } else {
            out.push_str(&format!(" -m {module} {neg}--mark {v:#x}/{m:#x}"));
        }
    }
    Ok(())
}

/// `meta mark …`, `ct mark …` for the mark constraints of `r`.
pub(super) fn nft_marks(parts: &mut Vec<String>, r: &Rule) {
    for (field, sel) in [(Field::Mark, "meta mark"), (Field::CtMark, "ct mark")] {
        let Some(set) = r.matches.get(field) else {
            continue;
        };
        match mark_form(field, set) {
            Some((neg, v, u32::MAX)) => {
                let op = if neg { "!= " } else { "" };
                parts.push(format!("{sel} {op}{v:#x}"));
            }
            Some((neg, v, m)) => {
                let op = if neg { "!=" } else { "==" };
                parts.push(format!("{sel} & {m:#x} {op} {v:#x}"));
            }
            None => {
                let items: Vec<String> = set
                    .ranges()
                    .iter()
                    .map(|&(a, b)| {
                        if a == b {
                            format!("{a:#x}")
                        } else {
                            format!("{a:#x}-{b:#x}")
                        }
                    })
                    .collect();
                parts.push(format!("{sel} {{ {} }}", items.join(", ")));
            }
        }
    }
}
