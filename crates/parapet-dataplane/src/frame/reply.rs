//! The answer to a rejected packet, built in user space: a TCP reset or an
//! ICMP / ICMPv6 error, as the kernel's REJECT targets send them
//! (`nf_send_reset`, `icmp_send`, `icmpv6_send`) and as `bpf/lib/reject.h`
//! builds them at XDP and tc. parapetd sends these for REJECTs at the
//! netfilter hooks, where the program can only drop
//! (`src/reject_queue.rs`).
//!
//! Input is the packet from its network header on (possibly only its first
//! bytes); output is the reply from its network header on, with every
//! checksum filled in, for a raw socket that sends headers as they are.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::abi::reject as rt;
use crate::frame::is_ipv6_ext;

const TCP: u8 = 6;
const ICMP: u8 = 1;
const ICMPV6: u8 = 58;
const FRAGMENT: u8 = 44;
/// TTL / hop limit of replies (`net.ipv4.ip_default_ttl`'s default).
const TTL: u8 = 64;
/// Largest ICMPv6 error: the IPv6 minimum MTU (RFC 4443 2.4 (c)).
const MAX_ICMP6: usize = 1280;
/// Largest ICMP error the kernel sends (`icmp_send`: 576 bytes).
const MAX_ICMP4: usize = 576;

/// A reply ready for a raw socket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    /// Where it goes: the rejected packet's source.
    pub dst: IpAddr,
    /// The packet, from its IP header.
    pub bytes: Vec<u8>,
}

/// What a REJECT type answers with, for one family and transport protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplyKind {
    /// A TCP reset.
    TcpReset,
    /// An ICMP (IPv4) or ICMPv6 error: (type, code).
    Icmp(u8, u8),
}

/// The reply a `PARAPET_REJECT_*` type asks for, `None` when the type sends
/// nothing for this packet (a type of the other family, `tcp-reset` on
/// something other than TCP, an unknown type) -- the table of
/// `reject_plan` in `bpf/lib/reject.h`.
pub fn reply_kind(rtype: u8, ipv6: bool, proto: u8) -> Option<ReplyKind> {
    let (v4, v6): (Option<u8>, Option<u8>) = match rtype {
        rt::DEFAULT | rt::ICMPX_PORT_UNREACHABLE => (Some(3), Some(4)),
        rt::ICMP_NET_UNREACHABLE => (Some(0), None),
        rt::ICMP_HOST_UNREACHABLE => (Some(1), None),
        rt::ICMP_PORT_UNREACHABLE => (Some(3), None),
        rt::ICMP_PROTO_UNREACHABLE => (Some(2), None),
        rt::ICMP_NET_PROHIBITED => (Some(9), None),
        rt::ICMP_HOST_PROHIBITED => (Some(10), None),
        rt::ICMP_ADMIN_PROHIBITED => (Some(13), None),
        rt::ICMP6_NO_ROUTE => (None, Some(0)),
        rt::ICMP6_ADM_PROHIBITED => (None, Some(1)),
        rt::ICMP6_ADDR_UNREACHABLE => (None, Some(3)),
        rt::ICMP6_PORT_UNREACHABLE => (None, Some(4)),
        rt::ICMP6_POLICY_FAIL => (None, Some(5)),
        rt::ICMP6_REJECT_ROUTE => (None, Some(6)),
        rt::ICMPX_NO_ROUTE => (Some(0), Some(0)),
        rt::ICMPX_ADMIN_PROHIBITED => (Some(13), Some(1)),
        rt::ICMPX_HOST_UNREACHABLE => (Some(1), Some(3)),
        rt::TCP_RESET => return (proto == TCP).then_some(ReplyKind::TcpReset),
        _ => return None,
    };
    let code = if ipv6 { v6? } else { v4? };
    Some(ReplyKind::Icmp(if ipv6 { 1 } else { 3 }, code))
}

/// The fields of a rejected packet a reply needs.
struct Rejected<'a> {
    pkt: &'a [u8],
    ipv6: bool,
    src: IpAddr,
    dst: IpAddr,
    proto: u8,
    /// Offset of the transport header.
    l4: usize,
    /// The packet's full length by its IP header.
    total: usize,
    /// A non-first fragment.
    later_fragment: bool,
}

