//! Set types and elements as one line of text: what a client of the
//! daemon sends (`parapet set add ban 10.0.0.1`), in either spelling.
//!
//! * types: nft (`ipv4_addr`, `ipv4_addr . inet_service`) or ipset
//!   (`hash:ip`, `hash:net,port`, `hash:net,iface`, `bitmap:port`), the
//!   latter with a family (`inet`/`inet6`);
//! * elements: one value per dimension, separated by ` . ` (nft) or `,`
//!   (ipset); addresses as `a`, `a/len` or `a-b`; ports and protocols by
//!   number or name; interfaces as `eth0` or `eth*`. ipset's `proto:port`
//!   fills a protocol and a port dimension together (`tcp` when omitted).
//!
//! The same parsers read `ipset restore` and nft set files ([`crate::ipset`],
//! [`crate::nft`]); this module only picks the spelling.

use crate::element::Element;
use crate::ipset;
use crate::key::{parse_dim, KeyPart, KeyValue, LookupKey, MAX_DIMS};
use parapet_model::Family;
use std::net::{Ipv4Addr, Ipv6Addr};

/// Key dimensions of a type, and whether the type implies `flags interval`
/// (ipset `net`). `family` (`inet`, the default, or `inet6`) only matters
/// for ipset types.
///
/// ```
/// use parapet_sets::{parse_type, KeyPart};
/// assert_eq!(parse_type("hash:net", Some("inet6")).unwrap(), (vec![KeyPart::Ipv6Addr], true));
/// assert_eq!(parse_type("ipv4_addr . inet_service", None).unwrap().0.len(), 2);
/// ```
pub fn parse_type(typ: &str, family: Option<&str>) -> Result<(Vec<KeyPart>, bool), String> {
    let v6 = match family.unwrap_or("inet") {
        "inet" | "ipv4" | "ip" => false,
        "inet6" | "ipv6" | "ip6" => true,
        f => return Err(format!("unknown family `{f}` (expected inet or inet6)")),
    };
    let typ = typ.trim();
    if typ.contains(':') {
        return ipset::type_dims(typ, v6).ok_or_else(|| format!("unsupported ipset type `{typ}`"));
    }
    let mut dims = Vec::new();
    for p in typ.split('.') {
        let p = p.trim();
        dims.push(KeyPart::from_nft_name(p).ok_or_else(|| {
            format!("unknown key type `{p}` (expected ipv4_addr, ipv6_addr, inet_service, inet_proto, ifname, ether_addr, mark, or an ipset type like hash:ip)")
        })?);
    }
    if dims.len() > MAX_DIMS {
        return Err(format!("a key has at most {MAX_DIMS} dimensions"));
    }
    Ok((dims, false))
}

/// Parses one element of a set with key `dims`: nft's `a . b` or ipset's
/// `a,b` (with `proto:port`).
///
/// ```
/// use parapet_sets::{parse_element, KeyPart};
/// let el = parse_element(&[KeyPart::Ipv4Addr], "10.0.0.0/8").unwrap();
/// assert_eq!(el.ranges(), &[(0x0a00_0000, 0x0aff_ffff)]);
/// ```
pub fn parse_element(dims: &[KeyPart], text: &str) -> Result<Element, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("empty element".into());
    }
    // Fast path: a lone IPv4/IPv6 address (every ban).
    if dims.len() == 1 {
        return Ok(Element::new(&[parse_dim(dims[0], text)?]));
    }
    if !text.contains(" . ") {
        return ipset::parse_elem(dims, text).map_err(|(_, m)| m);
    }
    let parts: Vec<&str> = text.split(" . ").map(str::trim).collect();
    if parts.len() < dims.len() {
        return Err(format!("element `{text}` has too few parts for its type"));
    }
    if parts.len() > dims.len() {
        return Err(format!("element `{text}` has too many parts for its type"));
    }
    let ranges = dims
        .iter()
        .zip(parts)
        .map(|(&d, t)| parse_dim(d, t))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Element::new(&ranges))
}

/// The packet key equal to an element whose every dimension is one value,
/// for membership tests; `None` for ranges and prefixes.
pub fn element_key(dims: &[KeyPart], el: &Element) -> Option<LookupKey> {
    let mut k = LookupKey::new();
    for (d, &(lo, hi)) in dims.iter().zip(el.ranges()) {
        if lo != hi {
            return None;
        }
        k = k.push(match d {
            KeyPart::Ipv4Addr => KeyValue::Addr {
                family: Family::V4,
                addr: lo,
            },
            KeyPart::Ipv6Addr => KeyValue::Addr {
                family: Family::V6,
                addr: lo,
            },
            KeyPart::InetService => KeyValue::Port(lo as u16),
            KeyPart::InetProto => KeyValue::Proto(lo as u8),
            KeyPart::IfName => KeyValue::Iface(lo.to_be_bytes()),
            KeyPart::EtherAddr => KeyValue::Mac(lo as u64),
            KeyPart::Mark => KeyValue::Mark(lo as u32),
        });
    }
    Some(k)
}

