//! Key types: what a set's key is made of, and packet keys for lookups.

use crate::word::Word;
use parapet_model::{prefix_len, protocol_name, protocol_number, service_port, Family};
use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

/// Maximum number of dimensions of a concatenated key.
pub const MAX_DIMS: usize = 4;

/// One dimension of a set key: which packet part it takes.
///
/// nft names: `ipv4_addr`, `ipv6_addr`, `inet_service`, `inet_proto`,
/// `ifname`, `ether_addr`, `mark`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyPart {
    /// IPv4 address (32 bits). Packet source or destination address.
    Ipv4Addr,
    /// IPv6 address (128 bits). Packet source or destination address.
    Ipv6Addr,
    /// Transport port (16 bits). Packet source or destination port.
    InetService,
    /// L4 protocol number (8 bits). In ipset `hash:*,port*` types this
    /// dimension takes no `src`/`dst` flag: it is the packet's protocol.
    InetProto,
    /// Interface name (up to 16 bytes, NUL padded). Input or output interface.
    IfName,
    /// Ethernet address (48 bits): ipset `hash:mac`, `hash:ip,mac`,
    /// `bitmap:ip,mac`, nft `ether_addr`. Such sets load, list and answer
    /// lookups; rules cannot reference them until the packet key carries
    /// the MAC address (see `ref_fields`).
    EtherAddr,
    /// Packet mark (32 bits): ipset `hash:ip,mark`, nft `mark`. As for
    /// [`KeyPart::EtherAddr`], not in rules until the key carries the mark.
    Mark,
}

impl KeyPart {
    /// Width in bits.
    pub const fn width(self) -> u32 {
        match self {
            KeyPart::Ipv4Addr => 32,
            KeyPart::Ipv6Addr => 128,
            KeyPart::InetService => 16,
            KeyPart::InetProto => 8,
            KeyPart::IfName => 128,
            KeyPart::EtherAddr => 48,
            KeyPart::Mark => 32,
        }
    }
    /// The nft type name.
    pub const fn nft_name(self) -> &'static str {
        match self {
            KeyPart::Ipv4Addr => "ipv4_addr",
            KeyPart::Ipv6Addr => "ipv6_addr",
            KeyPart::InetService => "inet_service",
            KeyPart::InetProto => "inet_proto",
            KeyPart::IfName => "ifname",
            KeyPart::EtherAddr => "ether_addr",
            KeyPart::Mark => "mark",
        }
    }
    /// Parses an nft type name.
    pub fn from_nft_name(s: &str) -> Option<KeyPart> {
        Some(match s {
            "ipv4_addr" => KeyPart::Ipv4Addr,
            "ipv6_addr" => KeyPart::Ipv6Addr,
            "inet_service" => KeyPart::InetService,
            "inet_proto" => KeyPart::InetProto,
            "ifname" => KeyPart::IfName,
            "ether_addr" => KeyPart::EtherAddr,
            "mark" => KeyPart::Mark,
            _ => return None,
        })
    }
    /// Largest value of this dimension.
    pub const fn max(self) -> u128 {
        let w = self.width();
        if w >= 128 {
            u128::MAX
        } else {
            (1u128 << w) - 1
        }
    }
}

impl fmt::Display for KeyPart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.nft_name())
    }
}

/// One packet part of a lookup [`LookupKey`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyValue {
    /// An address; IPv4 in the low 32 bits.
    Addr { family: Family, addr: u128 },
    /// A transport port.
    Port(u16),
    /// An L4 protocol number.
    Proto(u8),
    /// An interface name, NUL padded (as the kernel's `IFNAMSIZ` buffer).
    Iface([u8; 16]),
    /// An Ethernet address in the low 48 bits.
    Mac(u64),
    /// A packet mark.
    Mark(u32),
}

