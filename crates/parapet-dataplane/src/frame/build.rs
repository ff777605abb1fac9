//! Small builders for crafted test frames: Ethernet, VLAN tags, IPv4 (with
//! options and fragmentation), IPv6 with extension headers, TCP, UDP, ICMP,
//! ICMPv6 and raw transport payloads.
//!
//! The builder writes well-formed lengths and the IPv4 header checksum; tests
//! then break frames on purpose with [`Frame::truncate`] and the field
//! overrides. Transport checksums are left zero: nothing on the dataplane
//! path checks them.

use std::net::{Ipv4Addr, Ipv6Addr};

/// Network layer of a frame.
#[derive(Clone, Debug)]
pub enum L3 {
    /// IPv4 with the given addresses.
    V4 {
        /// Source.
        src: Ipv4Addr,
        /// Destination.
        dst: Ipv4Addr,
    },
    /// IPv6 with the given addresses.
    V6 {
        /// Source.
        src: Ipv6Addr,
        /// Destination.
        dst: Ipv6Addr,
    },
    /// A non-IP ethertype with an opaque body (e.g. ARP 0x0806).
    Other(u16),
}

/// Transport layer of a frame.
#[derive(Clone, Debug)]
pub enum L4 {
    /// TCP with ports and flags byte.
    Tcp {
        /// Source port.
        sport: u16,
        /// Destination port.
        dport: u16,
        /// Flags byte (CWR..FIN).
        flags: u8,
    },
    /// UDP.
    Udp {
        /// Source port.
        sport: u16,
        /// Destination port.
        dport: u16,
    },
    /// ICMP (IPv4) type/code with a 4-byte rest-of-header.
    Icmp {
        /// Type.
        ty: u8,
        /// Code.
        code: u8,
    },
    /// ICMPv6 type/code with a 4-byte rest-of-header.
    Icmpv6 {
        /// Type.
        ty: u8,
        /// Code.
        code: u8,
    },
    /// Any protocol number with these header bytes (e.g. SCTP, GRE).
    Raw {
        /// Protocol number.
        proto: u8,
        /// Bytes written where the transport header goes.
        header: Vec<u8>,
    },
}

impl L4 {
    fn proto(&self) -> u8 {
        match self {
            L4::Tcp { .. } => 6,
            L4::Udp { .. } => 17,
            L4::Icmp { .. } => 1,
            L4::Icmpv6 { .. } => 58,
            L4::Raw { proto, .. } => *proto,
        }
    }

    fn bytes(&self, payload_len: usize) -> Vec<u8> {
        match self {
            L4::Tcp {
                sport,
                dport,
                flags,
            } => {
                let mut h = vec![0u8; 20];
                h[0..2].copy_from_slice(&sport.to_be_bytes());
                h[2..4].copy_from_slice(&dport.to_be_bytes());
                h[12] = 5 << 4; // data offset: 5 words, no options
                h[13] = *flags;
                h[14..16].copy_from_slice(&65535u16.to_be_bytes());
                h
            }
            L4::Udp { sport, dport } => {
                let mut h = vec![0u8; 8];
                h[0..2].copy_from_slice(&sport.to_be_bytes());
                h[2..4].copy_from_slice(&dport.to_be_bytes());
                let len = u16::try_from(8 + payload_len).unwrap_or(0);
                h[4..6].copy_from_slice(&len.to_be_bytes());
                h
            }
            L4::Icmp { ty, code } | L4::Icmpv6 { ty, code } => vec![*ty, *code, 0, 0, 0, 0, 0, 0],
            L4::Raw { header, .. } => header.clone(),
        }
    }
}

