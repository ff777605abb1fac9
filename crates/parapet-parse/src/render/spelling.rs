//! What both renderers share: the error, choosing between a set and its
//! complement, and the spellings iptables and nft agree on.

use crate::common::tcp_flags_mask;
use parapet_model::*;
use std::fmt;

/// A ruleset that cannot be written in the requested syntax.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RenderError {
    /// The rule that cannot be expressed; 0 for table- or chain-level
    /// problems.
    pub rule_id: u32,
    /// What cannot be expressed.
    pub message: String,
}

impl fmt::Display for RenderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.rule_id == 0 {
            f.write_str(&self.message)
        } else {
            write!(f, "rule {}: {}", self.rule_id, self.message)
        }
    }
}

impl std::error::Error for RenderError {}

pub(super) fn rerr(rule_id: u32, message: impl Into<String>) -> RenderError {
    RenderError {
        rule_id,
        message: message.into(),
    }
}

/// The family a rule's [`Field::Family`] constraint pins, if one.
pub(super) fn rule_family(r: &Rule) -> Option<Family> {
    match r.matches.get(Field::Family).map(|s| s.ranges()) {
        Some([(4, 4)]) => Some(Family::V4),
        Some([(6, 6)]) => Some(Family::V6),
        _ => None,
    }
}

/// Elements that spell a set in a syntax: prefixes, ranges or values.
/// `neg` says the complement was spelled (with `!`).
pub(super) struct Spelled<T> {
    pub(super) neg: bool,
    pub(super) items: T,
}

/// The set, or its complement when that is shorter, as long as `f` can spell it.
pub(super) fn spell<T>(
    set: &IntervalSet,
    max: u128,
    f: impl Fn(&IntervalSet) -> Option<(usize, T)>,
) -> Option<Spelled<T>> {
    let pos = f(set);
    let comp = set.complement(max);
    let neg = f(&comp);
    match (pos, neg) {
        (Some((a, p)), Some((b, _))) if a <= b => Some(Spelled {
            neg: false,
            items: p,
        }),
        (_, Some((_, n))) => Some(Spelled {
            neg: true,
            items: n,
        }),
        (Some((_, p)), None) => Some(Spelled {
            neg: false,
            items: p,
        }),
        (None, None) => None,
    }
}

/// An interface set as one name or one `prefix+` wildcard. The string is the
/// iptables spelling; `wild` says it is a wildcard.
pub(super) fn iface_atom(set: &IntervalSet) -> Option<(String, bool)> {
    let [(lo, hi)] = set.ranges() else {
        return None;
    };
    let name = IfName(*lo);
    let bytes = name.as_bytes();
    let text = String::from_utf8(bytes.clone()).ok()?;
    // Names must survive a round trip through the packing.
    if IfName::new(&text)?.0 != *lo {
        return None;
    }
    if lo == hi {
        return (!text.is_empty() && !text.ends_with('+') && !text.ends_with('*'))
            .then_some((text, false));
    }
    (IfName::wildcard_range(&text) == (*lo, *hi) && !text.is_empty()).then_some((text, true))
}

/// The single protocol a rule is restricted to, if it is one.
pub(super) fn single_proto(r: &Rule) -> Option<u8> {
    match r.matches.get(Field::Proto).map(|s| s.ranges()) {
        Some([(a, b)]) if a == b => Some(*a as u8),
        _ => None,
    }
}

/// The protocol whose ports a rule can match: iptables' port match module
/// and nft's port selector have the protocol's name.
pub(super) fn port_protocol(proto: Option<u8>) -> Option<&'static str> {
    match proto {
        Some(6) => Some("tcp"),
        Some(17) => Some("udp"),
        Some(132) => Some("sctp"),
        Some(136) => Some("udplite"),
        _ => None,
    }
}

/// A TCP flags set as `flags & MASK == COMP` (items are `(MASK, COMP)`),
/// or its negation; the rule must be restricted to tcp.
pub(super) fn spell_tcp_flags(
    set: &IntervalSet,
    proto: Option<u8>,
    id: u32,
) -> Result<Spelled<(u8, u8)>, RenderError> {
    if proto != Some(6) {
        return Err(rerr(id, "TCP flags need the rule to be restricted to tcp"));
    }
    spell(set, 0xff, |s| tcp_flags_mask(s).map(|m| (1, m))).ok_or_else(|| {
        rerr(
            id,
            "the TCP flags set is not 'flags & MASK == COMP' nor its negation",
        )
    })
}

/// A ct state set as state names, positive or `!`.
pub(super) fn ct_states(set: &IntervalSet, id: u32) -> Result<(bool, Vec<CtState>), RenderError> {
    let known = IntervalSet::range(0, CtState::ALL.len() as u128 - 1);
    let names = |s: &IntervalSet| -> Option<Vec<CtState>> {
        (s.is_subset(&known) && !s.is_empty()).then(|| {
            CtState::ALL
                .iter()
                .copied()
                .filter(|c| s.contains(*c as u128))
                .collect()
        })
    };
    if let Some(n) = names(set) {
        return Ok((false, n));
    }
    names(&set.complement(0xff))
        .map(|n| (true, n))
        .ok_or_else(|| rerr(id, "ct state set holds values that are no state"))
}

/// The set reference a [`Field::Set`] match names.
pub(super) fn set_ref(rs: &Ruleset, n: u16, id: u32) -> Result<&SetRef, RenderError> {
    rs.set_refs
        .get(n as usize)
        .ok_or_else(|| rerr(id, format!("set reference {n} does not exist")))
}

/// The selector of a rule's ports: its one port protocol's (`tcp`), or
/// `th` when it matches several port protocols (`meta l4proto { tcp, udp
/// }`): nft's transport-header ports.
pub(super) fn port_selector<'a>(r: &Rule, port_key: Option<&'a str>) -> Option<&'a str> {
    let ports = IntervalSet::from_ranges([6u128, 17, 132, 136].map(|p| (p, p)));
    let th = r
        .matches
        .get(Field::Proto)
        .is_some_and(|p| p.intersect(&ports) == *p)
        .then_some("th");
    port_key.or(th)
}