/// A lookup key built from packet parts, one per dimension of the set, in
/// the order of [`crate::SetStore::key_dims`]. No allocation.
///
/// ```
/// use parapet_sets::{LookupKey, Family};
/// let k = LookupKey::new().addr(Family::V4, 0x0a00_0001).port(443);
/// assert_eq!(k.parts().len(), 2);
/// let k6 = LookupKey::new().ipv6("2001:db8::1".parse().unwrap());
/// let k4 = LookupKey::new().ipv4("10.0.0.1".parse().unwrap()).proto(6).port(22).iface("eth0");
/// # let _ = (k6, k4);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LookupKey {
    vals: [KeyValue; MAX_DIMS],
    len: u8,
}

impl Default for LookupKey {
    fn default() -> Self {
        LookupKey::new()
    }
}

impl LookupKey {
    /// An empty key.
    pub const fn new() -> LookupKey {
        LookupKey {
            vals: [KeyValue::Proto(0); MAX_DIMS],
            len: 0,
        }
    }
    /// Appends a part. Panics if the key already has [`MAX_DIMS`] parts.
    pub fn push(mut self, v: KeyValue) -> LookupKey {
        assert!(
            (self.len as usize) < MAX_DIMS,
            "a lookup key has at most {MAX_DIMS} parts"
        );
        self.vals[self.len as usize] = v;
        self.len += 1;
        self
    }
    /// Appends an address (IPv4 in the low 32 bits).
    pub fn addr(self, family: Family, addr: u128) -> LookupKey {
        self.push(KeyValue::Addr { family, addr })
    }
    /// Appends an IPv4 address.
    pub fn ipv4(self, a: Ipv4Addr) -> LookupKey {
        self.addr(Family::V4, u32::from(a) as u128)
    }
    /// Appends an IPv6 address.
    pub fn ipv6(self, a: Ipv6Addr) -> LookupKey {
        self.addr(Family::V6, u128::from(a))
    }
    /// Appends a port.
    pub fn port(self, p: u16) -> LookupKey {
        self.push(KeyValue::Port(p))
    }
    /// Appends a protocol number.
    pub fn proto(self, p: u8) -> LookupKey {
        self.push(KeyValue::Proto(p))
    }
    /// Appends an interface name (truncated to 16 bytes).
    pub fn iface(self, name: &str) -> LookupKey {
        self.push(KeyValue::Iface(ifname_bytes(name.as_bytes())))
    }
    /// The parts.
    pub fn parts(&self) -> &[KeyValue] {
        &self.vals[..self.len as usize]
    }
}

pub(crate) fn ifname_bytes(b: &[u8]) -> [u8; 16] {
    let mut out = [0u8; 16];
    let n = b.len().min(16);
    out[..n].copy_from_slice(&b[..n]);
    out
}

/// Value of one part for one dimension, or `None` when the part does not
/// fit the dimension (wrong kind, or wrong address family).
#[inline]
pub(crate) fn dim_value(part: KeyPart, v: &KeyValue) -> Option<u128> {
    match (part, v) {
        (
            KeyPart::Ipv4Addr,
            KeyValue::Addr {
                family: Family::V4,
                addr,
            },
        ) => {
            let hi = addr >> 32;
            if hi == 0 || hi == 0xffff {
                Some(addr & 0xffff_ffff)
            } else {
                None
            }
        }
        (
            KeyPart::Ipv6Addr,
            KeyValue::Addr {
                family: Family::V6,
                addr,
            },
        ) => Some(*addr),
        (KeyPart::InetService, KeyValue::Port(p)) => Some(*p as u128),
        (KeyPart::InetProto, KeyValue::Proto(p)) => Some(*p as u128),
        (KeyPart::IfName, KeyValue::Iface(b)) => Some(u128::from_be_bytes(*b)),
        (KeyPart::EtherAddr, KeyValue::Mac(m)) => Some(*m as u128 & 0xffff_ffff_ffff),
        (KeyPart::Mark, KeyValue::Mark(m)) => Some(*m as u128),
        _ => None,
    }
}

/// Placement of the dimensions in a packed word.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    pub dims: Vec<KeyPart>,
    /// Offset (from LSB) of each dimension.
    pub offs: Vec<u32>,
    pub total: u32,
}