/// One IPv6 extension header; `len8` is the Hdr Ext Len field (8-octet
/// units beyond the first 8), `len4` the AH Payload Len (4-octet units
/// minus 2).
#[derive(Clone, Debug)]
pub enum Ext {
    /// Hop-by-Hop Options (0).
    HopByHop {
        /// Hdr Ext Len.
        len8: u8,
    },
    /// Routing (43).
    Routing {
        /// Hdr Ext Len.
        len8: u8,
    },
    /// Routing (43) with the given routing type and segments left (its
    /// body zeros): what `-m rt` and nft's `rt` read.
    RoutingHeader {
        /// Hdr Ext Len.
        len8: u8,
        /// Routing Type.
        rt_type: u8,
        /// Segments Left.
        segments_left: u8,
    },
    /// Destination Options (60).
    DestOpts {
        /// Hdr Ext Len.
        len8: u8,
    },
    /// Fragment (44): offset in 8-octet units and the M flag.
    Fragment {
        /// Fragment offset (13 bits).
        offset: u16,
        /// More fragments.
        more: bool,
    },
    /// Authentication Header (51).
    Ah {
        /// Payload Len.
        len4: u8,
    },
}

impl Ext {
    fn number(&self) -> u8 {
        match self {
            Ext::HopByHop { .. } => 0,
            Ext::Routing { .. } | Ext::RoutingHeader { .. } => 43,
            Ext::DestOpts { .. } => 60,
            Ext::Fragment { .. } => 44,
            Ext::Ah { .. } => 51,
        }
    }

    fn bytes(&self, next: u8) -> Vec<u8> {
        match *self {
            Ext::RoutingHeader {
                len8,
                rt_type,
                segments_left,
            } => {
                let mut h = vec![0u8; (usize::from(len8) + 1) * 8];
                h[..4].copy_from_slice(&[next, len8, rt_type, segments_left]);
                h
            }
            Ext::HopByHop { len8 } | Ext::Routing { len8 } | Ext::DestOpts { len8 } => {
                let mut h = vec![0u8; (usize::from(len8) + 1) * 8];
                h[0] = next;
                h[1] = len8;
                // PadN option filling the rest, so the header is valid.
                h[2] = 1;
                h[3] = (h.len() - 4) as u8;
                h
            }
            Ext::Fragment { offset, more } => {
                let fo = (offset << 3) | u16::from(more);
                let mut h = vec![next, 0, 0, 0, 0, 0, 0x12, 0x34];
                h[2..4].copy_from_slice(&fo.to_be_bytes());
                h
            }
            Ext::Ah { len4 } => {
                let mut h = vec![0u8; (usize::from(len4) + 2) * 4];
                h[0] = next;
                h[1] = len4;
                h
            }
        }
    }
}

/// A frame under construction. Start with [`Frame::ipv4`], [`Frame::ipv6`]
/// or [`Frame::non_ip`], chain setters, finish with [`Frame::build`].
#[derive(Clone, Debug)]
pub struct Frame {
    vlans: Vec<(u16, u16)>,
    l3: L3,
    ipv4_options: usize,
    ipv4_frag: (u16, bool),
    ext: Vec<Ext>,
    l4: Option<L4>,
    payload_len: usize,
    truncate: Option<usize>,
    ihl_override: Option<u8>,
    tot_len_override: Option<u16>,
    ttl: u8,
    dscp: u8,
    tcp_options: Vec<u8>,
    tcp_doff: Option<u8>,
}

impl Frame {
    fn new(l3: L3) -> Self {
        Frame {
            vlans: Vec::new(),
            l3,
            ipv4_options: 0,
            ipv4_frag: (0, false),
            ext: Vec::new(),
            l4: None,
            payload_len: 0,
            truncate: None,
            ihl_override: None,
            tot_len_override: None,
            ttl: 64,
            dscp: 0,
            tcp_options: Vec::new(),
            tcp_doff: None,
        }
    }

    /// An IPv4 frame.
    pub fn ipv4(src: Ipv4Addr, dst: Ipv4Addr) -> Self {
        Self::new(L3::V4 { src, dst })
    }

    /// An IPv6 frame.
    pub fn ipv6(src: Ipv6Addr, dst: Ipv6Addr) -> Self {
        Self::new(L3::V6 { src, dst })
    }

