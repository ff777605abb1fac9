//! The dimensions a rule can constrain.
//!
//! Every field is an unsigned integer of a fixed width, so a rule is a box in
//! a d-dimensional space and every classifier sees one uniform problem.
//! Fields that are not numbers in the packet are made into numbers here:
//! interface names are their 16 bytes read big-endian (so `eth+` is a prefix,
//! like an address), conntrack state is a small enum, set membership is one
//! bit per referenced set.

use serde::{Deserialize, Serialize};
use std::fmt;

/// One dimension of the classification space.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Field {
    /// Address family: 4 or 6.
    Family,
    /// Source address. IPv4 addresses are their 32-bit value, IPv6 their
    /// 128-bit value; the family field tells them apart.
    SrcAddr,
    /// Destination address, as [`Field::SrcAddr`].
    DstAddr,
    /// Transport protocol number (IPv6: after extension headers).
    Proto,
    /// Source port (TCP, UDP, SCTP, UDP-Lite; 0 otherwise).
    SrcPort,
    /// Destination port.
    DstPort,
    /// ICMP or ICMPv6 `type << 8 | code`, so `--icmp-type 3` is `[0x300, 0x3ff]`.
    IcmpTypeCode,
    /// The TCP flags byte (FIN = 0x01 … CWR = 0x80).
    TcpFlags,
    /// Input interface name as a big-endian 128-bit number ([`IfName`]).
    InIface,
    /// Output interface name.
    OutIface,
    /// Conntrack state ([`CtState`] as a number).
    CtState,
    /// 1 for non-first IPv4/IPv6 fragments, 0 otherwise.
    Fragment,
    /// IPv4 time to live or IPv6 hop limit (`-m ttl`, `-m hl`, `ip ttl`,
    /// `ip6 hoplimit`).
    Ttl,
    /// The DSCP: the upper six bits of the IPv4 TOS byte or the IPv6
    /// traffic class (`-m dscp`, `ip dscp`, `ip6 dscp`).
    Dscp,
    /// The L3 length: IPv4 total length, IPv6 payload length + 40
    /// (`-m length`, `meta length`).
    Length,
    /// The conntrack entry's status bits the key carries
    /// ([`ct_status`]: expected, seen-reply, assured, confirmed, snat,
    /// dnat; `ct status`, `--ctstatus`, `--ctstate SNAT|DNAT`); 0 for a
    /// packet without an entry.
    CtStatus,
    /// The source address's type ([`crate::addr_type`]: the kernel's
    /// `RTN_*` route type; `-m addrtype --src-type`, `fib saddr type`).
    SrcType,
    /// The destination address's type (`--dst-type`, `fib daddr type`).
    DstType,
    /// The link-layer packet type ([`crate::pkt_type`]: the kernel's
    /// `PACKET_*`; `-m pkttype`, `meta pkttype`).
    PktType,
    /// The destination port of the conntrack entry's original tuple
    /// (`--ctorigdstport`, nft `ct original proto-dst`): the kernel's
    /// `ntohs(tuple.dst.u.all)`, so for ICMP `type << 8 | code`; 0 for a
    /// packet without an entry (a rule matching it also requires one).
    CtOrigDstPort,
    /// The source port of the conntrack entry's original tuple
    /// (`--ctorigsrcport`, nft `ct original proto-src`), as
    /// [`Field::CtOrigDstPort`]. Not in the packet key yet: only the
    /// linear engine evaluates it (the compiled engines refuse it).
    CtOrigSrcPort,
    /// The conntrack entry's layer-4 protocol (`--ctproto`, nft
    /// `ct protocol`); 0 for a packet without an entry.
    CtProto,
    /// The source address of the conntrack entry's original tuple
    /// (`--ctorigsrc`, nft `ct original ip|ip6 saddr`), as
    /// [`Field::SrcAddr`] holds addresses. A rule matching it also
    /// requires an entry. Not in the packet key: only the linear engine
    /// evaluates it (the compiled engines refuse it), as
    /// [`Field::CtOrigSrcPort`].
    CtOrigSrc,
    /// The destination address of the original tuple (`--ctorigdst`, nft
    /// `ct original ip|ip6 daddr`): before DNAT.
    CtOrigDst,
    /// The source address of the reply tuple (`--ctreplsrc`, nft `ct
    /// reply ip|ip6 saddr`): who answers, after DNAT.
    CtReplSrc,
    /// The destination address of the reply tuple (`--ctrepldst`, nft
    /// `ct reply ip|ip6 daddr`): whom the answer goes to, after SNAT.
    CtReplDst,
    /// The packet's mark (`skb->mark`: `-m mark`, nft `meta mark`); 0 at
    /// XDP, where no socket buffer exists yet.
    Mark,
    /// The conntrack entry's mark (`-m connmark`, nft `ct mark`); 0 for a
    /// packet without an entry and at the interface hooks.
    CtMark,
    /// The Ethernet source address (`-m mac --mac-source`, nft `ether
    /// saddr`) with a presence bit: `1 << 48 | mac` when the packet has an
    /// Ethernet header the hook can read, 0 when it has none (xt_mac and
    /// nft's link-layer payload then match nothing, negated or not).
    MacSrc,
    /// The owner uid of the packet's socket (`-m owner --uid-owner`,
    /// `--socket-exists`, nft `meta skuid`), packed with whether there is
    /// one ([`crate::owner`]); key word 42 (field id 25), filled at the
    /// netfilter OUTPUT and POSTROUTING hooks only (`docs/hooks.md`).
    SkUid,
    /// The owner gid of the packet's socket (`--gid-owner`, `meta skgid`),
    /// packed as [`Field::SkUid`]; key word 43 (field id 26).
    SkGid,
    /// The packet's first IPv6 routing header (`-m rt`, nft `rt type|
    /// seg-left|hdrlength`), packed with a presence bit
    /// ([`crate::routing`]: `1 << 24 | type << 16 | segments_left << 8 |
    /// hdrlen`, 0 without one): key word 41, field id 24.
    Routing,
    /// Where the host's route back to the source leaves
    /// ([`crate::rev_path`]: through the input interface, another one, or
    /// none): nft's `fib saddr [. iif] oif missing|exists`. Key word 56
    /// (field id 29): the kernel dataplane fills it at XDP and tc with
    /// `bpf_fib_lookup`; the netfilter hooks cannot (`apply` refuses it
    /// there).
    RevPath,
    /// Whether TCP option kind `n` is among the segment's options, as
    /// xt_tcpudp's walk finds it ([`crate::tcp_option`]; `-m tcp
    /// --tcp-option n`): 1 present, 0 absent (and 0 for a segment without
    /// options or a packet that is not TCP). The compiled engines test it
    /// as one bit of [`Field::TcpOptionsLow`] or [`Field::TcpOptionsHigh`].
    TcpOption(u8),
    /// The option kinds 0..=127 xt_tcpudp's walk reads in the segment's
    /// option area, as a bitmap (bit `n`: kind `n`;
    /// [`crate::tcp_option::kinds`]); 0 for a packet that is not TCP. The
    /// key's form of [`Field::TcpOption`] (key words 44..=47, field id
    /// 27): no rule constrains it, the compiler lowers `TcpOption(n)` to a
    /// masked test of its bit.
    TcpOptionsLow,
    /// The option kinds 128..=255, as [`Field::TcpOptionsLow`] (bit `n`:
    /// kind `128 + n`; key words 48..=51, field id 28).
    TcpOptionsHigh,
    /// The packet's bytes (`-m string`): not a key field; it names a
    /// failed string match in traces and refusals (the matches ride in
    /// [`crate::Matches::payload`]).
    Payload,
    /// Membership of the packet's key in the ruleset's set reference `n`
    /// ([`crate::SetRef`]): 1 when the set holds it.
    Set(u16),
}

