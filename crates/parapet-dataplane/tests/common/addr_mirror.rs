//! The address-type mirror the random images of walker_bpf.rs run with,
//! and the types it gives addresses (the reference the BPF walker is
//! compared with).

use parapet_dataplane::addr_types::{LocalRoute, RTN_BROADCAST, RTN_LOCAL};

/// The address-type mirror the random images run with (as parapetd would
/// fill it from the local table): host addresses, an AnyIP prefix, a
/// subnet broadcast address, and 127.255.255.255, which the kernel's
/// table says is BROADCAST inside the LOCAL 127.0.0.0/8.
pub fn addr_mirror() -> Vec<LocalRoute> {
    let r = |a: &str, prefix_len: u8, kind: u8| LocalRoute {
        addr: a.parse().unwrap(),
        prefix_len,
        kind,
    };
    vec![
        r("10.0.0.1", 32, RTN_LOCAL),
        r("10.0.0.200", 32, RTN_BROADCAST),
        r("10.1.2.0", 24, RTN_LOCAL),
        r("127.0.0.0", 8, RTN_LOCAL),
        r("127.255.255.255", 32, RTN_BROADCAST),
        r("2001:db8::1", 128, RTN_LOCAL),
        r("2001:db8:1::", 48, RTN_LOCAL),
    ]
}

/// The type of `addr` as the kernel's tables in [`addr_mirror`] give it:
/// the prefix rules first (0/8 and the limited broadcast, multicast,
/// `::`), then the longest mirrored prefix, then by prefix (127/8 and ::1
/// LOCAL, else UNICAST).
pub fn addr_type_of(addr: std::net::IpAddr) -> u8 {
    use parapet_model::{addr_type, by_prefix, Family};
    let (family, v, bits) = match addr {
        std::net::IpAddr::V4(a) => (Family::V4, u128::from(u32::from(a)), 32),
        std::net::IpAddr::V6(a) => (Family::V6, u128::from(a), 128),
    };
    let fixed = by_prefix(family, v);
    if matches!(
        fixed,
        addr_type::BROADCAST | addr_type::MULTICAST | addr_type::UNSPEC
    ) {
        return fixed;
    }
    let mut best: Option<(u8, u8)> = None;
    for r in addr_mirror() {
        let (rv, rbits) = match r.addr {
            std::net::IpAddr::V4(a) => (u128::from(u32::from(a)), 32),
            std::net::IpAddr::V6(a) => (u128::from(a), 128),
        };
        if rbits != bits {
            continue;
        }
        let shift = bits - u32::from(r.prefix_len);
        let same = shift >= 128 || (v >> shift) == (rv >> shift);
        if same && best.is_none_or(|(l, _)| r.prefix_len > l) {
            best = Some((r.prefix_len, r.kind));
        }
    }
    best.map(|(_, k)| k).unwrap_or(fixed)
}