    /// A non-IP frame with this ethertype.
    pub fn non_ip(ethertype: u16) -> Self {
        Self::new(L3::Other(ethertype))
    }

    /// Push a VLAN tag (outermost first): TPID 0x8100 or 0x88a8, and VID.
    pub fn vlan(mut self, tpid: u16, vid: u16) -> Self {
        self.vlans.push((tpid, vid));
        self
    }

    /// IPv4 options: `words` 32-bit words of NOPs (IHL = 5 + words).
    pub fn ipv4_options(mut self, words: usize) -> Self {
        self.ipv4_options = words * 4;
        self
    }

    /// IPv4 fragment offset (8-octet units) and MF flag.
    pub fn ipv4_frag(mut self, offset: u16, more: bool) -> Self {
        self.ipv4_frag = (offset, more);
        self
    }

    /// Override the IHL field (to craft malformed headers).
    pub fn ihl(mut self, ihl: u8) -> Self {
        self.ihl_override = Some(ihl);
        self
    }

    /// Override the IPv4 total length / IPv6 payload length field.
    pub fn l3_len(mut self, len: u16) -> Self {
        self.tot_len_override = Some(len);
        self
    }

    /// The IPv4 TTL / IPv6 hop limit (64 unless set).
    pub fn ttl(mut self, ttl: u8) -> Self {
        self.ttl = ttl;
        self
    }

    /// The DSCP (the upper six bits of the TOS / traffic class byte).
    pub fn dscp(mut self, dscp: u8) -> Self {
        self.dscp = dscp & 0x3f;
        self
    }

    /// Append an IPv6 extension header.
    pub fn ext(mut self, e: Ext) -> Self {
        self.ext.push(e);
        self
    }

    /// Set the transport header.
    pub fn l4(mut self, l4: L4) -> Self {
        self.l4 = Some(l4);
        self
    }

    /// TCP shorthand.
    pub fn tcp(self, sport: u16, dport: u16, flags: u8) -> Self {
        self.l4(L4::Tcp {
            sport,
            dport,
            flags,
        })
    }

    /// The TCP option area after the fixed header (zero-padded to whole
    /// words; the data offset covers it unless [`Frame::tcp_doff`] says
    /// otherwise).
    pub fn tcp_options(mut self, area: &[u8]) -> Self {
        self.tcp_options = area.to_vec();
        self.tcp_options.resize(area.len().div_ceil(4) * 4, 0);
        self
    }

    /// Override the TCP data offset (in words; to craft an option area
    /// that runs past the segment).
    pub fn tcp_doff(mut self, words: u8) -> Self {
        self.tcp_doff = Some(words);
        self
    }

    /// UDP shorthand.
    pub fn udp(self, sport: u16, dport: u16) -> Self {
        self.l4(L4::Udp { sport, dport })
    }

    /// Payload bytes after the transport header.
    pub fn payload(mut self, len: usize) -> Self {
        self.payload_len = len;
        self
    }

    /// Cut the finished frame to `len` bytes (lengths in headers unchanged).
    pub fn truncate(mut self, len: usize) -> Self {
        self.truncate = Some(len);
        self
    }