impl Field {
    /// The fixed fields, in the order engines lay them out.
    pub const FIXED: [Field; 30] = [
        Field::Family,
        Field::SrcAddr,
        Field::DstAddr,
        Field::Proto,
        Field::SrcPort,
        Field::DstPort,
        Field::IcmpTypeCode,
        Field::TcpFlags,
        Field::InIface,
        Field::OutIface,
        Field::CtState,
        Field::Fragment,
        Field::Ttl,
        Field::Dscp,
        Field::Length,
        Field::CtStatus,
        Field::Mark,
        Field::CtMark,
        Field::CtOrigDstPort,
        Field::CtProto,
        Field::SrcType,
        Field::DstType,
        Field::PktType,
        Field::MacSrc,
        Field::Routing,
        Field::SkUid,
        Field::SkGid,
        Field::TcpOptionsLow,
        Field::TcpOptionsHigh,
        Field::RevPath,
    ];

    /// Width of the field in bits.
    pub fn width(self) -> u32 {
        match self {
            Field::SrcAddr
            | Field::DstAddr
            | Field::InIface
            | Field::OutIface
            | Field::CtOrigSrc
            | Field::CtOrigDst
            | Field::CtReplSrc
            | Field::CtReplDst
            | Field::TcpOptionsLow
            | Field::TcpOptionsHigh => 128,
            Field::SrcPort
            | Field::DstPort
            | Field::IcmpTypeCode
            | Field::CtOrigDstPort
            | Field::CtOrigSrcPort => 16,
            Field::Family
            | Field::Proto
            | Field::TcpFlags
            | Field::CtState
            | Field::Ttl
            | Field::CtProto => 8,
            Field::Dscp | Field::CtStatus => 6,
            Field::SrcType | Field::DstType => 4,
            Field::PktType => 3,
            Field::RevPath => 2,
            Field::Length | Field::Mark | Field::CtMark | Field::SkUid | Field::SkGid => 32,
            Field::Fragment | Field::Set(_) | Field::TcpOption(_) | Field::Payload => 1,
            Field::MacSrc => 49,
            Field::Routing => 25,
        }
    }

