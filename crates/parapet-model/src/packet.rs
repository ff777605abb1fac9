//! The packet header fields a classifier looks at.

use crate::field::{tcp_flags, CtState, Family, Field, IfName};
use crate::proto::{protocol_name, protocol_number};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// The header fields of one packet, already parsed.
///
/// Traces and `--packet` strings describe the first packet of a new flow, so
/// the defaults are conntrack state NEW and, for TCP, the SYN flag alone.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Packet {
    /// Address family.
    pub family: Family,
    /// Source address (IPv4: the 32-bit value).
    pub src: u128,
    /// Destination address.
    pub dst: u128,
    /// Transport protocol number.
    pub proto: u8,
    /// Source port; 0 when the protocol has none.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// ICMP/ICMPv6 type.
    pub icmp_type: u8,
    /// ICMP/ICMPv6 code.
    pub icmp_code: u8,
    /// TCP flags byte.
    pub tcp_flags: u8,
    /// Input interface.
    pub iif: IfName,
    /// Output interface.
    pub oif: IfName,
    /// Conntrack state.
    pub ct_state: CtState,
    /// The conntrack entry's status bits ([`crate::ct_status`]); 0 without
    /// an entry.
    pub ct_status: u8,
    /// The destination port of the conntrack entry's original tuple
    /// ([`Field::CtOrigDstPort`]); 0 without an entry.
    pub ct_orig_dport: u16,
    /// The source port of the conntrack entry's original tuple
    /// ([`Field::CtOrigSrcPort`]); 0 without an entry.
    pub ct_orig_sport: u16,
    /// The conntrack entry's layer-4 protocol ([`Field::CtProto`]); 0
    /// without an entry.
    pub ct_proto: u8,
    /// The conntrack entry's addresses, those the packet says
    /// ([`CtAddrs`]; boxed: rare, and the packet stays small). `None`
    /// (the default): the packet's own tuple is the entry's, as for the
    /// first packet of a connection without NAT ([`Packet::value`]).
    /// Without an entry (INVALID, UNTRACKED) no rule reading them
    /// matches, whatever they hold.
    pub ct_addrs: Option<Box<CtAddrs>>,
    /// Non-first fragment.
    pub fragment: bool,
    /// IPv4 TTL or IPv6 hop limit.
    pub ttl: u8,
    /// DSCP (the TOS / traffic class byte shifted right by two).
    pub dscp: u8,
    /// The L3 length in bytes (IPv4 total length, IPv6 payload length +
    /// 40): what `-m length` matches and byte counters count.
    pub len: u32,
    /// The source address's type ([`crate::addr_type`]) when the packet
    /// says it; else [`crate::by_prefix`] of the address.
    pub src_type: Option<u8>,
    /// The destination address's type, as `src_type`.
    pub dst_type: Option<u8>,
    /// The link-layer packet type ([`crate::pkt_type`]) when the packet
    /// says it; else the one of its destination type
    /// ([`crate::pkt_type_of`]).
    pub pkt_type: Option<u8>,
    /// The packet's mark (`skb->mark`).
    pub mark: u32,
    /// The conntrack entry's mark; 0 without an entry.
    pub ct_mark: u32,
    /// The Ethernet source address, when the hook sees an Ethernet header
    /// ([`Field::MacSrc`]); `None` (the default) matches no MAC rule.
    pub mac_src: Option<u64>,
    /// The socket's owner uid, packed ([`crate::owner`]: 0 no socket, 1
    /// no file, uid + 2); 0 by default.
    pub sk_uid: u32,
    /// The socket's owner gid, packed as `sk_uid`.
    pub sk_gid: u32,
    /// The first IPv6 routing header, packed ([`crate::routing`]: 0
    /// without one, the default).
    pub rt: u32,
    /// Where the host's route back to the source leaves
    /// ([`crate::rev_path`]); [`crate::rev_path::IIF`] unless the packet
    /// says otherwise.
    pub rev_path: u8,
    /// The TCP option area (the `data offset × 4 − 20` bytes after the
    /// fixed header, at most 40), as [`Field::TcpOption`] reads it; `None`
    /// (the default) for a segment without options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_options: Option<Box<[u8]>>,
    /// The packet's bytes from the network header on, when the packet
    /// says them: what `-m string` searches ([`crate::string_match`]);
    /// `None` (the default): no bytes, nothing is found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datagram: Option<Box<[u8]>>,
}

