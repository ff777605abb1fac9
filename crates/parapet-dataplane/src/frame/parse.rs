//! The user-space twin of the BPF parser in `bpf/lib/parse.h`.
//!
//! It turns a frame into the same [`PacketKey`] and [`ParseStatus`] the
//! kernel program computes, rule for rule, so that (a) user-space tools
//! (pcap replay, `parapet classify` on captures) classify exactly what the
//! dataplane would, and (b) tests can run both parsers on the same random
//! frames and demand identical results. When the BPF parser changes, this
//! file changes with it.

use crate::abi::{
    PacketKey, ParseStatus, FAMILY_IPV4, FAMILY_IPV6, FRAG_FRAGMENT, FRAG_LATER, KEY_F_VLAN,
    MAX_EXT_HDRS, MAX_HDR_OFFSET, MAX_VLAN_TAGS,
};

const ETH_P_IP: u16 = 0x0800;
const ETH_P_IPV6: u16 = 0x86dd;
const ETH_P_8021Q: u16 = 0x8100;
const ETH_P_8021AD: u16 = 0x88a8;

const IPPROTO_ICMP: u8 = 1;
const IPPROTO_TCP: u8 = 6;
const IPPROTO_UDP: u8 = 17;
const IPPROTO_DCCP: u8 = 33;
const IPPROTO_FRAGMENT: u8 = 44;
const IPPROTO_AH: u8 = 51;
const IPPROTO_ICMPV6: u8 = 58;
const IPPROTO_SCTP: u8 = 132;
const IPPROTO_UDPLITE: u8 = 136;

/// IPv6 extension headers the parser walks over (RFC 8200 and friends).
pub fn is_ipv6_ext(nh: u8) -> bool {
    matches!(nh, 0 | 43 | 44 | 51 | 60 | 135 | 139 | 140)
}

/// Parse a frame that starts at its Ethernet header.
///
/// `frame_len` is the frame's full length (the BPF program uses
/// `data_end - data` at XDP and `skb->len` at tc); for a complete frame pass
/// `frame.len()`. Fields filled before an error are left as the BPF side
/// leaves them, but only keys with [`ParseStatus::Ok`] or
/// [`ParseStatus::NotIp`] are meaningful.
pub fn parse_frame(frame: &[u8], frame_len: u32, ifindex: u32) -> (ParseStatus, PacketKey) {
    let (status, key, _) = parse_frame_tcp(frame, frame_len, ifindex);
    (status, key)
}

/// Where a TCP segment's option area lies, as the BPF parser records it
/// (`struct parapet_offs`'s `tcp_opt`, `bpf/lib/tcp_options.h`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum TcpOptionArea {
    /// Not a TCP segment the parser read, or one without options.
    #[default]
    None,
    /// The area's bytes in the frame (at most 40).
    At(std::ops::Range<usize>),
    /// The data offset runs past the datagram: the dataplane drops the
    /// segment while its images test options (the kernel's "hotdrop").
    PastDatagram,
}

/// [`parse_frame`], and where the segment's TCP options are.
pub fn parse_frame_tcp(
    frame: &[u8],
    frame_len: u32,
    ifindex: u32,
) -> (ParseStatus, PacketKey, TcpOptionArea) {
    let mut key = PacketKey {
        ifindex,
        pkt_len: frame_len,
        ..PacketKey::default()
    };
    let mut area = TcpOptionArea::None;
    let status = parse_into(frame, frame_len, &mut key, &mut area);
    (status, key, area)
}