    /// True for the fields holding an address of the packet's family
    /// (IPv4 in the low 32 bits): the packet's own and the conntrack
    /// entry's tuples.
    pub fn is_address(self) -> bool {
        matches!(
            self,
            Field::SrcAddr
                | Field::DstAddr
                | Field::CtOrigSrc
                | Field::CtOrigDst
                | Field::CtReplSrc
                | Field::CtReplDst
        )
    }

    /// Largest value of the field.
    pub fn max_value(self) -> u128 {
        crate::interval::width_mask(self.width())
    }

    /// A short lowercase name, used in listings and explanations.
    pub fn name(self) -> String {
        match self {
            Field::Family => "family".into(),
            Field::SrcAddr => "saddr".into(),
            Field::DstAddr => "daddr".into(),
            Field::Proto => "proto".into(),
            Field::SrcPort => "sport".into(),
            Field::DstPort => "dport".into(),
            Field::IcmpTypeCode => "icmp".into(),
            Field::TcpFlags => "tcpflags".into(),
            Field::InIface => "iif".into(),
            Field::OutIface => "oif".into(),
            Field::CtState => "ctstate".into(),
            Field::Fragment => "fragment".into(),
            Field::Ttl => "ttl".into(),
            Field::Dscp => "dscp".into(),
            Field::Length => "length".into(),
            Field::CtStatus => "ctstatus".into(),
            Field::SrcType => "stype".into(),
            Field::DstType => "dtype".into(),
            Field::PktType => "pkttype".into(),
            Field::CtOrigDstPort => "ctorigdport".into(),
            Field::CtOrigSrcPort => "ctorigsport".into(),
            Field::CtProto => "ctproto".into(),
            Field::CtOrigSrc => "ctorigsrc".into(),
            Field::CtOrigDst => "ctorigdst".into(),
            Field::CtReplSrc => "ctreplsrc".into(),
            Field::CtReplDst => "ctrepldst".into(),
            Field::Mark => "mark".into(),
            Field::CtMark => "ctmark".into(),
            Field::MacSrc => "macsrc".into(),
            Field::SkUid => "skuid".into(),
            Field::SkGid => "skgid".into(),
            Field::Routing => "rt".into(),
            Field::RevPath => "rpath".into(),
            Field::TcpOption(n) => format!("tcpopt{n}"),
            Field::TcpOptionsLow => "tcpopts0".into(),
            Field::TcpOptionsHigh => "tcpopts1".into(),
            Field::Payload => "string".into(),
            Field::Set(n) => format!("set{n}"),
        }
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// Address family of a packet or rule.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Family {
    /// IPv4.
    V4,
    /// IPv6.
    V6,
}

impl Family {
    /// The value of [`Field::Family`] for this family.
    pub fn value(self) -> u128 {
        match self {
            Family::V4 => 4,
            Family::V6 => 6,
        }
    }

