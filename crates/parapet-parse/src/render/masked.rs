//! Masked comparisons ([`MaskedMatch`]) written back: nft's
//! `SEL & MASK ==|!= VALUE`; iptables-save has no general spelling.

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

/// iptables-save cannot write a masked comparison (its `-s ADDR/MASK`
/// is not read back by parapet yet): an error naming the rule.
pub(super) fn iptables_masked(r: &Rule) -> Result<(), RenderError> {
    match r.matches.masked().first() {
        None => Ok(()),
        Some(m) => Err(rerr(
            r.id,
            format!(
                "the masked comparison '{} & {:#x}' has no iptables-save spelling; list it with --format nft",
                m.field, m.mask
            ),
        )),
    }
}
