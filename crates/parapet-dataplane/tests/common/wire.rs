//! Generated model packets as frames on the wire.

use std::net::{Ipv4Addr, Ipv6Addr};

use parapet_dataplane::packet::{Ext, Frame, L4};
use parapet_model::{CtState, Family, IfName, Packet};

/// Make a generated packet expressible on the wire as the parser sees it:
/// ports only for port protocols, flags only for TCP, ICMP type/code only
/// for the family's ICMP, nothing above L3 for non-first fragments, the
/// input interface is loopback, no output interface, no conntrack.
pub fn wire_packet(mut p: Packet) -> Packet {
    let v6 = p.family == Family::V6;
    if !matches!(p.proto, 6 | 17 | 33 | 132 | 136) || p.fragment {
        p.sport = 0;
        p.dport = 0;
    }
    if p.proto != 6 || p.fragment {
        p.tcp_flags = 0;
    }
    let icmp = if v6 { 58 } else { 1 };
    if p.proto != icmp || p.fragment {
        p.icmp_type = 0;
        p.icmp_code = 0;
    }
    // The parser walks extension headers instead of returning them.
    if v6 && matches!(p.proto, 0 | 43 | 44 | 51 | 60 | 135 | 139 | 140) {
        p.proto = 59;
    }
    p.iif = IfName::new("lo").unwrap();
    p.oif = IfName(0);
    p.ct_state = CtState::Untracked;
    p
}

pub fn frame_of(p: &Packet) -> Vec<u8> {
    let f = match p.family {
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
        6 => L4::Tcp {
            sport: p.sport,
            dport: p.dport,
            flags: p.tcp_flags,
        },
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
    f.l4(l4).payload(16).build()
}