impl Layout {
    pub fn new(dims: &[KeyPart]) -> Layout {
        let total: u32 = dims.iter().map(|d| d.width()).sum();
        let mut offs = Vec::with_capacity(dims.len());
        let mut used = 0;
        for d in dims {
            used += d.width();
            offs.push(total - used);
        }
        Layout {
            dims: dims.to_vec(),
            offs,
            total,
        }
    }
    #[inline]
    #[allow(clippy::needless_range_loop)]
    pub fn pack<K: Word>(&self, vals: &[u128]) -> K {
        let mut k = K::default();
        for i in 0..self.dims.len() {
            k.put(self.offs[i], self.dims[i].width(), vals[i]);
        }
        k
    }
    /// Packs the low (`hi == false`) or high ends of per-dimension ranges.
    #[inline]
    #[allow(clippy::needless_range_loop)]
    pub fn pack_end<K: Word>(&self, r: &[(u128, u128)], hi: bool) -> K {
        let mut k = K::default();
        for i in 0..self.dims.len() {
            k.put(
                self.offs[i],
                self.dims[i].width(),
                if hi { r[i].1 } else { r[i].0 },
            );
        }
        k
    }
    #[inline]
    pub fn unpack<K: Word>(&self, k: &K, i: usize) -> u128 {
        k.get(self.offs[i], self.dims[i].width())
    }
    /// Packs a packet key; `None` if it does not fit this layout.
    #[inline]
    pub fn pack_key<K: Word>(&self, key: &LookupKey) -> Option<K> {
        let parts = key.parts();
        if parts.len() != self.dims.len() {
            return None;
        }
        let mut k = K::default();
        for (i, v) in parts.iter().enumerate() {
            let d = self.dims[i];
            k.put(self.offs[i], d.width(), dim_value(d, v)?);
        }
        Some(k)
    }
}

// ---------------------------------------------------------------------------
// Text of one dimension value.

/// Protocol number from a name or decimal number.
pub fn proto_by_name(s: &str) -> Option<u8> {
    protocol_number(s)
}

/// Protocol name (or number as text).
pub fn proto_name(p: u8) -> String {
    protocol_name(p).map_or_else(|| p.to_string(), str::to_string)
}

fn port_value(s: &str) -> Result<u128, String> {
    if let Ok(n) = s.parse::<u16>() {
        return Ok(n as u128);
    }
    if s.bytes().all(|b| b.is_ascii_digit()) && !s.is_empty() {
        return Err(format!("port {s} out of range 0-65535"));
    }
    service_port(s)
        .map(|v| v as u128)
        .ok_or_else(|| format!("expected a port number or service name, found `{s}`"))
}

fn prefix_range(addr: u128, len: u32, width: u32) -> Result<(u128, u128), String> {
    if len > width {
        return Err(format!("prefix length {len} exceeds {width}"));
    }
    Ok(parapet_model::prefix_range(addr, len, width))
}

