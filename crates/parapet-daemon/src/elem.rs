//! Set types and elements as text, for the control protocol.
//!
//! `parapet-sets` parses the same syntax inside its ipset/nft loaders but
//! keeps those parsers crate-private; until it exports an element parser
//! this module reads the two spellings clients send:
//!
//! * types: nft (`ipv4_addr`, `ipv4_addr . inet_service`) or ipset
//!   (`hash:ip`, `hash:net,port`, `hash:net,iface`, `bitmap:port`), the
//!   latter with a family (`inet`/`inet6`);
//! * elements: one value per dimension, separated by ` . ` (nft) or `,`
//!   (ipset); addresses as `a`, `a/len` or `a-b`; ports and protocols by
//!   number or name; interfaces as `eth0` or `eth*`. ipset's `proto:port`
//!   fills a protocol and a port dimension together (`tcp` when omitted).

use parapet_sets::{Element, Family, Key, KeyPart, KeyValue};
use std::net::{Ipv4Addr, Ipv6Addr};

/// Key dimensions of a type, and whether the type implies `flags interval`
/// (ipset `net`).
pub fn parse_type(typ: &str, family: Option<&str>) -> Result<(Vec<KeyPart>, bool), String> {
    let v6 = match family.unwrap_or("inet") {
        "inet" | "ipv4" | "ip" => false,
        "inet6" | "ipv6" | "ip6" => true,
        f => return Err(format!("unknown family `{f}` (expected inet or inet6)")),
    };
    let typ = typ.trim();
    if let Some((method, parts)) = typ.split_once(':') {
        // ipset: METHOD:DATATYPES
        let addr = if v6 {
            KeyPart::Ipv6Addr
        } else {
            KeyPart::Ipv4Addr
        };
        let mut dims = Vec::new();
        let mut interval = false;
        for p in parts.split(',') {
            match p {
                "ip" => dims.push(addr),
                "net" => {
                    dims.push(addr);
                    interval = true;
                }
                // ipset's port dimension carries the protocol with it.
                "port" if method == "bitmap" => dims.push(KeyPart::InetService),
                "port" => {
                    dims.push(KeyPart::InetProto);
                    dims.push(KeyPart::InetService)
                }
                "iface" => dims.push(KeyPart::IfName),
                _ => return Err(format!("unsupported ipset type `{typ}`")),
            }
        }
        if !matches!(method, "hash" | "bitmap")
            || dims.is_empty()
            || dims.len() > parapet_sets::MAX_DIMS
        {
            return Err(format!("unsupported ipset type `{typ}`"));
        }
        return Ok((dims, interval));
    }
    let mut dims = Vec::new();
    for p in typ.split('.') {
        let p = p.trim();
        dims.push(KeyPart::from_nft_name(p).ok_or_else(|| {
            format!("unknown key type `{p}` (expected ipv4_addr, ipv6_addr, inet_service, inet_proto, ifname, or an ipset type like hash:ip)")
        })?);
    }
    if dims.len() > parapet_sets::MAX_DIMS {
        return Err(format!(
            "a key has at most {} dimensions",
            parapet_sets::MAX_DIMS
        ));
    }
    Ok((dims, false))
}

fn split_prefix(s: &str) -> Option<(&str, &str)> {
    s.split_once('/')
}

fn prefix_range(v: u128, len: u32, width: u32) -> Result<(u128, u128), String> {
    if len > width {
        return Err(format!("prefix length {len} exceeds {width}"));
    }
    let host: u128 = if width - len == 128 {
        u128::MAX
    } else {
        (1u128 << (width - len)) - 1
    };
    let lo = v & !host;
    Ok((lo, lo | host))
}

fn addr_range<A: std::str::FromStr>(
    s: &str,
    width: u32,
    to: fn(A) -> u128,
    what: &str,
) -> Result<(u128, u128), String> {
    let one = |t: &str| {
        t.trim()
            .parse::<A>()
            .map(to)
            .map_err(|_| format!("expected an {what} address, found `{t}`"))
    };
    if let Some((a, l)) = split_prefix(s) {
        let l: u32 = l
            .trim()
            .parse()
            .map_err(|_| format!("expected a prefix length, found `{l}`"))?;
        prefix_range(one(a)?, l, width)
    } else if let Some((a, b)) = s.split_once('-') {
        let (a, b) = (one(a)?, one(b)?);
        if a > b {
            return Err(format!("range `{s}` is reversed"));
        }
        Ok((a, b))
    } else {
        let v = one(s)?;
        Ok((v, v))
    }
}

