//! [`Matches`]: the constraints of one rule, per field, with the masked
//! comparisons and `-m string` matches that ride along.

use crate::field::Field;
use crate::interval::IntervalSet;
use crate::masked::MaskedMatch;
use crate::packet::Packet;
use crate::string_match::StringMatch;
use serde::{Deserialize, Serialize};

/// The constraints of one rule: per field, the values it accepts. A field
/// that is not listed accepts every value. Kept sorted by field. Masked
/// comparisons that are too many intervals ride along apart
/// ([`MaskedMatch`]): most code sees only the intervals and must treat a
/// rule with masked constraints as matching a subset of its box (see
/// [`Matches::has_masked`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Matches {
    fields: Vec<(Field, IntervalSet)>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    masked: Vec<MaskedMatch>,
    /// `-m string` matches: like the masked comparisons, they hold for
    /// part of the box only ([`Matches::has_payload`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    payload: Vec<StringMatch>,
}

impl Matches {
    /// No constraint: matches every packet.
    pub fn any() -> Self {
        Matches::default()
    }

    /// Adds a constraint; a second constraint on the same field intersects
    /// with the first (`-p tcp` and `meta l4proto tcp` agree, `--dport 22
    /// --dport 80` matches nothing).
    pub fn constrain(&mut self, field: Field, values: IntervalSet) {
        match self.fields.binary_search_by_key(&field, |(f, _)| *f) {
            Ok(i) => self.fields[i].1 = self.fields[i].1.intersect(&values),
            Err(i) => {
                if values.is_full(field.max_value()) {
                    return;
                }
                self.fields.insert(i, (field, values))
            }
        }
    }

    /// Adds a masked comparison (kept sorted, each one once).
    pub fn constrain_masked(&mut self, m: MaskedMatch) {
        if let Err(i) = self.masked.binary_search(&m) {
            self.masked.insert(i, m);
        }
    }

    /// Adds a `-m string` match (kept sorted, each one once).
    pub fn constrain_payload(&mut self, m: StringMatch) {
        if let Err(i) = self.payload.binary_search(&m) {
            self.payload.insert(i, m);
        }
    }

    /// The `-m string` matches.
    pub fn payload(&self) -> &[StringMatch] {
        &self.payload
    }

    /// True when a `-m string` match rides along: the rule matches only
    /// part of the box its intervals describe (as with
    /// [`Matches::has_masked`]).
    pub fn has_payload(&self) -> bool {
        !self.payload.is_empty()
    }

    /// What `self` adds to `base` (which it includes, as the whole
    /// conjunction of a rule includes the matches before its stateful
    /// one): the fields whose values differ, and the masked comparisons
    /// `base` does not have.
    pub fn beyond(&self, base: &Matches) -> Matches {
        Matches {
            fields: self
                .fields
                .iter()
                .filter(|(f, v)| base.get(*f) != Some(v))
                .cloned()
                .collect(),
            masked: self
                .masked
                .iter()
                .filter(|m| !base.masked.contains(m))
                .cloned()
                .collect(),
            payload: self
                .payload
                .iter()
                .filter(|m| !base.payload.contains(m))
                .cloned()
                .collect(),
        }
    }

    /// `self` without its constraint on `field`.
    pub fn without(&self, field: Field) -> Matches {
        Matches {
            fields: self
                .fields
                .iter()
                .filter(|(f, _)| *f != field)
                .cloned()
                .collect(),
            masked: self.masked.clone(),
            payload: self.payload.clone(),
        }
    }

    /// `self` without its masked comparisons on `field`.
    pub fn without_masked(&self, field: Field) -> Matches {
        Matches {
            fields: self.fields.clone(),
            masked: self
                .masked
                .iter()
                .filter(|m| m.field != field)
                .cloned()
                .collect(),
            payload: self.payload.clone(),
        }
    }