impl Packet {
    /// The TTL of a packet that does not say (Linux's default).
    pub const DEFAULT_TTL: u8 = 64;

    /// A packet of the given family and 5-tuple with every other field at its
    /// default.
    pub fn new(family: Family, src: u128, dst: u128, proto: u8, sport: u16, dport: u16) -> Self {
        Packet {
            family,
            src,
            dst,
            proto,
            sport,
            dport,
            icmp_type: 0,
            icmp_code: 0,
            tcp_flags: if proto == 6 { tcp_flags::SYN } else { 0 },
            iif: IfName::default(),
            oif: IfName::default(),
            ct_state: CtState::New,
            ct_status: 0,
            ct_orig_dport: 0,
            ct_orig_sport: 0,
            ct_proto: 0,
            ct_addrs: None,
            fragment: false,
            ttl: Packet::DEFAULT_TTL,
            dscp: 0,
            len: 64,
            src_type: None,
            dst_type: None,
            pkt_type: None,
            mark: 0,
            ct_mark: 0,
            mac_src: None,
            sk_uid: 0,
            sk_gid: 0,
            rt: 0,
            rev_path: crate::rev_path::IIF,
            tcp_options: None,
            datagram: None,
        }
    }

    /// An IPv4 5-tuple, addresses as 32-bit numbers (the trace format).
    pub fn v4(src: u32, dst: u32, proto: u8, sport: u16, dport: u16) -> Self {
        Packet::new(Family::V4, src as u128, dst as u128, proto, sport, dport)
    }

    /// The packet's value in a fixed field. Set membership is not a header
    /// field and must come from the sets; asking for it here panics.
    #[inline]
    pub fn value(&self, field: Field) -> u128 {
        match field {
            Field::Family => self.family.value(),
            Field::SrcAddr => self.src,
            Field::DstAddr => self.dst,
            Field::Proto => self.proto as u128,
            Field::SrcPort => self.sport as u128,
            Field::DstPort => self.dport as u128,
            Field::IcmpTypeCode => ((self.icmp_type as u128) << 8) | self.icmp_code as u128,
            Field::TcpFlags => self.tcp_flags as u128,
            Field::InIface => self.iif.0,
            Field::OutIface => self.oif.0,
            Field::CtState => self.ct_state as u128,
            Field::Fragment => self.fragment as u128,
            Field::Ttl => self.ttl as u128,
            Field::Dscp => self.dscp as u128,
            Field::Length => self.len as u128,
            Field::CtStatus => self.ct_status as u128,
            Field::SrcType => self.src_type() as u128,
            Field::DstType => self.dst_type() as u128,
            Field::PktType => self.pkt_type() as u128,
            Field::CtOrigDstPort => self.ct_orig_dport as u128,
            Field::CtOrigSrcPort => self.ct_orig_sport as u128,
            Field::CtProto => self.ct_proto as u128,
            Field::CtOrigSrc => self.ct_addr(field).unwrap_or(self.src),
            Field::CtOrigDst => self.ct_addr(field).unwrap_or(self.dst),
            Field::CtReplSrc => self.ct_addr(field).unwrap_or(self.dst),
            Field::CtReplDst => self.ct_addr(field).unwrap_or(self.src),
            Field::Mark => self.mark as u128,
            Field::CtMark => self.ct_mark as u128,
            Field::MacSrc => crate::mac::key_value(self.mac_src),
            Field::SkUid => self.sk_uid as u128,
            Field::SkGid => self.sk_gid as u128,
            Field::Routing => self.rt as u128,
            Field::RevPath => self.rev_path as u128,
            Field::TcpOption(kind) => {
                let options = self.tcp_options.as_deref().unwrap_or(&[]);
                (self.proto == 6 && crate::tcp_option::present(options, kind)) as u128
            }
            Field::TcpOptionsLow | Field::TcpOptionsHigh => match &self.tcp_options {
                Some(options) if self.proto == 6 => {
                    crate::tcp_option::kinds(options)[(field == Field::TcpOptionsHigh) as usize]
                }
                _ => 0,
            },
            Field::Set(_) => panic!("set membership is not a header field"),
            Field::Payload => panic!("the packet's bytes are not one value"),
        }
    }

