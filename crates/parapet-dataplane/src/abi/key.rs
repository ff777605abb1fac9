//! The packet key the BPF parser fills (`struct parapet_key`), its flag
//! and limit constants, and what the parser made of the frame.

use parapet_model::{CtState, Family, Packet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// `parapet_key.family` of a frame that is not IP.
pub const FAMILY_NONE: u8 = 0;
/// `parapet_key.family` of an IPv4 packet.
pub const FAMILY_IPV4: u8 = 4;
/// `parapet_key.family` of an IPv6 packet.
pub const FAMILY_IPV6: u8 = 6;

/// `frag` bit: the packet is part of a fragmented datagram.
pub const FRAG_FRAGMENT: u8 = 0x01;
/// `frag` bit: a non-first fragment; it has no transport header and ports 0.
pub const FRAG_LATER: u8 = 0x02;

/// `flags` bit: an 802.1Q/802.1ad tag was present (`vlan_id` is valid).
pub const KEY_F_VLAN: u8 = 0x01;
/// `flags` bit: the conntrack lookup ran and `ctstate` is its result.
pub const KEY_F_CT: u8 = 0x02;
/// `flags` bits 2..7: the conntrack entry's status bits 0..5
/// (`parapet_model::ct_status`) at the netfilter hooks, else 0 (in `flags`
/// so the key stays 60 bytes: the XDP program's stack is at its limit).
pub const KEY_CT_STATUS_SHIFT: u8 = 2;

/// Most VLAN tags the parser walks; a frame with more is refused.
pub const MAX_VLAN_TAGS: usize = 2;
/// Most IPv6 extension headers the parser walks; a longer chain is refused.
pub const MAX_EXT_HDRS: usize = 8;

/// Largest header offset the BPF parser dereferences (`PARAPET_MAX_OFF`).
pub const MAX_HDR_OFFSET: usize = 1024;

/// The classifier input that the BPF parser produces (`struct parapet_key`).
///
/// Addresses are network byte order as on the wire; an IPv4 address is in
/// the **last** four bytes and the first twelve are zero (not `::ffff:`
/// mapped — `family` tells which it is). Ports, `vlan_id`, `ifindex` and
/// `pkt_len` are host byte order. `pkt_len` is the L3 length the IP header
/// states (what iptables byte counters count); for non-IP frames, the frame
/// length.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PacketKey {
    /// Source address.
    pub src: [u8; 16],
    /// Destination address.
    pub dst: [u8; 16],
    /// Ingress interface index.
    pub ifindex: u32,
    /// L3 length (see the type docs).
    pub pkt_len: u32,
    /// Source port (TCP, UDP, UDP-Lite, SCTP, DCCP), else 0.
    pub sport: u16,
    /// Destination port, else 0.
    pub dport: u16,
    /// VID of the outer VLAN tag when `flags & KEY_F_VLAN`, else 0.
    pub vlan_id: u16,
    /// [`FAMILY_NONE`], [`FAMILY_IPV4`] or [`FAMILY_IPV6`].
    pub family: u8,
    /// Transport protocol (after the IPv6 extension chain).
    pub proto: u8,
    /// ICMP or ICMPv6 type, else 0.
    pub icmp_type: u8,
    /// ICMP or ICMPv6 code, else 0.
    pub icmp_code: u8,
    /// TCP flags byte (CWR..FIN), else 0.
    pub tcp_flags: u8,
    /// [`FRAG_FRAGMENT`] / [`FRAG_LATER`] bits.
    pub frag: u8,
    /// [`KEY_F_VLAN`] and [`KEY_F_CT`] bits, and the conntrack status above
    /// [`KEY_CT_STATUS_SHIFT`].
    pub flags: u8,
    /// `CT_*` from the kernel's conntrack table when the lookup ran for
    /// this packet (`flags & KEY_F_CT`), else 0.
    pub ctstate: u8,
    /// IPv4 TTL or IPv6 hop limit.
    pub ttl: u8,
    /// DSCP (the TOS / traffic class byte >> 2).
    pub dscp: u8,
    /// Output interface index at the FORWARD and OUTPUT netfilter hooks,
    /// else 0.
    pub oifindex: u32,
}

impl PacketKey {
    /// The source address as an [`IpAddr`], `None` for non-IP.
    pub fn src_ip(&self) -> Option<IpAddr> {
        addr(self.family, &self.src)
    }

    /// The destination address as an [`IpAddr`], `None` for non-IP.
    pub fn dst_ip(&self) -> Option<IpAddr> {
        addr(self.family, &self.dst)
    }
}