    /// Address width in bits.
    pub fn addr_bits(self) -> u32 {
        match self {
            Family::V4 => 32,
            Family::V6 => 128,
        }
    }
}

/// Conntrack state of a packet, as the kernel's conntrack reports it.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[repr(u8)]
pub enum CtState {
    /// Not part of a valid connection.
    Invalid = 0,
    /// First packet of a connection.
    New = 1,
    /// Part of a connection seen in both directions.
    Established = 2,
    /// Starts a connection related to an existing one (FTP data, ICMP errors).
    Related = 3,
    /// Exempted from tracking (`-j CT --notrack`).
    Untracked = 4,
}

impl CtState {
    /// All states, in value order.
    pub const ALL: [CtState; 5] = [
        CtState::Invalid,
        CtState::New,
        CtState::Established,
        CtState::Related,
        CtState::Untracked,
    ];

    /// iptables' upper-case spelling (`ESTABLISHED`).
    pub fn iptables_name(self) -> &'static str {
        match self {
            CtState::Invalid => "INVALID",
            CtState::New => "NEW",
            CtState::Established => "ESTABLISHED",
            CtState::Related => "RELATED",
            CtState::Untracked => "UNTRACKED",
        }
    }

    /// Parses either spelling, case-insensitively.
    pub fn from_name(s: &str) -> Option<CtState> {
        CtState::ALL
            .into_iter()
            .find(|c| c.iptables_name().eq_ignore_ascii_case(s))
    }
}

/// Conntrack status bits as the kernel's `IPS_*` numbers them (the low six,
/// the ones the packet key carries).
pub mod ct_status {
    /// `IPS_EXPECTED`: the connection was expected (a helper's child).
    pub const EXPECTED: u8 = 0x01;
    /// `IPS_SEEN_REPLY`: packets were seen in both directions.
    pub const SEEN_REPLY: u8 = 0x02;
    /// `IPS_ASSURED`: the entry will not be dropped early.
    pub const ASSURED: u8 = 0x04;
    /// `IPS_CONFIRMED`: the entry is in the table (after its first packet).
    pub const CONFIRMED: u8 = 0x08;
    /// `IPS_SRC_NAT`: source NAT applies to the connection.
    pub const SNAT: u8 = 0x10;
    /// `IPS_DST_NAT`: destination NAT applies to the connection.
    pub const DNAT: u8 = 0x20;

    /// nft's names, in bit order.
    pub const NAMES: [(&str, u8); 6] = [
        ("expected", EXPECTED),
        ("seen-reply", SEEN_REPLY),
        ("assured", ASSURED),
        ("confirmed", CONFIRMED),
        ("snat", SNAT),
        ("dnat", DNAT),
    ];

    /// The bit of an nft name (`dnat`, `seen-reply`).
    pub fn from_name(s: &str) -> Option<u8> {
        NAMES.iter().find(|(n, _)| *n == s).map(|&(_, b)| b)
    }

    /// The bits as nft writes them, comma-separated in bit order
    /// (`snat,dnat`); empty for 0.
    pub fn names(bits: u8) -> String {
        let v: Vec<&str> = NAMES
            .iter()
            .filter(|(_, b)| bits & b != 0)
            .map(|(n, _)| *n)
            .collect();
        v.join(",")
    }
}

