//! The reverse-path lookup's outcome ([`crate::Field::RevPath`]): where
//! the host's route back to a packet's source leaves, as nft's `fib saddr
//! [. iif] oif` reads it (net/ipv4/netfilter/nft_fib_ipv4.c,
//! net/ipv6/netfilter/nft_fib_ipv6.c). It depends on the host's routing
//! table, not on the packet alone, so a packet carries it as a fact
//! (`rpath iif|other|none` in the packet syntax; a routing view — `ip
//! route get` in the kernel oracles — supplies it).

/// The route back to the source leaves through the interface the packet
/// came in on; also the kernel's skips (a packet from loopback, or from
/// 0.0.0.0 to the limited broadcast or 224.0.0.0/24 in IPv4), where nft
/// stores the input interface. The default: a packet that is not spoofed.
pub const IIF: u8 = 0;
/// A route back exists, through another interface.
pub const OTHER: u8 = 1;
/// No usable route: the lookup fails (no route, `unreachable`,
/// `blackhole`, `prohibit`), or the source is one of the host's own
/// addresses (a `local` route: nft stores no interface for it).
pub const NONE: u8 = 2;
/// The largest value.
pub const MAX: u8 = NONE;

/// The outcome's name in the packet syntax.
pub fn name(v: u8) -> Option<&'static str> {
    Some(match v {
        IIF => "iif",
        OTHER => "other",
        NONE => "none",
        _ => return None,
    })
}

/// The outcome of a name ([`name`]).
pub fn from_name(s: &str) -> Option<u8> {
    (0..=MAX).find(|&v| name(v) == Some(s))
}

/// The outcomes for which nft's `fib saddr . iif oif missing` (`iif`
/// restricts the lookup to the input interface) or `fib saddr oif
/// missing` (any interface) is true.
pub fn missing(iif: bool) -> crate::IntervalSet {
    if iif {
        crate::IntervalSet::range(OTHER as u128, NONE as u128)
    } else {
        crate::IntervalSet::point(NONE as u128)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for v in 0..=MAX {
            assert_eq!(from_name(name(v).unwrap()), Some(v));
        }
        assert_eq!(from_name("lo"), None);
    }

    #[test]
    fn strict_missing_holds_loose_missing() {
        assert!(missing(false).is_subset(&missing(true)));
        assert!(!missing(true).contains(IIF as u128));
    }
}