    /// The conntrack entry's address in `field` ([`Field::CtOrigSrc`],
    /// [`Field::CtOrigDst`], [`Field::CtReplSrc`], [`Field::CtReplDst`])
    /// when the packet says it.
    pub fn ct_addr(&self, field: Field) -> Option<u128> {
        let c = self.ct_addrs.as_deref()?;
        match field {
            Field::CtOrigSrc => c.orig_src,
            Field::CtOrigDst => c.orig_dst,
            Field::CtReplSrc => c.repl_src,
            Field::CtReplDst => c.repl_dst,
            _ => None,
        }
    }

    /// Says the conntrack entry's address in `field` (one of the four of
    /// [`Packet::ct_addr`]; other fields are left alone).
    pub fn set_ct_addr(&mut self, field: Field, addr: u128) {
        let c = self.ct_addrs.get_or_insert_with(Box::default);
        match field {
            Field::CtOrigSrc => c.orig_src = Some(addr),
            Field::CtOrigDst => c.orig_dst = Some(addr),
            Field::CtReplSrc => c.repl_src = Some(addr),
            Field::CtReplDst => c.repl_dst = Some(addr),
            _ => {}
        }
    }

    /// The source address's type: the packet's own, else by prefix.
    pub fn src_type(&self) -> u8 {
        self.src_type
            .unwrap_or_else(|| crate::by_prefix(self.family, self.src))
    }

    /// The destination address's type: the packet's own, else by prefix.
    pub fn dst_type(&self) -> u8 {
        self.dst_type
            .unwrap_or_else(|| crate::by_prefix(self.family, self.dst))
    }

    /// The link-layer packet type: the packet's own, else the one of its
    /// destination type.
    pub fn pkt_type(&self) -> u8 {
        self.pkt_type
            .unwrap_or_else(|| crate::pkt_type_of(self.dst_type()))
    }

    /// Marks the addresses in `local` LOCAL and those in `broadcast`
    /// BROADCAST (the host's tables, as `--local-addr` gives them); other
    /// types stay as they are.
    pub fn set_host_addrs(&mut self, local: &[u128], broadcast: &[u128]) {
        let of = |a: u128| {
            if local.contains(&a) {
                Some(crate::addr_type::LOCAL)
            } else if broadcast.contains(&a) {
                Some(crate::addr_type::BROADCAST)
            } else {
                None
            }
        };
        if self.src_type.is_none() {
            self.src_type = of(self.src);
        }
        if self.dst_type.is_none() {
            self.dst_type = of(self.dst);
        }
    }

    /// Source address as an `IpAddr`.
    pub fn src_ip(&self) -> IpAddr {
        to_ip(self.family, self.src)
    }

    /// Destination address as an `IpAddr`.
    pub fn dst_ip(&self) -> IpAddr {
        to_ip(self.family, self.dst)
    }
}

/// The conntrack entry's addresses a packet says ([`Packet::ct_addrs`]):
/// each `None` is the packet's own tuple's.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CtAddrs {
    /// The original tuple's source ([`Field::CtOrigSrc`]).
    pub orig_src: Option<u128>,
    /// The original tuple's destination (before DNAT).
    pub orig_dst: Option<u128>,
    /// The reply tuple's source (after DNAT).
    pub repl_src: Option<u128>,
    /// The reply tuple's destination (after SNAT).
    pub repl_dst: Option<u128>,
}

