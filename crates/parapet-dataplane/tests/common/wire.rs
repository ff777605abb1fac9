//! Generated model packets as frames on the wire.

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

/// The frame of a model packet (see `parapet_dataplane::frame::frame_of_packet`).
pub fn frame_of(p: &Packet) -> Vec<u8> {
    parapet_dataplane::frame::frame_of_packet(p)
}