/// `HDR_AT`: `len` bytes at `off`, if the offset is within the walk bound
/// and the bytes are all in the frame.
fn hdr(frame: &[u8], off: usize, len: usize) -> Option<&[u8]> {
    if off > MAX_HDR_OFFSET {
        return None;
    }
    frame.get(off..off.checked_add(len)?)
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn parse_into(
    frame: &[u8],
    frame_len: u32,
    key: &mut PacketKey,
    area: &mut TcpOptionArea,
) -> ParseStatus {
    let Some(eth) = hdr(frame, 0, 14) else {
        return ParseStatus::Truncated;
    };
    let mut proto = be16(eth, 12);
    let mut off = 14usize;
    for i in 0..MAX_VLAN_TAGS {
        if proto != ETH_P_8021Q && proto != ETH_P_8021AD {
            break;
        }
        let Some(tag) = hdr(frame, off, 4) else {
            return ParseStatus::Truncated;
        };
        if i == 0 {
            key.flags |= KEY_F_VLAN;
            key.vlan_id = be16(tag, 0) & 0x0fff;
        }
        proto = be16(tag, 2);
        off += 4;
    }
    if proto == ETH_P_8021Q || proto == ETH_P_8021AD {
        return ParseStatus::ExtLimit;
    }
    match proto {
        ETH_P_IP => parse_ipv4(frame, off, frame_len as usize, key, area),
        ETH_P_IPV6 => parse_ipv6(frame, off, frame_len as usize, key, area),
        _ => ParseStatus::NotIp,
    }
}

fn parse_ipv4(
    frame: &[u8],
    off: usize,
    frame_len: usize,
    key: &mut PacketKey,
    area: &mut TcpOptionArea,
) -> ParseStatus {
    let Some(ip) = hdr(frame, off, 20) else {
        return ParseStatus::Truncated;
    };
    let version = ip[0] >> 4;
    let ihl = usize::from(ip[0] & 0x0f);
    if version != 4 || ihl < 5 {
        return ParseStatus::Malformed;
    }
    let hlen = ihl * 4;
    let avail = frame_len - off;
    let mut tot = usize::from(be16(ip, 2));
    if tot == 0 {
        tot = avail;
    }
    if tot < hlen {
        return ParseStatus::Malformed;
    }
    if tot > avail || hdr(frame, off, hlen).is_none() {
        return ParseStatus::Truncated;
    }
    key.family = FAMILY_IPV4;
    key.proto = ip[9];
    key.pkt_len = tot as u32;
    key.ttl = ip[8];
    key.dscp = ip[1] >> 2;
    key.src[12..].copy_from_slice(&ip[12..16]);
    key.dst[12..].copy_from_slice(&ip[16..20]);

    let frag = be16(ip, 6);
    if frag & 0x1fff != 0 {
        key.frag = FRAG_FRAGMENT | FRAG_LATER;
        return ParseStatus::Ok;
    }
    if frag & 0x2000 != 0 {
        key.frag = FRAG_FRAGMENT;
    }
    parse_l4(frame, off + hlen, off + tot, key, area)
}

fn parse_ipv6(
    frame: &[u8],
    off: usize,
    frame_len: usize,
    key: &mut PacketKey,
    area: &mut TcpOptionArea,
) -> ParseStatus {
    let Some(ip6) = hdr(frame, off, 40) else {
        return ParseStatus::Truncated;
    };
    if ip6[0] >> 4 != 6 {
        return ParseStatus::Malformed;
    }
    let avail = frame_len - off;
    let payload = usize::from(be16(ip6, 4));
    let tot = if payload == 0 { avail } else { payload + 40 };
    if tot > avail {
        return ParseStatus::Truncated;
    }
    key.family = FAMILY_IPV6;
    key.pkt_len = tot as u32;
    key.ttl = ip6[7];
    // traffic class: the low nibble of byte 0, the high one of byte 1
    key.dscp = ((ip6[0] & 0x0f) << 2) | (ip6[1] >> 6);
    key.src.copy_from_slice(&ip6[8..24]);
    key.dst.copy_from_slice(&ip6[24..40]);

    let mut nh = ip6[6];
    let mut cur = off + 40;
    let l3_end = off + tot;
    for _ in 0..MAX_EXT_HDRS {
        if !is_ipv6_ext(nh) {
            break;
        }
        let h = match hdr(frame, cur, 8) {
            Some(h) if cur + 8 <= l3_end => h,
            _ => return ParseStatus::Truncated,
        };
        let len = match nh {
            IPPROTO_FRAGMENT => {
                let fo = be16(h, 2);
                if fo & 0xfff8 != 0 {
                    key.frag = FRAG_FRAGMENT | FRAG_LATER;
                    key.proto = h[0];
                    return ParseStatus::Ok;
                }
                if fo & 1 != 0 {
                    key.frag = FRAG_FRAGMENT;
                }
                8
            }
            IPPROTO_AH => (usize::from(h[1]) + 2) * 4,
            _ => {
                // an options or routing header longer than the datagram
                // is truncated (ip6t_rt hot-drops such a routing header;
                // the kernel's input drops both)
                let len = (usize::from(h[1]) + 1) * 8;
                if cur + len > l3_end {
                    return ParseStatus::Truncated;
                }
                len
            }
        };
        nh = h[0];
        cur += len;
        if cur > MAX_HDR_OFFSET {
            return ParseStatus::Truncated;
        }
    }
    if is_ipv6_ext(nh) {
        return ParseStatus::ExtLimit;
    }
    key.proto = nh;
    parse_l4(frame, cur, l3_end, key, area)
}

fn parse_l4(
    frame: &[u8],
    l4off: usize,
    l3_end: usize,
    key: &mut PacketKey,
    area: &mut TcpOptionArea,
) -> ParseStatus {
    let need = match key.proto {
        IPPROTO_TCP => 20,
        IPPROTO_UDP | IPPROTO_UDPLITE => 8,
        IPPROTO_SCTP | IPPROTO_DCCP => 12,
        IPPROTO_ICMP if key.family == FAMILY_IPV4 => 4,
        IPPROTO_ICMPV6 if key.family == FAMILY_IPV6 => 4,
        _ => return ParseStatus::Ok,
    };
    if l4off + need > l3_end {
        return ParseStatus::Truncated;
    }
    let Some(p) = hdr(frame, l4off, need) else {
        return ParseStatus::Truncated;
    };
    match key.proto {
        IPPROTO_ICMP | IPPROTO_ICMPV6 => {
            key.icmp_type = p[0];
            key.icmp_code = p[1];
            return ParseStatus::Ok;
        }
        IPPROTO_TCP => {
            if p[12] >> 4 < 5 {
                return ParseStatus::Malformed;
            }
            key.tcp_flags = p[13];
            let hl = usize::from(p[12] >> 4) * 4;
            *area = if l4off + hl > l3_end {
                TcpOptionArea::PastDatagram
            } else if hl > 20 {
                TcpOptionArea::At(l4off + 20..l4off + hl)
            } else {
                TcpOptionArea::None
            };
        }
        _ => {}
    }
    key.sport = be16(p, 0);
    key.dport = be16(p, 2);
    ParseStatus::Ok
}

#[cfg(test)]
mod tests {
    use super::{parse_frame_tcp, TcpOptionArea};
    use crate::abi::ParseStatus;
    use crate::frame::Frame;

    /// The option area as `struct parapet_offs`'s `tcp_opt` records it:
    /// its bytes, none, or a data offset past the datagram (still `Ok`:
    /// only images that test options drop it).
    #[test]
    fn the_tcp_option_area_is_found() {
        let syn = || Frame::ipv4([10, 0, 0, 1].into(), [10, 0, 0, 2].into()).tcp(1, 22, 2);
        let f = syn().tcp_options(&[2, 4, 5, 0xb4]).payload(3).build();
        let (st, _, area) = parse_frame_tcp(&f, f.len() as u32, 0);
        let TcpOptionArea::At(r) = area.clone() else {
            panic!("{area:?}")
        };
        assert_eq!((st, &f[r]), (ParseStatus::Ok, &[2, 4, 5, 0xb4][..]));
        let f = syn().build();
        assert_eq!(
            parse_frame_tcp(&f, f.len() as u32, 0).2,
            TcpOptionArea::None
        );
        let f = syn().tcp_doff(15).build();
        let (st, _, area) = parse_frame_tcp(&f, f.len() as u32, 0);
        assert_eq!((st, area), (ParseStatus::Ok, TcpOptionArea::PastDatagram));
        let f = Frame::ipv4([10, 0, 0, 1].into(), [10, 0, 0, 2].into())
            .udp(1, 53)
            .build();
        assert_eq!(
            parse_frame_tcp(&f, f.len() as u32, 0).2,
            TcpOptionArea::None
        );
    }
}