/// The fields of the conntrack entry's addresses, in xt_conntrack's order.
pub const CT_ADDR_FIELDS: [Field; 4] = [
    Field::CtOrigSrc,
    Field::CtOrigDst,
    Field::CtReplSrc,
    Field::CtReplDst,
];

/// Converts a field value back to an address of the family.
pub fn to_ip(family: Family, v: u128) -> IpAddr {
    match family {
        Family::V4 => IpAddr::V4(Ipv4Addr::from(v as u32)),
        Family::V6 => IpAddr::V6(Ipv6Addr::from(v)),
    }
}

/// Splits an `IpAddr` into family and field value.
pub fn from_ip(ip: IpAddr) -> (Family, u128) {
    match ip {
        IpAddr::V4(a) => (Family::V4, u32::from(a) as u128),
        IpAddr::V6(a) => (Family::V6, u128::from(a)),
    }
}

/// A `--packet` description that did not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PacketSpecError {
    /// 1-based column of the offending word.
    pub column: usize,
    /// What was expected there.
    pub message: String,
}

impl fmt::Display for PacketSpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "column {}: {}", self.column, self.message)
    }
}

impl std::error::Error for PacketSpecError {}

impl FromStr for Packet {
    type Err = PacketSpecError;

    /// Parses `PROTO SRC[:PORT] > DST[:PORT] [iif IF] [oif IF] [ct STATE]
    /// [flags F,F] [type T] [code C] [len N] [ttl N] [dscp N] [stype T]
    /// [dtype T] [pkttype T] [rpath iif|other|none] [rt TYPE/SEGLEFT/HDRLEN] [ctorigsrc|ctorigdst|
    /// ctreplsrc|ctrepldst ADDR] [frag]`.
    ///
    /// IPv6 addresses with ports are written `[2001:db8::1]:80`.
    ///
    /// ```
    /// use parapet_model::Packet;
    /// let p: Packet = "tcp 10.0.0.1:1234 > 10.0.0.2:22 iif eth0 ct new".parse().unwrap();
    /// assert_eq!((p.proto, p.sport, p.dport), (6, 1234, 22));
    /// assert_eq!(p.iif.to_string(), "eth0");
    /// ```
    fn from_str(s: &str) -> Result<Packet, PacketSpecError> {
        let words = split_words(s);
        let err = |i: usize, m: &str| PacketSpecError {
            column: words.get(i).map_or(s.len() + 1, |w| w.0 + 1),
            message: m.to_string(),
        };
        let word = |i: usize| words.get(i).map(|w| w.1);
        let proto_word =
            word(0).ok_or_else(|| err(0, "expected a protocol (tcp, udp, icmp, …)"))?;
        let proto = protocol_number(proto_word)
            .ok_or_else(|| err(0, "expected a protocol name or number"))?;
        let (src, sport) = parse_endpoint(word(1).unwrap_or(""))
            .ok_or_else(|| err(1, "expected a source address, optionally with :port"))?;
        if word(2) != Some(">") {
            return Err(err(2, "expected '>' between source and destination"));
        }
        let (dst, dport) = parse_endpoint(word(3).unwrap_or(""))
            .ok_or_else(|| err(3, "expected a destination address, optionally with :port"))?;
        let (family, src) = from_ip(src);
        let (dfamily, dst) = from_ip(dst);
        if family != dfamily {
            return Err(err(3, "source and destination must be of the same family"));
        }
        let mut p = Packet::new(
            family,
            src,
            dst,
            proto,
            sport.unwrap_or(0),
            dport.unwrap_or(0),
        );
        let mut i = 4;
        while let Some(key) = word(i) {
            let val = word(i + 1);
            let need = |m: &str| val.ok_or_else(|| err(i + 1, m));
            match key {
                "iif" | "oif" => {
                    let name = IfName::new(need("expected an interface name")?)
                        .ok_or_else(|| err(i + 1, "interface names have at most 15 bytes"))?;
                    if key == "iif" {
                        p.iif = name
                    } else {
                        p.oif = name
                    }
                }
                "ct" => {
                    p.ct_state = CtState::from_name(need("expected a conntrack state")?)
                        .ok_or_else(|| {
                            err(
                                i + 1,
                                "expected new, established, related, invalid or untracked",
                            )
                        })?
                }
                "ctstatus" => {
                    let list = need("expected conntrack status bits like dnat,assured")?;
                    let mut bits = 0;
                    for name in list.split(',') {
                        bits |= crate::ct_status::from_name(name).ok_or_else(|| {
                            err(
                                i + 1,
                                "expected expected, seen-reply, assured, confirmed, snat or dnat",
                            )
                        })?;
                    }
                    p.ct_status = bits;
                }
                "rt" => {
                    // TYPE/SEGLEFT/HDRLEN: the first routing header (IPv6).
                    let bad = || err(i + 1, "expected a routing header TYPE/SEGLEFT/HDRLEN (three bytes, like 0/2/4)");
                    let v = need("expected a routing header TYPE/SEGLEFT/HDRLEN")?;
                    let b: Vec<u8> = v
                        .split('/')
                        .map(|x| x.parse::<u8>())
                        .collect::<Result<_, _>>()
                        .map_err(|_| bad())?;
                    let [t, s, l] = b[..] else { return Err(bad()) };
                    if p.family != Family::V6 {
                        return Err(err(i, "a routing header is an IPv6 extension header"));
                    }
                    p.rt = crate::routing::key_value(Some(crate::routing::RoutingHeader {
                        rt_type: t,
                        segments_left: s,
                        hdrlen: l,
                    })) as u32;
                }
                "tcpopt" => {
                    // the option area as hex bytes: whole 32-bit words, as
                    // the data offset counts them
                    let bad = || err(i + 1, "expected the TCP option area as hex bytes, a multiple of 4 and at most 40 (like 020405b401010402)");
                    let v = need("expected the TCP option area as hex bytes")?;
                    let bytes = (0..v.len())
                        .step_by(2)
                        .map(|k| v.get(k..k + 2).and_then(|b| u8::from_str_radix(b, 16).ok()))
                        .collect::<Option<Vec<u8>>>()
                        .filter(|b| !b.is_empty() && b.len() % 4 == 0 && b.len() <= crate::tcp_option::MAX_LEN)
                        .ok_or_else(bad)?;
                    p.tcp_options = Some(bytes.into_boxed_slice());
                }
                "datagram" => {
                    // the packet's bytes from the IP header on, in hex
                    let bad = || err(i + 1, "expected the packet's bytes from the IP header on, as hex");
                    let v = need("expected the packet's bytes as hex")?;
                    let bytes = (0..v.len())
                        .step_by(2)
                        .map(|k| v.get(k..k + 2).and_then(|b| u8::from_str_radix(b, 16).ok()))
                        .collect::<Option<Vec<u8>>>()
                        .filter(|b| !b.is_empty())
                        .ok_or_else(bad)?;
                    p.datagram = Some(bytes.into_boxed_slice());
                }
                "skuid" | "skgid" => {
                    let v = match need("expected an owner id or nofile")? {
                        "nofile" => crate::owner::NO_FILE as u32,
                        n => n
                            .parse::<u32>()
                            .ok()
                            .filter(|id| *id <= crate::owner::MAX_ID)
                            .map(|id| crate::owner::key_value(id) as u32)
                            .ok_or_else(|| err(i + 1, "expected an owner id or nofile"))?,
                    };
                    if key == "skuid" {
                        p.sk_uid = v
                    } else {
                        p.sk_gid = v
                    }
                }
                "ctorigdport" => {
                    p.ct_orig_dport = need("expected a port")?
                        .parse()
                        .map_err(|_| err(i + 1, "expected a port 0-65535"))?
                }
                "macsrc" => {
                    p.mac_src = Some(
                        crate::mac::parse(need("expected a MAC address")?)
                            .ok_or_else(|| err(i + 1, "expected a MAC address like 02:00:00:00:00:01"))?,
                    )
                }
                "ctorigsport" => {
                    p.ct_orig_sport = need("expected a port")?
                        .parse()
                        .map_err(|_| err(i + 1, "expected a port 0-65535"))?
                }
                "ctproto" => {
                    p.ct_proto = protocol_number(need("expected a protocol")?)
                        .ok_or_else(|| err(i + 1, "expected a protocol name or number"))?
                }
                "ctorigsrc" | "ctorigdst" | "ctreplsrc" | "ctrepldst" => {
                    let v = need("expected an address")?;
                    let (fam, a) = v
                        .parse::<IpAddr>()
                        .map(from_ip)
                        .map_err(|_| err(i + 1, "expected an IP address"))?;
                    if fam != p.family {
                        return Err(err(i + 1, "the conntrack entry's addresses are of the packet's family"));
                    }
                    let field = match key {
                        "ctorigsrc" => Field::CtOrigSrc,
                        "ctorigdst" => Field::CtOrigDst,
                        "ctreplsrc" => Field::CtReplSrc,
                        _ => Field::CtReplDst,
                    };
                    p.set_ct_addr(field, a);
                }
                "flags" => {
                    p.tcp_flags = tcp_flags::parse_list(need("expected TCP flags like SYN,ACK")?)
                        .ok_or_else(|| err(i + 1, "expected TCP flags like SYN,ACK"))?
                }
                "type" => {
                    p.icmp_type = need("expected an ICMP type")?
                        .parse()
                        .map_err(|_| err(i + 1, "expected an ICMP type 0-255"))?
                }
                "code" => {
                    p.icmp_code = need("expected an ICMP code")?
                        .parse()
                        .map_err(|_| err(i + 1, "expected an ICMP code 0-255"))?
                }
                "len" => {
                    p.len = need("expected a length")?
                        .parse()
                        .map_err(|_| err(i + 1, "expected a length in bytes"))?
                }
                "ttl" => {
                    p.ttl = need("expected a TTL")?
                        .parse()
                        .map_err(|_| err(i + 1, "expected a TTL (hop limit) 0-255"))?
                }
                "dscp" => {
                    p.dscp = need("expected a DSCP")?
                        .parse()
                        .ok()
                        .filter(|&d: &u8| d < 64)
                        .ok_or_else(|| err(i + 1, "expected a DSCP 0-63"))?
                }
                "stype" | "dtype" => {
                    let v = need("expected an address type like local")?;
                    let t = crate::addr_type::from_name(v).ok_or_else(|| {
                        err(
                            i + 1,
                            "expected an address type: unspec, unicast, local, broadcast, anycast, multicast, blackhole, unreachable, prohibit, throw, nat or xresolve",
                        )
                    })?;
                    if key == "stype" {
                        p.src_type = Some(t)
                    } else {
                        p.dst_type = Some(t)
                    }
                }
                "rpath" => {
                    let v = need("expected where the route back leaves: iif, other or none")?;
                    p.rev_path = crate::rev_path::from_name(v)
                        .ok_or_else(|| err(i + 1, "expected iif, other or none"))?;
                }
                "pkttype" => {
                    let v = need("expected a packet type like broadcast")?;
                    p.pkt_type = Some(crate::pkt_type::from_name(v).ok_or_else(|| {
                        err(i + 1, "expected host, broadcast, multicast or other")
                    })?);
                }
                "mark" | "ctmark" => {
                    let text = need("expected a mark")?;
                    let v = match text.strip_prefix("0x") {
                        Some(h) => u32::from_str_radix(h, 16).ok(),
                        None => text.parse().ok(),
                    }
                    .ok_or_else(|| err(i + 1, "expected a mark 0-0xffffffff"))?;
                    if key == "mark" {
                        p.mark = v
                    } else {
                        p.ct_mark = v
                    }
                }
                "frag" => {
                    p.fragment = true;
                    i += 1;
                    continue;
                }
                _ => return Err(err(
                    i,
                    "expected iif, oif, ct, ctstatus, ctorigdport, ctorigsport, ctproto, ctorigsrc, ctorigdst, ctreplsrc, ctrepldst, mark, ctmark, flags, type, code, len, ttl, dscp, stype, dtype, pkttype, rpath or frag",
                )),
            }
            i += 2;
        }
        Ok(p)
    }
}

