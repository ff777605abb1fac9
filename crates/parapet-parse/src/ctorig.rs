//! The conntrack entry's tuples and protocol
//! ([`Field::CtOrigDstPort`], [`Field::CtOrigSrcPort`], [`Field::CtProto`],
//! the addresses [`Field::CtOrigSrc`], [`Field::CtOrigDst`],
//! [`Field::CtReplSrc`], [`Field::CtReplDst`]) as both syntaxes write
//! them: xt_conntrack's `--ctorigdstport`, `--ctorigsrcport`, `--ctproto`,
//! `--ctorigsrc`, `--ctorigdst`, `--ctreplsrc` and `--ctrepldst`, nft's `ct
//! original proto-dst`, `ct original proto-src`, `ct protocol` and `ct
//! original|reply ip|ip6 saddr|daddr`.
//!
//! Both read the packet's conntrack entry, so neither matches a packet
//! without one, whatever the operator: a rule using them also requires a
//! tracked state ([`crate::ctstatus::tracked`]). xt_conntrack adds a twist:
//! with `--ctstate` in the same match, a packet without an entry whose
//! state (INVALID, UNTRACKED) `--ctstate` admits matches without the other
//! options being read (`conntrack_mt`: `if (ct == NULL) return
//! info->match_flags & XT_CONNTRACK_STATE`); that is two boxes, refused
//! by the iptables parser.

use crate::common::{as_prefix, fmt_ip};
use parapet_model::*;
use std::fmt::Write;

/// The tuples' address fields, with the xt_conntrack option and the nft
/// direction and key of each (xt_conntrack's order).
pub(crate) const ADDRESSES: [(Field, &str, &str, &str); 4] = [
    (Field::CtOrigSrc, "--ctorigsrc", "original", "saddr"),
    (Field::CtOrigDst, "--ctorigdst", "original", "daddr"),
    (Field::CtReplSrc, "--ctreplsrc", "reply", "saddr"),
    (Field::CtReplDst, "--ctrepldst", "reply", "daddr"),
];

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

/// An address set as one prefix, or the complement of one: (negated,
/// address, prefix length).
fn one_prefix(set: &IntervalSet, bits: u32) -> Option<(bool, u128, u32)> {
    // `! 0.0.0.0/11` is one range too, but not a prefix: try both
    let prefix = |s: &IntervalSet| match s.ranges() {
        [(lo, hi)] => Some((*lo, as_prefix(*lo, *hi, bits)?)),
        _ => None,
    };
    if let Some((a, len)) = prefix(set) {
        return Some((false, a, len));
    }
    let (a, len) = prefix(&set.complement(width_mask(bits)))?;
    Some((true, a, len))
}

/// The rule's conditions as xt_conntrack options (` -m conntrack --ctproto
/// 17 --ctorigdst 192.0.2.0/24 --ctorigdstport 53`), empty when it has
/// none. `--ctproto` takes one protocol; an address one prefix;
/// `--ctorigdstport` a port or `A:B`.
pub(crate) fn iptables(r: &Rule, family: Family) -> Result<String, String> {
    let mut out = String::new();
    let bits = family.addr_bits();
    let mut written = FIELDS[..1]
        .iter()
        .map(|(f, o, _)| (*f, *o))
        .collect::<Vec<_>>();
    written.extend(ADDRESSES.iter().map(|(f, o, _, _)| (*f, *o)));
    written.extend(FIELDS[1..].iter().map(|(f, o, _)| (*f, *o)));
    for (f, opt) in written {
        let Some(set) = r.matches.get(f) else {
            continue;
        };
        if f.is_address() {
            let (neg, a, len) = one_prefix(set, bits).ok_or_else(|| format!("the rule's {} is not one prefix (nor the complement of one), which {opt} cannot write", f.name()))?;
            if out.is_empty() {
                out.push_str(" -m conntrack");
            }
            let not = if neg { "! " } else { "" };
            let _ = write!(out, " {not}{opt} {}", fmt_ip(family, a));
            if len < bits {
                let _ = write!(out, "/{len}");
            }
            continue;
        }
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
    for (f, dir, key) in ADDRESSES.map(|(f, _, d, k)| (f, d, k)) {
        let Some(set) = r.matches.get(f) else {
            continue;
        };
        let family = match r.matches.get(Field::Family).map(|s| s.ranges()) {
            Some([(4, 4)]) => Family::V4,
            Some([(6, 6)]) => Family::V6,
            _ => {
                return Err(format!(
                    "'ct {dir} ip|ip6 {key}' needs the rule to be restricted to one family"
                ))
            }
        };
        let bits = family.addr_bits();
        if set.is_empty() {
            return Err(format!("the rule's {} matches no address", f.name()));
        }
        // the shorter of the set and its complement (`!=`), as nft sets
        let comp = set.complement(width_mask(bits));
        let (neg, items) = if comp.ranges().len() < set.ranges().len() {
            (true, &comp)
        } else {
            (false, set)
        };
        let items: Vec<String> = items
            .ranges()
            .iter()
            .map(|&(lo, hi)| match as_prefix(lo, hi, bits) {
                Some(len) if len == bits => fmt_ip(family, lo),
                Some(len) => format!("{}/{len}", fmt_ip(family, lo)),
                None => format!("{}-{}", fmt_ip(family, lo), fmt_ip(family, hi)),
            })
            .collect();
        let value = match items.as_slice() {
            [one] => one.clone(),
            _ => format!("{{ {} }}", items.join(", ")),
        };
        let ip = if family == Family::V4 { "ip" } else { "ip6" };
        let op = if neg { "!= " } else { "" };
        out.push(format!("ct {dir} {ip} {key} {op}{value}"));
    }
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
