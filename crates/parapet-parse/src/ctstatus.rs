//! Conntrack status bits ([`Field::CtStatus`], the entry's `IPS_*` bits
//! 0..=5) as both syntaxes write them, in one place: what nft's
//! `ct status dnat` and `ct status & M == V` and xt_conntrack's
//! `--ctstatus` and `--ctstate SNAT,DNAT` mean as value sets, and which of
//! those spellings a value set can be written back as.
//!
//! The field is six bits wide, so every condition is a set of at most 64
//! values; a single bit is at most 32 intervals.

use parapet_model::*;

/// Bits the key carries.
pub(crate) const BITS: u8 = 0x3f;

/// The statuses with any of `bits` set (nft `ct status snat,dnat`,
/// `--ctstatus ASSURED,CONFIRMED`, `--ctstate DNAT`).
pub(crate) fn any_of(bits: u8) -> IntervalSet {
    values(|v| v & bits != 0)
}

/// The statuses whose `mask` bits equal `value` (nft `ct status & M == V`).
pub(crate) fn masked(mask: u8, value: u8) -> IntervalSet {
    values(|v| v & mask == value)
}

fn values(keep: impl Fn(u8) -> bool) -> IntervalSet {
    IntervalSet::from_ranges(
        (0..=BITS)
            .filter(|&v| keep(v))
            .map(|v| (v as u128, v as u128)),
    )
}

/// The conntrack states of a packet that has an entry: nft's `ct status`
/// and xt_conntrack's `--ctstatus` never match a packet without one (nor
/// an untracked one), whatever the operator.
pub(crate) fn tracked() -> IntervalSet {
    IntervalSet::from_ranges(
        [CtState::New, CtState::Established, CtState::Related]
            .into_iter()
            .map(|s| (s as u128, s as u128)),
    )
}

/// A status value set as one spelling both syntaxes know.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Spelled {
    /// Any of these bits is set.
    Any(u8),
    /// The bits of the mask equal the value (no bit of the value outside
    /// the mask).
    Masked(u8, u8),
}

/// How `set` (statuses, within 0..=63) is written, if it is one of the
/// spellings.
pub(crate) fn spell(set: &IntervalSet) -> Option<Spelled> {
    let members: Vec<u8> = (0..=BITS).filter(|&v| set.contains(v as u128)).collect();
    let first = *members.first()?;
    // "any of": the single bits in the set are the candidates
    let bits = (0..6)
        .map(|b| 1u8 << b)
        .filter(|&b| set.contains(b as u128))
        .fold(0, |a, b| a | b);
    if bits != 0 && *set == any_of(bits) {
        return Some(Spelled::Any(bits));
    }
    // bits every member agrees on
    let mask = members.iter().fold(BITS, |m, &v| m & !(v ^ first));
    (*set == masked(mask, first & mask)).then_some(Spelled::Masked(mask, first & mask))
}

/// `snat`, `(snat|dnat)` or `0`, as nft writes bits in a masked compare.
fn nft_bits(bits: u8) -> String {
    let names = ct_status::names(bits);
    if bits == 0 {
        "0".into()
    } else if names.contains(',') {
        format!("({})", names.replace(',', "|"))
    } else {
        names
    }
}

/// The nft spelling of `set`; `tracked_only`: the rule already keeps to
/// packets with an entry (nft's `ct status` matches no other).
pub(crate) fn nft(set: &IntervalSet, tracked_only: bool) -> Result<String, String> {
    if set.contains(0) && !tracked_only {
        return Err("the ct status match takes packets without a conntrack entry, which nft's ct status never matches".into());
    }
    match spell(set) {
        Some(Spelled::Any(bits)) => Ok(format!("ct status {}", ct_status::names(bits))),
        Some(Spelled::Masked(m, v)) => Ok(format!("ct status & {} == {}", nft_bits(m), nft_bits(v))),
        None => Err("the ct status values are neither 'any of these bits' nor 'these bits equal', which nft writes".into()),
    }
}

/// The iptables spelling of `set` (` -m conntrack --ctstate DNAT`, one
/// match per bit of a mask): only the NAT bits, which `--ctstate` names.
pub(crate) fn iptables(set: &IntervalSet) -> Result<String, String> {
    const NAT: u8 = ct_status::SNAT | ct_status::DNAT;
    let name = |b: u8| if b == ct_status::SNAT { "SNAT" } else { "DNAT" };
    let other = || {
        Err("iptables writes only the SNAT and DNAT status bits (--ctstate SNAT,DNAT); the other bits are --ctstatus, which parapet does not read yet".to_string())
    };
    match spell(set) {
        Some(Spelled::Any(bits)) if bits & !NAT == 0 => {
            let names: Vec<&str> = [ct_status::SNAT, ct_status::DNAT]
                .into_iter()
                .filter(|b| bits & b != 0)
                .map(name)
                .collect();
            Ok(format!(" -m conntrack --ctstate {}", names.join(",")))
        }
        Some(Spelled::Masked(m, v)) if m & !NAT == 0 => Ok([ct_status::SNAT, ct_status::DNAT]
            .into_iter()
            .filter(|b| m & b != 0)
            .map(|b| {
                let neg = if v & b == 0 { "! " } else { "" };
                format!(" -m conntrack {neg}--ctstate {}", name(b))
            })
            .collect()),
        _ => other(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use parapet_model::ct_status::*;

    #[test]
    fn spellings_read_back() {
        for s in [
            Spelled::Any(DNAT),
            Spelled::Any(SNAT | DNAT),
            Spelled::Any(ASSURED | CONFIRMED),
            Spelled::Masked(DNAT, DNAT),
            Spelled::Masked(DNAT, 0),
            Spelled::Masked(SNAT | DNAT, SNAT),
        ] {
            let set = match s {
                Spelled::Any(b) => any_of(b),
                Spelled::Masked(m, v) => masked(m, v),
            };
            let back = spell(&set).expect("spelled");
            let again = match back {
                Spelled::Any(b) => any_of(b),
                Spelled::Masked(m, v) => masked(m, v),
            };
            assert_eq!(again, set, "{s:?} -> {back:?}");
        }
        assert_eq!(any_of(DNAT).ranges(), &[(32, 63)]);
        // dnat set or snat clear: neither spelling
        let odd = any_of(DNAT).union(&masked(SNAT, 0));
        assert_eq!(spell(&odd), None);
    }
}