fn split_words(s: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in s.char_indices() {
        match (c.is_whitespace(), start) {
            (true, Some(st)) => {
                out.push((st, &s[st..i]));
                start = None;
            }
            (false, None) => start = Some(i),
            _ => {}
        }
    }
    if let Some(st) = start {
        out.push((st, &s[st..]));
    }
    out
}

fn parse_endpoint(s: &str) -> Option<(IpAddr, Option<u16>)> {
    if let Some(rest) = s.strip_prefix('[') {
        let (addr, after) = rest.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p.parse().ok()?),
            None if after.is_empty() => None,
            None => return None,
        };
        return Some((IpAddr::V6(addr.parse().ok()?), port));
    }
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some((ip, None));
    }
    let (addr, port) = s.rsplit_once(':')?;
    Some((IpAddr::V4(addr.parse().ok()?), Some(port.parse().ok()?)))
}

impl fmt::Display for Packet {
    /// Formats in the `--packet` syntax, so display then parse round-trips.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let proto = protocol_name(self.proto)
            .map(str::to_string)
            .unwrap_or_else(|| self.proto.to_string());
        let ep = |ip: IpAddr, port: u16| match ip {
            IpAddr::V4(a) => format!("{a}:{port}"),
            IpAddr::V6(a) => format!("[{a}]:{port}"),
        };
        write!(
            f,
            "{proto} {} > {}",
            ep(self.src_ip(), self.sport),
            ep(self.dst_ip(), self.dport)
        )?;
        if self.iif != IfName::default() {
            write!(f, " iif {}", self.iif)?;
        }
        if self.oif != IfName::default() {
            write!(f, " oif {}", self.oif)?;
        }
        write!(
            f,
            " ct {}",
            self.ct_state.iptables_name().to_ascii_lowercase()
        )?;
        write!(f, " flags {}", tcp_flags::format_list(self.tcp_flags))?;
        if self.icmp_type != 0 || self.icmp_code != 0 {
            write!(f, " type {} code {}", self.icmp_type, self.icmp_code)?;
        }
        if self.fragment {
            f.write_str(" frag")?;
        }
        if self.ttl != Packet::DEFAULT_TTL {
            write!(f, " ttl {}", self.ttl)?;
        }
        if self.dscp != 0 {
            write!(f, " dscp {}", self.dscp)?;
        }
        if self.ct_status != 0 {
            write!(f, " ctstatus {}", crate::ct_status::names(self.ct_status))?;
        }
        let lower = |n: &str| n.to_ascii_lowercase();
        if let Some(n) = self.src_type.and_then(crate::addr_type::name) {
            write!(f, " stype {}", lower(n))?;
        }
        if let Some(n) = self.dst_type.and_then(crate::addr_type::name) {
            write!(f, " dtype {}", lower(n))?;
        }
        if let Some(n) = self.pkt_type.and_then(crate::pkt_type::name) {
            write!(f, " pkttype {n}")?;
        }
        if self.rev_path != crate::rev_path::IIF {
            let n = crate::rev_path::name(self.rev_path).unwrap_or("?");
            write!(f, " rpath {n}")?;
        }
        if self.ct_orig_dport != 0 {
            write!(f, " ctorigdport {}", self.ct_orig_dport)?;
        }
        if self.ct_orig_sport != 0 {
            write!(f, " ctorigsport {}", self.ct_orig_sport)?;
        }
        if self.ct_proto != 0 {
            write!(f, " ctproto {}", self.ct_proto)?;
        }
        for field in CT_ADDR_FIELDS {
            if let Some(a) = self.ct_addr(field) {
                let name = field.name();
                write!(f, " {name} {}", to_ip(self.family, a))?;
            }
        }
        if self.mark != 0 {
            write!(f, " mark {:#x}", self.mark)?;
        }
        if self.ct_mark != 0 {
            write!(f, " ctmark {:#x}", self.ct_mark)?;
        }
        if let Some(m) = self.mac_src {
            write!(f, " macsrc {}", crate::mac::format(m))?;
        }
        if let Some(h) = crate::routing::from_key_value(self.rt as u128) {
            write!(f, " rt {}/{}/{}", h.rt_type, h.segments_left, h.hdrlen)?;
        }
        for (name, v) in [("skuid", self.sk_uid), ("skgid", self.sk_gid)] {
            match v {
                0 => {}
                1 => write!(f, " {name} nofile")?,
                id => write!(f, " {name} {}", id - 2)?,
            }
        }
        if let Some(o) = &self.tcp_options {
            f.write_str(" tcpopt ")?;
            for b in o.iter() {
                write!(f, "{b:02x}")?;
            }
        }
        if let Some(d) = &self.datagram {
            f.write_str(" datagram ")?;
            for b in d.iter() {
                write!(f, "{b:02x}")?;
            }
        }
        write!(f, " len {}", self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_v6_and_options() {
        let p: Packet = "udp [2001:db8::1]:53 > [2001:db8::2]:5353 oif wg0 ct established len 100"
            .parse()
            .unwrap();
        assert_eq!(p.family, Family::V6);
        assert_eq!((p.sport, p.dport, p.len), (53, 5353, 100));
        assert_eq!(p.ct_state, CtState::Established);
        assert_eq!(p.oif.to_string(), "wg0");
        let m: Packet = "udp 1.2.3.4:1 > 5.6.7.8:2 mark 0xff00 ctmark 12"
            .parse()
            .unwrap();
        assert_eq!((m.mark, m.ct_mark), (0xff00, 12));
    }

    #[test]
    fn display_round_trips() {
        for s in [
            "tcp 10.0.0.1:1 > 10.0.0.2:22 iif eth0 flags SYN,ACK frag",
            "udp 10.0.0.1:1 > 10.0.0.2:53 ttl 1 dscp 46 len 1500",
            "tcp 10.0.0.1:1 > 10.0.0.2:80 ct established ctstatus confirmed,dnat",
            "udp 0.0.0.0:68 > 10.0.0.255:67 dtype broadcast pkttype broadcast stype unspec",
            "tcp 10.0.0.1:1 > 10.0.0.2:80 ct established ctorigdport 25 ctproto 6",
            "udp 10.0.0.1:1 > 10.0.0.2:53 ct established ctorigdst 192.0.2.1 ctreplsrc 10.0.0.2",
            "udp [::1]:1 > [::2]:2 ctorigsrc 2001:db8::1 ctrepldst ::3",
            "icmp 1.2.3.4 > 5.6.7.8 type 8 code 0",
            "udp [::1]:1 > [::2]:2",
            "udp 10.0.0.1:1 > 10.0.0.2:53 mark 0x40000 ctmark 7",
            "tcp 10.0.0.1:1 > 10.0.0.2:22 tcpopt 020405b401010402",
            "udp 10.0.0.1:1 > 10.0.0.2:53 datagram 4500001c",
        ] {
            let p: Packet = s.parse().unwrap();
            let again: Packet = p.to_string().parse().unwrap();
            assert_eq!(p, again, "{s}");
        }
    }

    #[test]
    fn errors_name_the_column() {
        let e = "tcp 10.0.0.1:1 < 10.0.0.2:2".parse::<Packet>().unwrap_err();
        assert_eq!(e.column, 16);
        let e = "tcp 10.0.0.1 > ::1".parse::<Packet>().unwrap_err();
        assert!(e.message.contains("same family"));
        assert!("bogus 1.1.1.1 > 2.2.2.2".parse::<Packet>().is_err());
    }
}