fn parse(pkt: &[u8]) -> Option<Rejected<'_>> {
    match pkt.first()? >> 4 {
        4 => {
            let ihl = usize::from(pkt[0] & 0x0f) * 4;
            if ihl < 20 || pkt.len() < ihl {
                return None;
            }
            let frag = u16::from_be_bytes([pkt[6], pkt[7]]);
            Some(Rejected {
                pkt,
                ipv6: false,
                src: IpAddr::from(<[u8; 4]>::try_from(&pkt[12..16]).ok()?),
                dst: IpAddr::from(<[u8; 4]>::try_from(&pkt[16..20]).ok()?),
                proto: pkt[9],
                l4: ihl,
                total: usize::from(u16::from_be_bytes([pkt[2], pkt[3]])),
                later_fragment: frag & 0x1fff != 0,
            })
        }
        6 => {
            if pkt.len() < 40 {
                return None;
            }
            let (mut nh, mut off, mut later) = (pkt[6], 40usize, false);
            // the parser's bound on extension headers (PARAPET_MAX_EXT_HDRS)
            for _ in 0..crate::abi::MAX_EXT_HDRS {
                if !is_ipv6_ext(nh) || pkt.len() < off + 8 {
                    break;
                }
                let len = match nh {
                    FRAGMENT => {
                        later = u16::from_be_bytes([pkt[off + 2], pkt[off + 3]]) & 0xfff8 != 0;
                        8
                    }
                    51 => (usize::from(pkt[off + 1]) + 2) * 4,
                    _ => (usize::from(pkt[off + 1]) + 1) * 8,
                };
                nh = pkt[off];
                off += len;
            }
            Some(Rejected {
                pkt,
                ipv6: true,
                src: IpAddr::from(<[u8; 16]>::try_from(&pkt[8..24]).ok()?),
                dst: IpAddr::from(<[u8; 16]>::try_from(&pkt[24..40]).ok()?),
                proto: nh,
                l4: off,
                total: 40 + usize::from(u16::from_be_bytes([pkt[4], pkt[5]])),
                later_fragment: later,
            })
        }
        _ => None,
    }
}

/// Packets that never get an answer (RFC 1122 3.2.2, RFC 4443 2.4 (e);
/// `reject_eligible` in `bpf/lib/reject.h`): ICMP errors, TCP resets,
/// non-first fragments, broadcast, multicast or unspecified addresses.
fn eligible(r: &Rejected) -> bool {
    if r.later_fragment {
        return false;
    }
    let at = |i: usize| r.pkt.get(r.l4 + i).copied();
    let never = match r.proto {
        TCP => at(13).is_none_or(|f| f & 0x04 != 0),
        ICMP if !r.ipv6 => at(0).is_none_or(|t| matches!(t, 3 | 4 | 5 | 11 | 12) || t > 18),
        ICMPV6 if r.ipv6 => at(0).is_none_or(|t| t < 128 || t == 137),
        _ => false,
    };
    if never {
        return false;
    }
    let unicast = |a: IpAddr| match a {
        IpAddr::V4(a) => !(a.is_broadcast() || a.is_multicast() || a.is_unspecified()),
        IpAddr::V6(a) => !(a.is_multicast() || a.is_unspecified()),
    };
    unicast(r.src) && unicast(r.dst)
}

/// The reply to `pkt` (from its network header; its first bytes suffice:
/// the IP header, extension headers and the first 8 bytes of the transport
/// header, 20 for TCP) for REJECT type `rtype`, from `src` (`None`: the
/// packet's destination, as the kernel answers packets it delivers) to the
/// packet's source. `None` when the packet gets no answer.
pub fn reject_reply(pkt: &[u8], rtype: u8, src: Option<IpAddr>) -> Option<Reply> {
    let r = parse(pkt)?;
    let kind = reply_kind(rtype, r.ipv6, r.proto)?;
    if !eligible(&r) {
        return None;
    }
    let from = src.unwrap_or(r.dst);
    if from.is_ipv6() != r.ipv6 {
        return None;
    }
    let (l4_proto, body) = match kind {
        ReplyKind::TcpReset => (TCP, tcp_reset(&r)?),
        ReplyKind::Icmp(t, c) => {
            let max = if r.ipv6 {
                MAX_ICMP6 - 48
            } else {
                MAX_ICMP4 - 28
            };
            // the quote: what we have of the packet, never past its end
            let quote = &pkt[..pkt.len().min(r.total).min(max)];
            // IPv4 quotes at least the header and 8 bytes (RFC 792)
            if quote.len() < r.l4 + 8 {
                return None;
            }
            let mut b = vec![t, c, 0, 0, 0, 0, 0, 0];
            b.extend_from_slice(quote);
            (if r.ipv6 { ICMPV6 } else { ICMP }, b)
        }
    };
    Some(Reply {
        dst: r.src,
        bytes: ip_packet(from, r.src, l4_proto, body),
    })
}