/// TCP flag bits as they sit in the header's flags byte.
pub mod tcp_flags {
    /// FIN.
    pub const FIN: u8 = 0x01;
    /// SYN.
    pub const SYN: u8 = 0x02;
    /// RST.
    pub const RST: u8 = 0x04;
    /// PSH.
    pub const PSH: u8 = 0x08;
    /// ACK.
    pub const ACK: u8 = 0x10;
    /// URG.
    pub const URG: u8 = 0x20;
    /// ECE.
    pub const ECE: u8 = 0x40;
    /// CWR.
    pub const CWR: u8 = 0x80;
    /// Names in iptables order, with their bits.
    pub const NAMES: [(&str, u8); 8] = [
        ("FIN", FIN),
        ("SYN", SYN),
        ("RST", RST),
        ("PSH", PSH),
        ("ACK", ACK),
        ("URG", URG),
        ("ECE", ECE),
        ("CWR", CWR),
    ];

    /// Parses `SYN,ACK`, `ALL` or `NONE` into a bit mask.
    pub fn parse_list(s: &str) -> Option<u8> {
        match s.to_ascii_uppercase().as_str() {
            "ALL" => return Some(0xff),
            "NONE" => return Some(0),
            _ => {}
        }
        let mut bits = 0u8;
        for part in s.split(',') {
            let (_, bit) = NAMES.iter().find(|(n, _)| n.eq_ignore_ascii_case(part))?;
            bits |= bit;
        }
        Some(bits)
    }

    /// Formats a mask as `SYN,ACK` (`NONE` when empty).
    pub fn format_list(bits: u8) -> String {
        if bits == 0 {
            return "NONE".into();
        }
        let names: Vec<&str> = NAMES
            .iter()
            .filter(|(_, b)| bits & b != 0)
            .map(|(n, _)| *n)
            .collect();
        names.join(",")
    }
}

/// An interface name packed into a `u128`: its bytes big-endian, zero padded.
///
/// Ordering of the numbers is the ordering of the names, so iptables' `eth+`
/// (every name starting with `eth`) is one interval, just like a prefix.
///
/// ```
/// use parapet_model::IfName;
/// let eth0 = IfName::new("eth0").unwrap();
/// let (lo, hi) = IfName::wildcard_range("eth");
/// assert!(lo <= eth0.0 && eth0.0 <= hi);
/// assert_eq!(eth0.to_string(), "eth0");
/// ```
#[derive(
    Copy, Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
pub struct IfName(pub u128);

impl IfName {
    /// Longest name the kernel allows (IFNAMSIZ less the NUL).
    pub const MAX_LEN: usize = 15;

    /// Packs a name; `None` when it is longer than [`IfName::MAX_LEN`] or
    /// holds a NUL byte.
    pub fn new(name: &str) -> Option<IfName> {
        let bytes = name.as_bytes();
        if bytes.len() > Self::MAX_LEN || bytes.contains(&0) {
            return None;
        }
        let mut buf = [0u8; 16];
        buf[..bytes.len()].copy_from_slice(bytes);
        Some(IfName(u128::from_be_bytes(buf)))
    }

    /// The interval of every name that starts with `prefix`.
    pub fn wildcard_range(prefix: &str) -> (u128, u128) {
        let bytes = prefix.as_bytes();
        let len = bytes.len().min(16);
        let mut lo = [0u8; 16];
        lo[..len].copy_from_slice(&bytes[..len]);
        let mut hi = [0xffu8; 16];
        hi[..len].copy_from_slice(&bytes[..len]);
        (u128::from_be_bytes(lo), u128::from_be_bytes(hi))
    }

    /// The name as bytes without padding.
    pub fn as_bytes(&self) -> Vec<u8> {
        let b = self.0.to_be_bytes();
        let end = b.iter().position(|&c| c == 0).unwrap_or(16);
        b[..end].to_vec()
    }
}

impl fmt::Display for IfName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&String::from_utf8_lossy(&self.as_bytes()))
    }
}