    /// The conjunction of both.
    pub fn and(&self, other: &Matches) -> Matches {
        let mut out = self.clone();
        for (f, v) in &other.fields {
            out.constrain(*f, v.clone());
        }
        for m in &other.masked {
            out.constrain_masked(m.clone());
        }
        for m in &other.payload {
            out.constrain_payload(m.clone());
        }
        out
    }

    /// The constraint on `field`, if any.
    pub fn get(&self, field: Field) -> Option<&IntervalSet> {
        self.fields
            .iter()
            .find(|(f, _)| *f == field)
            .map(|(_, v)| v)
    }

    /// The interval constraints, sorted by field (not the masked ones:
    /// [`Matches::masked`]).
    pub fn iter(&self) -> impl Iterator<Item = &(Field, IntervalSet)> {
        self.fields.iter()
    }

    /// The masked comparisons.
    pub fn masked(&self) -> &[MaskedMatch] {
        &self.masked
    }

    /// True when some masked comparison rides along: the rule matches only
    /// part of the box its intervals describe.
    pub fn has_masked(&self) -> bool {
        !self.masked.is_empty()
    }

    /// True when it constrains ports, TCP flags or the ICMP type: what
    /// iptables' tcp/udp/icmp/multiport matches and nft's `tcp dport`, `th`,
    /// `icmp type` read from the transport header, which a non-first
    /// fragment does not have (so they never match one).
    pub fn reads_transport_header(&self) -> bool {
        self.fields.iter().any(|(f, _)| transport_header_field(*f))
            || self.masked.iter().any(|m| transport_header_field(m.field))
    }

    /// True when some field accepts no value, so no packet can match.
    pub fn is_unsatisfiable(&self) -> bool {
        self.fields.iter().any(|(_, v)| v.is_empty())
            || self.masked.iter().any(|m| m.is_unsatisfiable())
    }

    /// Number of constraints (intervals, masked, `-m string`).
    pub fn len(&self) -> usize {
        self.fields.len() + self.masked.len() + self.payload.len()
    }

    /// True when nothing is constrained.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty() && self.masked.is_empty() && self.payload.is_empty()
    }

    /// The first constraint the packet fails, if any. `set_bit(n)`
    /// answers membership for [`Field::Set`] constraints.
    pub fn first_failure(
        &self,
        pkt: &Packet,
        set_bit: &mut dyn FnMut(u16) -> bool,
    ) -> Option<Field> {
        let failed = self.fields.iter().find(|(f, v)| match f {
            Field::Set(n) => !v.contains(set_bit(*n) as u128),
            _ => !v.contains(pkt.value(*f)),
        });
        if let Some((f, _)) = failed {
            return Some(*f);
        }
        if let Some(m) = self.masked.iter().find(|m| !m.holds(pkt.value(m.field))) {
            return Some(m.field);
        }
        self.payload
            .iter()
            .any(|m| !m.holds(pkt.datagram.as_deref()))
            .then_some(Field::Payload)
    }

    /// Does the packet satisfy every constraint? `set_bit(n)` answers
    /// membership for [`Field::Set`] constraints.
    #[inline]
    pub fn matches(&self, pkt: &Packet, set_bit: &mut dyn FnMut(u16) -> bool) -> bool {
        self.fields.iter().all(|(f, v)| match f {
            Field::Set(n) => v.contains(set_bit(*n) as u128),
            _ => v.contains(pkt.value(*f)),
        }) && self.masked.iter().all(|m| m.holds(pkt.value(m.field)))
            && self
                .payload
                .iter()
                .all(|m| m.holds(pkt.datagram.as_deref()))
    }
}

/// Ports, TCP flags and options, the ICMP type: fields read from the transport header
/// (see [`Matches::reads_transport_header`]).
pub fn transport_header_field(f: Field) -> bool {
    matches!(
        f,
        Field::SrcPort
            | Field::DstPort
            | Field::TcpFlags
            | Field::IcmpTypeCode
            | Field::TcpOption(_)
    )
}