/// The reset `nf_send_reset` sends: to a segment with ACK, sequence number
/// = its acknowledgment number; else RST|ACK acknowledging everything it
/// occupied (SYN, FIN and payload).
fn tcp_reset(r: &Rejected) -> Option<Vec<u8>> {
    let th = r.pkt.get(r.l4..r.l4 + 20)?;
    let doff = usize::from(th[12] >> 4) * 4;
    let flags = th[13];
    let mut b = vec![0u8; 20];
    b[0..2].copy_from_slice(&th[2..4]);
    b[2..4].copy_from_slice(&th[0..2]);
    b[12] = 5 << 4;
    if flags & 0x10 != 0 {
        b[4..8].copy_from_slice(&th[8..12]);
        b[13] = 0x04;
    } else {
        let seq = u32::from_be_bytes([th[4], th[5], th[6], th[7]]);
        let payload = r.total.saturating_sub(r.l4 + doff) as u32;
        let ack = seq
            .wrapping_add(payload)
            .wrapping_add(u32::from(flags & 0x02 != 0))
            .wrapping_add(u32::from(flags & 0x01 != 0));
        b[8..12].copy_from_slice(&ack.to_be_bytes());
        b[13] = 0x14;
    }
    Some(b)
}

/// An IP header from `src` to `dst` in front of transport message `body`,
/// whose checksum (TCP: offset 16, ICMP / ICMPv6: offset 2) is filled in.
fn ip_packet(src: IpAddr, dst: IpAddr, proto: u8, mut body: Vec<u8>) -> Vec<u8> {
    let at = if proto == TCP { 16 } else { 2 };
    let len = body.len();
    let mut out;
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            // ICMP's checksum covers the message only; TCP's a pseudo-header
            let seed = if proto == TCP {
                pseudo4(s, d, proto, len)
            } else {
                0
            };
            let c = fold(sum(&body, seed));
            body[at..at + 2].copy_from_slice(&c.to_be_bytes());
            out = vec![0u8; 20];
            out[0] = 0x45;
            out[2..4].copy_from_slice(&((20 + len) as u16).to_be_bytes());
            out[6] = 0x40; // DF, as the kernel sets on resets and errors
            out[8] = TTL;
            out[9] = proto;
            out[12..16].copy_from_slice(&s.octets());
            out[16..20].copy_from_slice(&d.octets());
            let c = crate::frame::ipv4_checksum(&out);
            out[10..12].copy_from_slice(&c.to_be_bytes());
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let c = fold(sum(&body, pseudo6(s, d, proto, len)));
            body[at..at + 2].copy_from_slice(&c.to_be_bytes());
            out = vec![0u8; 40];
            out[0] = 0x60;
            out[4..6].copy_from_slice(&(len as u16).to_be_bytes());
            out[6] = proto;
            out[7] = TTL;
            out[8..24].copy_from_slice(&s.octets());
            out[24..40].copy_from_slice(&d.octets());
        }
        _ => unreachable!("reject_reply checks the families agree"),
    }
    out.extend_from_slice(&body);
    out
}

fn sum(b: &[u8], seed: u32) -> u32 {
    b.chunks(2).fold(seed, |s, c| {
        let w = u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
        let s = s.wrapping_add(w);
        (s & 0xffff) + (s >> 16)
    })
}

