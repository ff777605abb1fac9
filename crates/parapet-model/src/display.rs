//! Human-readable field values and interval sets, for traces and explanations.

use crate::field::{tcp_flags, CtState, Family, Field, IfName};
use crate::interval::IntervalSet;
use crate::packet::{protocol_name, to_ip};

/// Formats one value of `field` the way a firewall user writes it: addresses
/// as text, protocols by name, interfaces by name, states by name.
/// `family` picks the address width.
///
/// ```
/// use parapet_model::{format_value, Family, Field};
/// assert_eq!(format_value(Field::SrcAddr, 0x0a000001, Family::V4), "10.0.0.1");
/// assert_eq!(format_value(Field::Proto, 6, Family::V4), "tcp");
/// ```
pub fn format_value(field: Field, v: u128, family: Family) -> String {
    match field {
        Field::SrcAddr | Field::DstAddr => to_ip(family, v).to_string(),
        Field::Proto => protocol_name(v as u8)
            .map(str::to_string)
            .unwrap_or_else(|| v.to_string()),
        Field::InIface | Field::OutIface => {
            let name = IfName(v).to_string();
            if name.is_empty() {
                "(none)".into()
            } else {
                name
            }
        }
        Field::CtState => CtState::ALL
            .get(v as usize)
            .map(|s| s.iptables_name().to_string())
            .unwrap_or_else(|| v.to_string()),
        Field::TcpFlags => tcp_flags::format_list(v as u8),
        Field::IcmpTypeCode => format!("{}/{}", v >> 8, v & 0xff),
        Field::Set(_) => if v == 1 { "member" } else { "not a member" }.into(),
        _ => v.to_string(),
    }
}

/// Formats an interval set of `field`: prefixes for address ranges that are
/// prefixes, `lo-hi` otherwise, comma separated.
pub fn format_set(field: Field, set: &IntervalSet, family: Family) -> String {
    let addr = matches!(field, Field::SrcAddr | Field::DstAddr);
    let parts: Vec<String> = set
        .ranges()
        .iter()
        .map(|&(lo, hi)| {
            if lo == hi {
                return format_value(field, lo, family);
            }
            if addr {
                let p = IntervalSet::range(lo, hi).to_prefixes(family.addr_bits());
                if let [(v, len)] = p.as_slice() {
                    return format!("{}/{}", to_ip(family, *v), len);
                }
            }
            if matches!(field, Field::InIface | Field::OutIface) {
                let (lo_b, hi_b) = (lo.to_be_bytes(), hi.to_be_bytes());
                let common = lo_b
                    .iter()
                    .zip(hi_b.iter())
                    .take_while(|(a, b)| a == b)
                    .count();
                if lo_b[common..].iter().all(|&b| b == 0)
                    && hi_b[common..].iter().all(|&b| b == 0xff)
                {
                    return format!("{}+", String::from_utf8_lossy(&lo_b[..common]));
                }
            }
            format!(
                "{}-{}",
                format_value(field, lo, family),
                format_value(field, hi, family)
            )
        })
        .collect();
    if parts.is_empty() {
        "(nothing)".into()
    } else {
        parts.join(",")
    }
}