    /// Serialise the frame.
    pub fn build(&self) -> Vec<u8> {
        let mut f = Vec::with_capacity(128);
        f.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x02]); // dst MAC (local admin)
        f.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x01]); // src MAC
        let ethertype = match self.l3 {
            L3::V4 { .. } => 0x0800,
            L3::V6 { .. } => 0x86dd,
            L3::Other(t) => t,
        };
        for &(tpid, vid) in &self.vlans {
            f.extend_from_slice(&tpid.to_be_bytes());
            f.extend_from_slice(&(vid & 0x0fff).to_be_bytes());
        }
        f.extend_from_slice(&ethertype.to_be_bytes());

        // Non-first IPv4/IPv6 fragments carry no transport header.
        let later_fragment = self.ipv4_frag.0 != 0
            || self
                .ext
                .iter()
                .any(|e| matches!(e, Ext::Fragment { offset, .. } if *offset != 0));
        let mut l4 = match (&self.l4, later_fragment) {
            (Some(l4), false) => l4.bytes(self.payload_len),
            _ => Vec::new(),
        };
        if let (Some(L4::Tcp { .. }), false) = (&self.l4, later_fragment) {
            let words = 5 + self.tcp_options.len() / 4;
            l4[12] = self.tcp_doff.unwrap_or(words as u8) << 4;
            l4.extend_from_slice(&self.tcp_options);
        }
        l4.extend(std::iter::repeat_n(0xab, self.payload_len));
        let proto = self.l4.as_ref().map_or(59, L4::proto); // 59: no next header

        match &self.l3 {
            L3::V4 { src, dst } => {
                let hlen = 20 + self.ipv4_options;
                let tot = self
                    .tot_len_override
                    .unwrap_or(u16::try_from(hlen + l4.len()).unwrap_or(u16::MAX));
                let ihl = self.ihl_override.unwrap_or((hlen / 4) as u8);
                let mut h = vec![0u8; hlen];
                h[0] = 0x40 | (ihl & 0x0f);
                h[1] = self.dscp << 2;
                h[2..4].copy_from_slice(&tot.to_be_bytes());
                h[4..6].copy_from_slice(&0x1234u16.to_be_bytes());
                let fo = (self.ipv4_frag.0 & 0x1fff) | if self.ipv4_frag.1 { 0x2000 } else { 0 };
                h[6..8].copy_from_slice(&fo.to_be_bytes());
                h[8] = self.ttl;
                h[9] = proto;
                h[12..16].copy_from_slice(&src.octets());
                h[16..20].copy_from_slice(&dst.octets());
                for b in &mut h[20..] {
                    *b = 1; // NOP option
                }
                let csum = ipv4_checksum(&h);
                h[10..12].copy_from_slice(&csum.to_be_bytes());
                f.extend_from_slice(&h);
            }
            L3::V6 { src, dst } => {
                let mut exts = Vec::new();
                for (i, e) in self.ext.iter().enumerate() {
                    let next = self.ext.get(i + 1).map_or(proto, Ext::number);
                    exts.extend(e.bytes(next));
                }
                let first = self.ext.first().map_or(proto, Ext::number);
                let plen = self
                    .tot_len_override
                    .unwrap_or(u16::try_from(exts.len() + l4.len()).unwrap_or(u16::MAX));
                let mut h = vec![0u8; 40];
                // version 6, then the traffic class across bytes 0 and 1
                h[0] = 0x60 | (self.dscp >> 2);
                h[1] = (self.dscp & 3) << 6;
                h[4..6].copy_from_slice(&plen.to_be_bytes());
                h[6] = first;
                h[7] = self.ttl;
                h[8..24].copy_from_slice(&src.octets());
                h[24..40].copy_from_slice(&dst.octets());
                f.extend_from_slice(&h);
                f.extend_from_slice(&exts);
            }
            L3::Other(_) => {}
        }
        f.extend_from_slice(&l4);
        if let Some(n) = self.truncate {
            f.truncate(n);
        }
        f
    }
}