fn fold(mut s: u32) -> u16 {
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

fn pseudo4(s: Ipv4Addr, d: Ipv4Addr, proto: u8, len: usize) -> u32 {
    let mut p = [0u8; 12];
    p[0..4].copy_from_slice(&s.octets());
    p[4..8].copy_from_slice(&d.octets());
    p[9] = proto;
    p[10..12].copy_from_slice(&(len as u16).to_be_bytes());
    sum(&p, 0)
}

fn pseudo6(s: Ipv6Addr, d: Ipv6Addr, proto: u8, len: usize) -> u32 {
    let mut p = [0u8; 40];
    p[0..16].copy_from_slice(&s.octets());
    p[16..32].copy_from_slice(&d.octets());
    p[32..36].copy_from_slice(&(len as u32).to_be_bytes());
    p[39] = proto;
    sum(&p, 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::Frame;

    const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

    fn l3(f: Vec<u8>) -> Vec<u8> {
        f[14..].to_vec()
    }

    #[test]
    fn tcp_syn_gets_rst_ack_of_seq_plus_one() {
        let syn = l3(Frame::ipv4(A, B).tcp(40000, 81, 0x02).build());
        let r = reject_reply(&syn, rt::TCP_RESET, None).unwrap();
        assert_eq!(r.dst, IpAddr::V4(A));
        let b = &r.bytes;
        assert_eq!(ipv4_checksum_ok(&b[..20]), 0);
        assert_eq!(&b[12..16], &B.octets());
        assert_eq!(&b[16..20], &A.octets());
        assert_eq!(b[9], TCP);
        let t = &b[20..];
        assert_eq!(u16::from_be_bytes([t[0], t[1]]), 81);
        assert_eq!(u16::from_be_bytes([t[2], t[3]]), 40000);
        let seq = u32::from_be_bytes([syn[24], syn[25], syn[26], syn[27]]);
        assert_eq!(u32::from_be_bytes([t[8], t[9], t[10], t[11]]), seq + 1);
        assert_eq!(t[13], 0x14);
        // the checksum over pseudo-header and segment sums to zero
        assert_eq!(fold(sum(t, pseudo4(B, A, TCP, t.len()))), 0);
    }

    fn ipv4_checksum_ok(h: &[u8]) -> u16 {
        fold(sum(h, 0))
    }

    #[test]
    fn udp_gets_port_unreachable_quoting_the_packet() {
        let p = l3(Frame::ipv4(A, B).udp(40000, 82).payload(300).build());
        let head = &p[..128];
        let r = reject_reply(head, rt::DEFAULT, None).unwrap();
        let m = &r.bytes[20..];
        assert_eq!((m[0], m[1]), (3, 3));
        assert_eq!(&m[8..], head);
        assert_eq!(fold(sum(m, 0)), 0);
        // tcp-reset on UDP, an IPv6-only type: nothing
        assert_eq!(reject_reply(head, rt::TCP_RESET, None), None);
        assert_eq!(reject_reply(head, rt::ICMP6_ADM_PROHIBITED, None), None);
        let r = reject_reply(head, rt::ICMP_ADMIN_PROHIBITED, None).unwrap();
        assert_eq!((r.bytes[20], r.bytes[21]), (3, 13));
    }

    #[test]
    fn ipv6_answers_carry_the_pseudo_header_checksum() {
        let (a, b): (Ipv6Addr, Ipv6Addr) = ("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap());
        let udp = l3(Frame::ipv6(a, b).udp(40000, 82).build());
        let r = reject_reply(&udp, rt::DEFAULT, None).unwrap();
        let m = &r.bytes[40..];
        assert_eq!((m[0], m[1]), (1, 4));
        assert_eq!(fold(sum(m, pseudo6(b, a, ICMPV6, m.len()))), 0);
        let from: Ipv6Addr = "fd00::9".parse().unwrap();
        let r = reject_reply(&udp, rt::ICMP6_ADM_PROHIBITED, Some(from.into())).unwrap();
        assert_eq!(&r.bytes[8..24], &from.octets());
        let syn = l3(Frame::ipv6(a, b).tcp(1, 81, 0x02).build());
        let r = reject_reply(&syn, rt::TCP_RESET, None).unwrap();
        let t = &r.bytes[40..];
        assert_eq!(t[13], 0x14);
        assert_eq!(fold(sum(t, pseudo6(b, a, TCP, t.len()))), 0);
    }

    #[test]
    fn errors_resets_fragments_and_multicast_get_nothing() {
        let rst = l3(Frame::ipv4(A, B).tcp(1, 81, 0x04).build());
        assert_eq!(reject_reply(&rst, rt::TCP_RESET, None), None);
        let later = l3(Frame::ipv4(A, B).ipv4_frag(64, false).udp(1, 82).build());
        assert_eq!(reject_reply(&later, rt::DEFAULT, None), None);
        let mc = l3(Frame::ipv4(A, Ipv4Addr::new(224, 0, 0, 1))
            .udp(1, 82)
            .build());
        assert_eq!(reject_reply(&mc, rt::DEFAULT, None), None);
        let ack = l3(Frame::ipv4(A, B).tcp(1, 81, 0x10).build());
        let r = reject_reply(&ack, rt::TCP_RESET, None).unwrap();
        assert_eq!(r.bytes[20 + 13], 0x04);
        assert_eq!(&r.bytes[24..28], &ack[28..32], "seq = the segment's ack");
    }
}