/// Which ban set an address belongs to: the family of the address text
/// (`a`, `a/len` or `a-b`).
pub fn address_family(s: &str) -> Result<Family, String> {
    let a = s.split(['/', '-']).next().unwrap_or(s).trim();
    if a.parse::<Ipv4Addr>().is_ok() {
        Ok(Family::V4)
    } else if a.parse::<Ipv6Addr>().is_ok() {
        Ok(Family::V6)
    } else {
        Err(format!("expected an IPv4 or IPv6 address, found `{s}`"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types() {
        assert_eq!(
            parse_type("hash:ip", None).unwrap(),
            (vec![KeyPart::Ipv4Addr], false)
        );
        assert_eq!(
            parse_type("hash:net", Some("inet6")).unwrap(),
            (vec![KeyPart::Ipv6Addr], true)
        );
        assert_eq!(
            parse_type("hash:ip,port", None).unwrap().0,
            vec![KeyPart::Ipv4Addr, KeyPart::InetProto, KeyPart::InetService]
        );
        assert_eq!(
            parse_type("bitmap:port", None).unwrap().0,
            vec![KeyPart::InetService]
        );
        assert_eq!(
            parse_type("ipv4_addr . inet_service", None).unwrap().0,
            vec![KeyPart::Ipv4Addr, KeyPart::InetService]
        );
        assert_eq!(
            parse_type("hash:mac", None).unwrap(),
            (vec![KeyPart::EtherAddr], false)
        );
        assert!(parse_type("list:set", None).is_err());
        assert!(parse_type("ipv5_addr", None).is_err());
        assert!(parse_type("hash:ip", Some("bogus")).is_err());
    }

    #[test]
    fn elements() {
        let v4 = [KeyPart::Ipv4Addr];
        assert_eq!(
            parse_element(&v4, "10.0.0.1").unwrap().ranges(),
            &[(0x0a00_0001, 0x0a00_0001)]
        );
        assert_eq!(
            parse_element(&v4, " 10.0.0.0/8 ").unwrap().ranges(),
            &[(0x0a00_0000, 0x0aff_ffff)]
        );
        assert_eq!(
            parse_element(&v4, "10.0.0.1-10.0.0.3").unwrap().ranges(),
            &[(0x0a00_0001, 0x0a00_0003)]
        );
        assert!(parse_element(&v4, "10.0.0.3-10.0.0.1").is_err());
        assert!(parse_element(&v4, "10.0.0.0/33").is_err());
        assert!(parse_element(&v4, "::1").is_err());
        assert!(parse_element(&v4, "").is_err());
        let v6 = [KeyPart::Ipv6Addr];
        assert_eq!(
            parse_element(&v6, "::/0").unwrap().ranges(),
            &[(0, u128::MAX)]
        );
        let ipp = [KeyPart::Ipv4Addr, KeyPart::InetProto, KeyPart::InetService];
        assert_eq!(
            parse_element(&ipp, "1.2.3.4,udp:53").unwrap().ranges()[1..],
            [(17, 17), (53, 53)]
        );
        assert_eq!(
            parse_element(&ipp, "1.2.3.4,ssh").unwrap().ranges()[1..],
            [(6, 6), (22, 22)]
        );
        assert_eq!(
            parse_element(&ipp, "1.2.3.4 . tcp . 80").unwrap().ranges()[2],
            (80, 80)
        );
        assert!(parse_element(&ipp, "1.2.3.4").is_err());
        assert!(parse_element(&ipp, "1.2.3.4,80,9").is_err());
        assert!(parse_element(&ipp, "1.2.3.4 . tcp").is_err());
        let ifc = [KeyPart::IfName];
        let (lo, hi) = parse_element(&ifc, "eth*").unwrap().ranges()[0];
        assert!(lo < hi && lo >> 104 == 0x657468);
        assert!(element_key(&v4, &parse_element(&v4, "1.2.3.4").unwrap()).is_some());
        assert!(element_key(&v4, &parse_element(&v4, "1.2.3.0/24").unwrap()).is_none());
        assert_eq!(address_family("2001:db8::/32").unwrap(), Family::V6);
        assert_eq!(address_family("192.0.2.1").unwrap(), Family::V4);
        assert!(address_family("example.com").is_err());
    }
}