/// `PacketKey` is the C ABI view of a [`Packet`], the one packet shape:
/// the image key of a parsed packet is `KeyWords::new(&key.to_packet(..), sets)`.
impl PacketKey {
    /// The packet this key describes, as the BPF program builds its image
    /// key from it: `iif` the ingress interface's name, no `oif` at
    /// ingress, `ctstate` the conntrack result when the lookup ran else
    /// UNTRACKED, `fragment` for non-first fragments. `None` for non-IP
    /// frames (never classified).
    pub fn to_packet(&self, iif: parapet_model::IfName) -> Option<Packet> {
        let family = match self.family {
            FAMILY_IPV4 => Family::V4,
            FAMILY_IPV6 => Family::V6,
            _ => return None,
        };
        let ct_state = match self.ctstate {
            _ if self.flags & KEY_F_CT == 0 => CtState::Untracked,
            s => CtState::ALL
                .into_iter()
                .find(|c| *c as u8 == s)
                .unwrap_or(CtState::Invalid),
        };
        Some(Packet {
            family,
            src: u128::from_be_bytes(self.src),
            dst: u128::from_be_bytes(self.dst),
            proto: self.proto,
            sport: self.sport,
            dport: self.dport,
            icmp_type: self.icmp_type,
            icmp_code: self.icmp_code,
            tcp_flags: self.tcp_flags,
            iif,
            oif: parapet_model::IfName::default(),
            ct_state,
            ct_status: self.flags >> KEY_CT_STATUS_SHIFT,
            // the key extension (parapet_key_ext) is not part of the key:
            // 0, as at the interface hooks
            ct_orig_dport: 0,
            ct_orig_sport: 0,
            ct_proto: 0,
            // not in the key (the compilers refuse rules reading them)
            ct_addrs: None,
            fragment: self.frag & FRAG_LATER != 0,
            ttl: self.ttl,
            dscp: self.dscp,
            len: self.pkt_len,
            // Not in the key (yet): by prefix, as the linear engine reads
            // an unnamed type.
            src_type: None,
            dst_type: None,
            pkt_type: None,
            // not in this key: the walk state's key extension (parapet.h)
            mark: 0,
            ct_mark: 0,
            mac_src: None,
            sk_uid: 0,
            sk_gid: 0,
            rt: 0,
            // not in the key (the compilers refuse rules reading them)
            rev_path: parapet_model::rev_path::IIF,
            tcp_options: None,
            datagram: None,
        })
    }

    /// The key of a packet as the BPF parser would fill it (no interface
    /// index, no VLAN; `ctstate` with [`KEY_F_CT`] unless UNTRACKED; a
    /// fragment is a non-first one).
    pub fn from_packet(p: &Packet) -> PacketKey {
        let tracked = p.ct_state != CtState::Untracked;
        PacketKey {
            src: p.src.to_be_bytes(),
            dst: p.dst.to_be_bytes(),
            pkt_len: p.len,
            sport: p.sport,
            dport: p.dport,
            family: match p.family {
                Family::V4 => FAMILY_IPV4,
                Family::V6 => FAMILY_IPV6,
            },
            proto: p.proto,
            icmp_type: p.icmp_type,
            icmp_code: p.icmp_code,
            tcp_flags: p.tcp_flags,
            frag: if p.fragment {
                FRAG_FRAGMENT | FRAG_LATER
            } else {
                0
            },
            flags: if tracked { KEY_F_CT } else { 0 } | p.ct_status << KEY_CT_STATUS_SHIFT,
            ctstate: if tracked { p.ct_state as u8 } else { 0 },
            ttl: p.ttl,
            dscp: p.dscp,
            ..PacketKey::default()
        }
    }
}

fn addr(family: u8, b: &[u8; 16]) -> Option<IpAddr> {
    match family {
        FAMILY_IPV4 => Some(IpAddr::V4(Ipv4Addr::new(b[12], b[13], b[14], b[15]))),
        FAMILY_IPV6 => Some(IpAddr::V6(Ipv6Addr::from(*b))),
        _ => None,
    }
}

/// What the parser made of a frame (`enum parapet_parse_status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum ParseStatus {
    /// Parsed; the key is complete.
    Ok = 0,
    /// Not IP (ARP, LLDP, ...): passed without classification.
    NotIp = 1,
    /// A header runs past the end of the data or the datagram: dropped.
    Truncated = 2,
    /// Bad IP version, IHL, length or TCP data offset: dropped.
    Malformed = 3,
    /// More VLAN tags or IPv6 extension headers than the parser walks:
    /// dropped.
    ExtLimit = 4,
}

impl ParseStatus {
    /// From the raw value the BPF side writes; unknown values map to `None`.
    pub fn from_raw(v: u32) -> Option<Self> {
        Some(match v {
            0 => Self::Ok,
            1 => Self::NotIp,
            2 => Self::Truncated,
            3 => Self::Malformed,
            4 => Self::ExtLimit,
            _ => return None,
        })
    }
}

#[cfg(test)]
mod packet_view {
    use super::*;
    use parapet_model::IfName;

    #[test]
    fn packet_key_and_packet_convert_both_ways() {
        let mut p = Packet::new(Family::V6, 1 << 100 | 5, 7, 6, 1000, 22);
        p.iif = IfName::new("eth0").unwrap();
        p.ct_state = CtState::Established;
        p.fragment = true;
        let k = PacketKey::from_packet(&p);
        assert_eq!(k.src_ip(), Some(p.src_ip()));
        assert_eq!(k.to_packet(p.iif), Some(p.clone()));
        p.family = Family::V4;
        p.src = 0x0a00_0001;
        p.ct_state = CtState::Untracked;
        let k = PacketKey::from_packet(&p);
        assert_eq!(k.src_ip(), Some(p.src_ip()));
        assert_eq!(k.flags & KEY_F_CT, 0);
        assert_eq!(k.to_packet(p.iif), Some(p));
        let non_ip = PacketKey::default();
        assert_eq!(non_ip.to_packet(IfName::default()), None);
    }
}
