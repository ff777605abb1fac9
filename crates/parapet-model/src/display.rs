//! Human-readable field values and interval sets, for traces and explanations.

use crate::field::{tcp_flags, CtState, Family, Field, IfName};
use crate::interval::IntervalSet;
use crate::packet::to_ip;
use crate::proto::protocol_name;

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
        f if f.is_address() => to_ip(family, v).to_string(),
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
        Field::SrcType | Field::DstType => crate::addr_type::name(v as u8)
            .map(str::to_string)
            .unwrap_or_else(|| v.to_string()),
        Field::PktType => crate::pkt_type::name(v as u8)
            .map(str::to_string)
            .unwrap_or_else(|| v.to_string()),
        Field::RevPath => crate::rev_path::name(v as u8)
            .map(str::to_string)
            .unwrap_or_else(|| v.to_string()),
        Field::Set(_) => if v == 1 { "member" } else { "not a member" }.into(),
        _ => v.to_string(),
    }
}

/// Formats an interval set of `field`: prefixes for address ranges that are
/// prefixes, `lo-hi` otherwise, comma separated.
pub fn format_set(field: Field, set: &IntervalSet, family: Family) -> String {
    match field {
        // Few values: list them by name (`RELATED,ESTABLISHED`).
        Field::CtState
        | Field::Set(_)
        | Field::Fragment
        | Field::SrcType
        | Field::DstType
        | Field::PktType
        | Field::RevPath => {
            let names: Vec<String> = set
                .ranges()
                .iter()
                .flat_map(|&(lo, hi)| lo..=hi)
                .map(|v| format_value(field, v, family))
                .collect();
            return names.join(",");
        }
        // A flags byte set is usually "these bits masked equal those":
        // print it the way iptables' --tcp-flags reads.
        Field::TcpFlags => {
            if let Some((mask, comp)) = mask_form(set) {
                return format!(
                    "{}/{}",
                    tcp_flags::format_list(mask),
                    tcp_flags::format_list(comp)
                );
            }
        }
        _ => {}
    }
    let addr = field.is_address();
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

/// `(mask, comp)` when the set is exactly `{v : v & mask == comp}` over a byte.
fn mask_form(set: &IntervalSet) -> Option<(u8, u8)> {
    let values: Vec<u8> = set
        .ranges()
        .iter()
        .flat_map(|&(lo, hi)| lo..=hi)
        .map(|v| v as u8)
        .collect();
    let first = *values.first()?;
    let varying = values.iter().fold(0u8, |acc, v| acc | (v ^ first));
    let mask = !varying;
    let expected = 1usize << varying.count_ones();
    (values.len() == expected).then_some((mask, first & mask))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_enums_and_flags_read_like_iptables() {
        let st = IntervalSet::from_ranges([(2, 3)]);
        assert_eq!(
            format_set(Field::CtState, &st, Family::V4),
            "ESTABLISHED,RELATED"
        );
        let syn =
            IntervalSet::from_ranges((0u128..=255).filter(|v| v & 0x17 == 0x02).map(|v| (v, v)));
        assert_eq!(
            format_set(Field::TcpFlags, &syn, Family::V4),
            "FIN,SYN,RST,ACK/SYN"
        );
        let eth = IfName::wildcard_range("eth");
        assert_eq!(
            format_set(
                Field::InIface,
                &IntervalSet::range(eth.0, eth.1),
                Family::V4
            ),
            "eth+"
        );
        assert_eq!(
            format_set(
                Field::SrcAddr,
                &IntervalSet::prefix(0x0a00_0000, 8, 32),
                Family::V4
            ),
            "10.0.0.0/8"
        );
    }
}
