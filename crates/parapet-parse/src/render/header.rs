//! The IP header fields (TTL / hop limit, DSCP, length) in both syntaxes:
//! iptables' `-m ttl`/`-m hl`, `-m dscp`, `-m length`; nft's `ip ttl`,
//! `ip6 hoplimit`, `ip dscp`, `ip6 dscp`, `meta length`; and the Ethernet
//! source address (`-m mac --mac-source`, `ether saddr`).

use super::spelling::{rerr, spell, RenderError};
use crate::common::DSCP_CLASSES;
use parapet_model::*;
use std::fmt::Write;

/// Writes the rule's TTL, DSCP and length matches in iptables-save syntax.
pub(super) fn ipt_header(out: &mut String, r: &Rule, family: Family) -> Result<(), RenderError> {
    if let Some(set) = r.matches.get(Field::Ttl) {
        let (module, opt) = match family {
            Family::V4 => ("ttl", "--ttl"),
            Family::V6 => ("hl", "--hl"),
        };
        out.push_str(&ipt_ttl(set, module, opt).ok_or_else(|| {
            rerr(r.id, format!("the {module} values are not one value, one range or all but one value, which -m {module} cannot write"))
        })?);
    }
    if let Some(set) = r.matches.get(Field::Dscp) {
        let s = spell(set, 0x3f, |s| point(s).map(|p| (1, p))).ok_or_else(|| {
            rerr(
                r.id,
                "the DSCP values are not one value nor all but one, which -m dscp cannot write",
            )
        })?;
        let neg = if s.neg { "! " } else { "" };
        let _ = write!(out, " -m dscp {neg}--dscp 0x{:02x}", s.items);
    }
    if let Some(set) = r.matches.get(Field::Length) {
        // xt_length compares the 16-bit header length: lengths above it do
        // not exist for iptables.
        let set = set.intersect(&IntervalSet::range(0, 0xffff));
        let s = spell(&set, 0xffff, |s| match s.ranges() {
            [(lo, hi)] => Some((1, (*lo, *hi))),
            _ => None,
        })
        .ok_or_else(|| {
            rerr(
                r.id,
                "the lengths are not one range nor all but one range, which -m length cannot write",
            )
        })?;
        let neg = if s.neg { "! " } else { "" };
        let (lo, hi) = s.items;
        let range = if lo == hi {
            lo.to_string()
        } else {
            format!("{lo}:{hi}")
        };
        let _ = write!(out, " -m length {neg}--length {range}");
    }
    if let Some(set) = r.matches.get(Field::MacSrc) {
        let (neg, m) = mac_spelling(set).ok_or_else(|| {
            rerr(
                r.id,
                "the source MACs are not one address nor all but one, which -m mac cannot write",
            )
        })?;
        let neg = if neg { "! " } else { "" };
        let _ = write!(out, " -m mac {neg}--mac-source {}", mac::format(m));
    }
    Ok(())
}

/// A source-MAC value set as `(negated, address)`: one present address, or
/// every present address but one (`parapet_model::mac`).
fn mac_spelling(set: &IntervalSet) -> Option<(bool, u64)> {
    if let Some(m) = point(set).and_then(mac::from_key_value) {
        return Some((false, m));
    }
    let present = IntervalSet::range(mac::PRESENT, 2 * mac::PRESENT - 1);
    let missing = present.difference(set);
    let m = point(&missing).and_then(mac::from_key_value)?;
    (mac::match_values(m, true) == *set).then_some((true, m))
}

/// `-m ttl --ttl-eq N`, `! --ttl-eq N`, `--ttl-lt N`, `--ttl-gt N`, or a
/// range as a `--ttl-gt` and a `--ttl-lt` match.
fn ipt_ttl(set: &IntervalSet, module: &str, opt: &str) -> Option<String> {
    if let Some(p) = point(set) {
        return Some(format!(" -m {module} {opt}-eq {p}"));
    }
    if let Some(p) = point(&set.complement(0xff)) {
        return Some(format!(" -m {module} ! {opt}-eq {p}"));
    }
    let [(lo, hi)] = set.ranges() else {
        return None;
    };
    let mut out = String::new();
    if *lo > 0 {
        let _ = write!(out, " -m {module} {opt}-gt {}", lo - 1);
    }
    if *hi < 0xff {
        let _ = write!(out, " -m {module} {opt}-lt {}", hi + 1);
    }
    Some(out)
}

fn point(set: &IntervalSet) -> Option<u128> {
    match set.ranges() {
        [(lo, hi)] if lo == hi => Some(*lo),
        _ => None,
    }
}

/// Pushes the rule's TTL, DSCP and length matches in nft syntax.
pub(super) fn nft_header(
    parts: &mut Vec<String>,
    r: &Rule,
    family: Option<Family>,
) -> Result<(), RenderError> {
    let need_family = |what: &str| {
        family.ok_or_else(|| {
            rerr(
                r.id,
                format!("{what} needs the rule to be restricted to IPv4 or IPv6"),
            )
        })
    };
    if let Some(set) = r.matches.get(Field::Ttl) {
        let key = match need_family("a TTL / hop limit match")? {
            Family::V4 => "ip ttl",
            Family::V6 => "ip6 hoplimit",
        };
        parts.push(format!(
            "{key} {}",
            nft_values(set, 0xff, |v| v.to_string())
        ));
    }
    if let Some(set) = r.matches.get(Field::Dscp) {
        let key = match need_family("a DSCP match")? {
            Family::V4 => "ip dscp",
            Family::V6 => "ip6 dscp",
        };
        let name = |v: u128| {
            DSCP_CLASSES
                .iter()
                .find(|(_, d)| *d as u128 == v)
                .map_or_else(|| format!("0x{v:02x}"), |(n, _)| n.to_ascii_lowercase())
        };
        parts.push(format!("{key} {}", nft_values(set, 0x3f, name)));
    }
    if let Some(set) = r.matches.get(Field::Length) {
        parts.push(format!(
            "meta length {}",
            nft_values(set, 0xffff_ffff, |v| v.to_string())
        ));
    }
    if let Some(set) = r.matches.get(Field::MacSrc) {
        let (neg, m) = mac_spelling(set).ok_or_else(|| {
            rerr(r.id, "the source MACs are not one address nor all but one, which this listing cannot write")
        })?;
        let op = if neg { "!= " } else { "" };
        parts.push(format!("ether saddr {op}{}", mac::format(m)));
    }
    Ok(())
}

/// `V`, `A-B`, `{ V, A-B }` or `!= …`: the set or its complement, whichever
/// is shorter. `set` is not empty (an empty rule is refused before).
pub(super) fn nft_values(set: &IntervalSet, max: u128, name: impl Fn(u128) -> String) -> String {
    let s = spell(set, max, |s| {
        (!s.is_empty()).then(|| (s.ranges().len(), s.ranges().to_vec()))
    })
    .expect("non-empty");
    let items: Vec<String> = s
        .items
        .iter()
        .map(|&(lo, hi)| {
            if lo == hi {
                name(lo)
            } else {
                format!("{lo}-{hi}")
            }
        })
        .collect();
    let body = if items.len() == 1 {
        items[0].clone()
    } else {
        format!("{{ {} }}", items.join(", "))
    };
    if s.neg {
        format!("!= {body}")
    } else {
        body
    }
}