/// Parses one dimension's text into an inclusive range `[lo, hi]`.
/// Accepts `a`, `a/len` (addresses), `a-b`, and for interface names `eth*`.
pub(crate) fn parse_dim(part: KeyPart, s: &str) -> Result<(u128, u128), String> {
    match part {
        KeyPart::Ipv4Addr => {
            if let Some((a, l)) = s.split_once('/') {
                let a: Ipv4Addr = a
                    .parse()
                    .map_err(|_| format!("expected an IPv4 address, found `{a}`"))?;
                let l: u32 = l
                    .parse()
                    .map_err(|_| format!("expected a prefix length, found `{l}`"))?;
                prefix_range(u32::from(a) as u128, l, 32)
            } else if let Some((a, b)) = s.split_once('-') {
                let a: Ipv4Addr = a
                    .parse()
                    .map_err(|_| format!("expected an IPv4 address, found `{a}`"))?;
                let b: Ipv4Addr = b
                    .parse()
                    .map_err(|_| format!("expected an IPv4 address, found `{b}`"))?;
                let (a, b) = (u32::from(a) as u128, u32::from(b) as u128);
                if a > b {
                    return Err(format!("range start {} after end {}", fmt_v4(a), fmt_v4(b)));
                }
                Ok((a, b))
            } else {
                let a: Ipv4Addr = s
                    .parse()
                    .map_err(|_| format!("expected an IPv4 address, found `{s}`"))?;
                let v = u32::from(a) as u128;
                Ok((v, v))
            }
        }
        KeyPart::Ipv6Addr => {
            if let Some((a, l)) = s.split_once('/') {
                let a: Ipv6Addr = a
                    .parse()
                    .map_err(|_| format!("expected an IPv6 address, found `{a}`"))?;
                let l: u32 = l
                    .parse()
                    .map_err(|_| format!("expected a prefix length, found `{l}`"))?;
                prefix_range(u128::from(a), l, 128)
            } else if let Some((a, b)) = s.split_once('-') {
                let a: Ipv6Addr = a
                    .parse()
                    .map_err(|_| format!("expected an IPv6 address, found `{a}`"))?;
                let b: Ipv6Addr = b
                    .parse()
                    .map_err(|_| format!("expected an IPv6 address, found `{b}`"))?;
                let (a, b) = (u128::from(a), u128::from(b));
                if a > b {
                    return Err("range start after end".into());
                }
                Ok((a, b))
            } else {
                let a: Ipv6Addr = s
                    .parse()
                    .map_err(|_| format!("expected an IPv6 address, found `{s}`"))?;
                let v = u128::from(a);
                Ok((v, v))
            }
        }
        KeyPart::InetService => {
            if let Some((a, b)) = s.split_once('-') {
                let (a, b) = (port_value(a)?, port_value(b)?);
                if a > b {
                    return Err(format!("port range {a}-{b} is reversed"));
                }
                Ok((a, b))
            } else {
                let v = port_value(s)?;
                Ok((v, v))
            }
        }
        KeyPart::InetProto => {
            let one = |t: &str| {
                proto_by_name(t)
                    .map(|p| p as u128)
                    .ok_or_else(|| format!("expected a protocol name or number, found `{t}`"))
            };
            if let Some((a, b)) = s.split_once('-') {
                let (a, b) = (one(a)?, one(b)?);
                if a > b {
                    return Err("protocol range is reversed".into());
                }
                Ok((a, b))
            } else {
                let v = one(s)?;
                Ok((v, v))
            }
        }
        KeyPart::IfName => {
            let s = s
                .strip_prefix('"')
                .and_then(|t| t.strip_suffix('"'))
                .unwrap_or(s);
            if s.is_empty() {
                return Err("expected an interface name".into());
            }
            if let Some(p) = s.strip_suffix('*') {
                if p.len() > 15 {
                    return Err(format!("interface name `{s}` longer than 15 bytes"));
                }
                let lo = u128::from_be_bytes(ifname_bytes(p.as_bytes()));
                let bits = 8 * p.len() as u32;
                prefix_range(lo, bits, 128)
            } else {
                if s.len() > 15 {
                    return Err(format!("interface name `{s}` longer than 15 bytes"));
                }
                let v = u128::from_be_bytes(ifname_bytes(s.as_bytes()));
                Ok((v, v))
            }
        }
        KeyPart::EtherAddr => {
            let one = |t: &str| {
                mac_value(t).ok_or_else(|| {
                    format!("expected an Ethernet address like aa:bb:cc:dd:ee:ff, found `{t}`")
                })
            };
            match s.split_once('-') {
                Some((a, b)) => {
                    let (a, b) = (one(a)?, one(b)?);
                    if a > b {
                        return Err("Ethernet address range is reversed".into());
                    }
                    Ok((a, b))
                }
                None => one(s).map(|v| (v, v)),
            }
        }
        KeyPart::Mark => {
            let one = |t: &str| {
                mark_value(t).ok_or_else(|| {
                    format!("expected a mark (a 32-bit number, decimal or 0x…), found `{t}`")
                })
            };
            match s.split_once('-') {
                Some((a, b)) => {
                    let (a, b) = (one(a)?, one(b)?);
                    if a > b {
                        return Err("mark range is reversed".into());
                    }
                    Ok((a, b))
                }
                None => one(s).map(|v| (v, v)),
            }
        }
    }
}