const SERVICES: &[(&str, u16)] = &[
    ("ftp", 21),
    ("ssh", 22),
    ("telnet", 23),
    ("smtp", 25),
    ("domain", 53),
    ("http", 80),
    ("pop3", 110),
    ("ntp", 123),
    ("imap", 143),
    ("snmp", 161),
    ("https", 443),
    ("submission", 587),
    ("imaps", 993),
    ("pop3s", 995),
];

fn port(s: &str) -> Result<u128, String> {
    let s = s.trim();
    if let Ok(n) = s.parse::<u16>() {
        return Ok(n as u128);
    }
    SERVICES
        .iter()
        .find(|(n, _)| *n == s)
        .map(|&(_, p)| p as u128)
        .ok_or_else(|| format!("expected a port number 0-65535 or a service name, found `{s}`"))
}

fn proto(s: &str) -> Result<u128, String> {
    parapet_model::protocol_number(s.trim())
        .map(|p| p as u128)
        .ok_or_else(|| format!("expected a protocol name or number, found `{s}`"))
}

fn ifname(s: &str) -> Result<(u128, u128), String> {
    let s = s.trim();
    let s = s
        .strip_prefix('"')
        .and_then(|t| t.strip_suffix('"'))
        .unwrap_or(s);
    let (name, wild) = match s.strip_suffix('*') {
        Some(p) => (p, true),
        None => (s, false),
    };
    if name.len() > 15 || (name.is_empty() && !wild) {
        return Err(format!("interface name `{s}` must have 1 to 15 bytes"));
    }
    let mut b = [0u8; 16];
    b[..name.len()].copy_from_slice(name.as_bytes());
    let v = u128::from_be_bytes(b);
    if wild {
        prefix_range(v, 8 * name.len() as u32, 128)
    } else {
        Ok((v, v))
    }
}

fn range_of(s: &str, f: fn(&str) -> Result<u128, String>) -> Result<(u128, u128), String> {
    if let Some((a, b)) = s.split_once('-') {
        let (a, b) = (f(a)?, f(b)?);
        if a > b {
            return Err(format!("range `{s}` is reversed"));
        }
        Ok((a, b))
    } else {
        let v = f(s)?;
        Ok((v, v))
    }
}

fn dim(part: KeyPart, s: &str) -> Result<(u128, u128), String> {
    match part {
        KeyPart::Ipv4Addr => addr_range::<Ipv4Addr>(s, 32, |a| u32::from(a) as u128, "IPv4"),
        KeyPart::Ipv6Addr => addr_range::<Ipv6Addr>(s, 128, u128::from, "IPv6"),
        KeyPart::InetService => range_of(s, port),
        KeyPart::InetProto => range_of(s, proto),
        KeyPart::IfName => ifname(s),
    }
}

/// Parses one element of a set with key `dims`.
pub fn parse_element(dims: &[KeyPart], text: &str) -> Result<Element, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("empty element".into());
    }
    // Fast path: a lone IPv4/IPv6 address (every ban).
    if dims.len() == 1 {
        return Ok(Element::new(&[dim(dims[0], text)?]));
    }
    let parts: Vec<&str> = if text.contains(" . ") {
        text.split(" . ").collect()
    } else {
        text.split(',').collect()
    };
    let mut ranges = Vec::with_capacity(dims.len());
    let mut p = parts.iter();
    let mut i = 0;
    while i < dims.len() {
        let Some(t) = p.next() else {
            return Err(format!("element `{text}` has too few parts for its type"));
        };
        if dims[i] == KeyPart::InetProto
            && dims.get(i + 1) == Some(&KeyPart::InetService)
            && !text.contains(" . ")
        {
            // ipset `[proto:]port`
            let (pr, po) = t.split_once(':').unwrap_or(("tcp", t));
            ranges.push(range_of(pr, proto)?);
            ranges.push(range_of(po, port)?);
            i += 2;
            continue;
        }
        ranges.push(dim(dims[i], t)?);
        i += 1;
    }
    if p.next().is_some() {
        return Err(format!("element `{text}` has too many parts for its type"));
    }
    Ok(Element::new(&ranges))
}

/// The packet key equal to an element whose every dimension is one value,
/// for membership tests; `None` for ranges and prefixes.
pub fn element_key(dims: &[KeyPart], el: &Element) -> Option<Key> {
    let mut k = Key::new();
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
        });
    }
    Some(k)
}

/// Which ban set an address belongs to: the family of the address text.
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
            parse_type("ipv4_addr . inet_service", None).unwrap().0,
            vec![KeyPart::Ipv4Addr, KeyPart::InetService]
        );
        assert!(parse_type("hash:mac", None).is_err());
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
            parse_element(&v4, "10.0.0.0/8").unwrap().ranges(),
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
