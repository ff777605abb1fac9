//! The conntrack entry's original tuple and protocol
//! ([`Field::CtOrigDstPort`], [`Field::CtOrigSrcPort`], [`Field::CtProto`])
//! as both syntaxes write them: xt_conntrack's `--ctorigdstport`,
//! `--ctorigsrcport` and `--ctproto`, nft's `ct original proto-dst`,
//! `ct original proto-src` and `ct protocol`.
//!
//! Both read the packet's conntrack entry, so neither matches a packet
//! without one, whatever the operator: a rule using them also requires a
//! tracked state ([`crate::ctstatus::tracked`]). xt_conntrack adds a twist:
//! with `--ctstate` in the same match, a packet without an entry whose
//! state (INVALID, UNTRACKED) `--ctstate` admits matches without the other
//! options being read (`conntrack_mt`: `if (ct == NULL) return
//! info->match_flags & XT_CONNTRACK_STATE`); that is two boxes, refused
//! by the iptables parser.

use parapet_model::*;
use std::fmt::Write;

/// The fields of this module, with the xt_conntrack option and nft
/// expression of each.
const FIELDS: [(Field, &str, &str); 3] = [
    (Field::CtProto, "--ctproto", "ct protocol"),
    (
        Field::CtOrigSrcPort,
        "--ctorigsrcport",
        "ct original proto-src",
    ),
    (
        Field::CtOrigDstPort,
        "--ctorigdstport",
        "ct original proto-dst",
    ),
];

/// One condition as an inclusive range, and whether it is negated; None
/// when the set is neither one range nor the complement of one.
fn one_range(set: &IntervalSet, max: u128) -> Option<(bool, u128, u128)> {
    match set.ranges() {
        [(lo, hi)] => Some((false, *lo, *hi)),
        _ => match set.complement(max).ranges() {
            [(lo, hi)] => Some((true, *lo, *hi)),
            _ => None,
        },
    }
}

fn unwritable(f: Field, opt: &str) -> String {
    format!("the rule's {} is not one value or range (nor the complement of one), which {opt} cannot write", f.name())
}

/// The rule's conditions as xt_conntrack options (` -m conntrack --ctproto
/// 17 --ctorigdstport 53`), empty when it has none. `--ctproto` takes one
/// protocol; `--ctorigdstport` a port or `A:B`.
pub(crate) fn iptables(r: &Rule) -> Result<String, String> {
    let mut out = String::new();
    for (f, opt, _) in FIELDS {
        let Some(set) = r.matches.get(f) else {
            continue;
        };
        let (neg, lo, hi) = one_range(set, f.max_value()).ok_or_else(|| unwritable(f, opt))?;
        if f == Field::CtProto && lo != hi {
            return Err(unwritable(f, opt));
        }
        if out.is_empty() {
            out.push_str(" -m conntrack");
        }
        let _ = write!(out, " {}{opt} {lo}", if neg { "! " } else { "" });
        if hi != lo {
            let _ = write!(out, ":{hi}");
        }
    }
    Ok(out)
}

/// The rule's conditions as nft expressions (`ct protocol 17`, `ct
/// original proto-dst != 53-60`). nft types `proto-dst` by the protocol
/// an earlier expression fixes (`ct protocol P`, `meta l4proto P`; without
/// one it refuses "Can't parse symbolic invalid expressions"): `ct
/// protocol` is written first, and without one value of it the packet's
/// single protocol, if the rule has one, as `meta l4proto P` (the same
/// condition the rule already has).
pub(crate) fn nft(r: &Rule) -> Result<Vec<String>, String> {
    let single = |f: Field| match r.matches.get(f).map(|s| s.ranges()) {
        Some([(lo, hi)]) if lo == hi => Some(*lo),
        _ => None,
    };
    let mut out = Vec::new();
    for (f, _, expr) in FIELDS {
        let Some(set) = r.matches.get(f) else {
            continue;
        };
        let (neg, lo, hi) = one_range(set, f.max_value()).ok_or_else(|| unwritable(f, expr))?;
        let typed = out.iter().any(|e: &String| e.starts_with("meta l4proto"));
        if matches!(f, Field::CtOrigDstPort | Field::CtOrigSrcPort)
            && single(Field::CtProto).is_none()
            && !typed
        {
            match single(Field::Proto) {
                Some(p) => out.push(format!("meta l4proto {p}")),
                None => return Err(format!("nft types '{expr}' by a protocol written before it ('ct protocol P' or 'meta l4proto P'), which this rule does not have")),
            }
        }
        let op = if neg { "!= " } else { "" };
        out.push(if lo == hi {
            format!("{expr} {op}{lo}")
        } else {
            format!("{expr} {op}{lo}-{hi}")
        });
    }
    Ok(out)
}