/// The IPv4 header checksum (RFC 791) of a header whose checksum field is 0.
pub fn ipv4_checksum(h: &[u8]) -> u16 {
    let mut sum: u32 = h
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// The Ethernet frame a model packet arrives as: addresses, protocol,
/// ports (also for SCTP, UDP-Lite and DCCP), TCP flags, ICMP type/code, TTL,
/// DSCP, the TCP option area, the L3 length `len` (made of payload; a `len` shorter than the
/// headers gets 16 bytes of payload instead), and a non-first fragment for
/// `fragment`; a packet with its `datagram` is that datagram behind an
/// Ethernet header. Fields the wire cannot carry for the
/// protocol (ports of ICMP, say) are left out. For benchmarks, `parapet
/// classify` on captures, and tests that compare the kernel with user space.
pub fn frame_of_packet(p: &parapet_model::Packet) -> Vec<u8> {
    use parapet_model::Family;
    use std::net::{Ipv4Addr, Ipv6Addr};
    // a packet that says its bytes (`-m string`) arrives as them
    if let Some(d) = &p.datagram {
        let mut f = vec![0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01];
        f.extend_from_slice(match p.family {
            Family::V4 => &[0x08, 0x00],
            Family::V6 => &[0x86, 0xdd],
        });
        f.extend_from_slice(d);
        return f;
    }
    let mut f = match p.family {
        Family::V4 => {
            let f = Frame::ipv4(Ipv4Addr::from(p.src as u32), Ipv4Addr::from(p.dst as u32));
            if p.fragment {
                f.ipv4_frag(16, false)
            } else {
                f
            }
        }
        Family::V6 => {
            let f = Frame::ipv6(Ipv6Addr::from(p.src), Ipv6Addr::from(p.dst));
            if p.fragment {
                f.ext(Ext::Fragment {
                    offset: 16,
                    more: false,
                })
            } else {
                f
            }
        }
    };
    let ports = |n: usize| {
        let mut h = vec![0u8; n];
        h[0..2].copy_from_slice(&p.sport.to_be_bytes());
        h[2..4].copy_from_slice(&p.dport.to_be_bytes());
        h
    };
    let l4 = match p.proto {
        6 => {
            if let Some(area) = &p.tcp_options {
                f = f.tcp_options(area);
            }
            L4::Tcp {
                sport: p.sport,
                dport: p.dport,
                flags: p.tcp_flags,
            }
        }
        17 => L4::Udp {
            sport: p.sport,
            dport: p.dport,
        },
        1 if p.family == Family::V4 => L4::Icmp {
            ty: p.icmp_type,
            code: p.icmp_code,
        },
        58 if p.family == Family::V6 => L4::Icmpv6 {
            ty: p.icmp_type,
            code: p.icmp_code,
        },
        136 => L4::Raw {
            proto: 136,
            header: ports(8),
        },
        33 | 132 => L4::Raw {
            proto: p.proto,
            header: ports(12),
        },
        proto => L4::Raw {
            proto,
            header: vec![0; 4],
        },
    };
    let f = f.l4(l4).ttl(p.ttl).dscp(p.dscp);
    let headers = f.clone().payload(0).build().len() - 14;
    let payload = (p.len as usize).checked_sub(headers).unwrap_or(16);
    f.payload(payload).build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv4_udp_layout() {
        let f = Frame::ipv4(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2))
            .udp(1000, 53)
            .payload(4)
            .build();
        assert_eq!(f.len(), 14 + 20 + 8 + 4);
        assert_eq!(&f[12..14], &[0x08, 0x00]);
        assert_eq!(f[14], 0x45);
        assert_eq!(u16::from_be_bytes([f[16], f[17]]), 32);
        assert_eq!(f[23], 17);
        // A header including its checksum sums to 0xffff.
        assert_eq!(ipv4_checksum(&f[14..34]), 0);
        assert_eq!(&f[34..38], &[0x03, 0xe8, 0x00, 0x35]);
    }

    #[test]
    fn ipv6_ext_chain_links_next_headers() {
        let f = Frame::ipv6(Ipv6Addr::LOCALHOST, Ipv6Addr::LOCALHOST)
            .ext(Ext::HopByHop { len8: 0 })
            .ext(Ext::Fragment {
                offset: 0,
                more: true,
            })
            .tcp(1, 2, 0x02)
            .build();
        assert_eq!(f[14 + 6], 0); // IPv6 next = HBH
        assert_eq!(f[54], 44); // HBH next = fragment
        assert_eq!(f[62], 6); // fragment next = TCP
        assert_eq!(u16::from_be_bytes([f[18], f[19]]), 8 + 8 + 20);
    }
}