/// `aa:bb:cc:dd:ee:ff` (hex, one or two digits per byte) as a number.
fn mac_value(s: &str) -> Option<u128> {
    let bytes: Vec<&str> = s.split(':').collect();
    if bytes.len() != 6 {
        return None;
    }
    bytes.iter().try_fold(0u128, |acc, b| {
        (!b.is_empty() && b.len() <= 2)
            .then(|| u8::from_str_radix(b, 16).ok())
            .flatten()
            .map(|v| acc << 8 | v as u128)
    })
}

/// A mark: decimal or `0x` hexadecimal, 32 bits.
fn mark_value(s: &str) -> Option<u128> {
    let v = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u32::from_str_radix(h, 16).ok()?,
        None => s.parse::<u32>().ok()?,
    };
    Some(v as u128)
}

pub(crate) fn fmt_v4(v: u128) -> String {
    let mut s = String::with_capacity(15);
    push_v4(&mut s, v as u32);
    s
}

/// Appends dotted-quad text (fast path for saving large sets).
pub(crate) fn push_v4(s: &mut String, v: u32) {
    for (i, o) in v.to_be_bytes().iter().enumerate() {
        if i > 0 {
            s.push('.');
        }
        let o = *o;
        if o >= 100 {
            s.push((b'0' + o / 100) as char);
        }
        if o >= 10 {
            s.push((b'0' + (o / 10) % 10) as char);
        }
        s.push((b'0' + o % 10) as char);
    }
}

/// Formats one value of a dimension.
pub(crate) fn fmt_value(part: KeyPart, v: u128) -> String {
    match part {
        KeyPart::Ipv4Addr => fmt_v4(v),
        KeyPart::Ipv6Addr => Ipv6Addr::from(v).to_string(),
        KeyPart::InetService => v.to_string(),
        KeyPart::InetProto => proto_name(v as u8),
        KeyPart::IfName => {
            let b = v.to_be_bytes();
            let n = b.iter().position(|&c| c == 0).unwrap_or(16);
            String::from_utf8_lossy(&b[..n]).into_owned()
        }
        KeyPart::EtherAddr => {
            let b = (v as u64).to_be_bytes();
            b[2..]
                .iter()
                .map(|x| format!("{x:02x}"))
                .collect::<Vec<_>>()
                .join(":")
        }
        KeyPart::Mark => format!("0x{:08x}", v as u32),
    }
}

/// Formats a range of one dimension, nft style: `a`, `a/len`, or `a-b`.
pub(crate) fn fmt_range(part: KeyPart, lo: u128, hi: u128) -> String {
    if lo == hi {
        let s = fmt_value(part, lo);
        return if part == KeyPart::IfName {
            format!("\"{s}\"")
        } else {
            s
        };
    }
    match part {
        KeyPart::Ipv4Addr | KeyPart::Ipv6Addr => match prefix_len(lo, hi, part.width()) {
            Some(l) => format!("{}/{}", fmt_value(part, lo), l),
            None => format!("{}-{}", fmt_value(part, lo), fmt_value(part, hi)),
        },
        KeyPart::IfName => match prefix_len(lo, hi, 128) {
            Some(l) if l % 8 == 0 => {
                let b = lo.to_be_bytes();
                format!("\"{}*\"", String::from_utf8_lossy(&b[..(l / 8) as usize]))
            }
            _ => format!("\"{}\"-\"{}\"", fmt_value(part, lo), fmt_value(part, hi)),
        },
        _ => format!("{}-{}", fmt_value(part, lo), fmt_value(part, hi)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn interface_prefixes() {
        assert_eq!(
            parse_dim(KeyPart::IfName, "eth*").unwrap().0 >> 104,
            0x657468
        );
        assert_eq!(
            fmt_range(
                KeyPart::IfName,
                parse_dim(KeyPart::IfName, "eth*").unwrap().0,
                parse_dim(KeyPart::IfName, "eth*").unwrap().1
            ),
            "\"eth*\""
        );
    }
}
