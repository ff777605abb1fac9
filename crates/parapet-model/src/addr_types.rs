//! Address types and link-layer packet types: the values of
//! [`crate::Field::SrcType`], [`crate::Field::DstType`] and
//! [`crate::Field::PktType`].
//!
//! An address type is the kernel's route type of the address (`RTN_*`), as
//! `-m addrtype` and nft `fib saddr|daddr type` read it: one value per
//! address, so a list of types is a set of values. Which addresses are the
//! host's own (LOCAL) and which are its subnets' broadcast addresses is
//! host state: a packet says it (`--packet … dtype local`), else
//! [`by_prefix`] gives what the address alone tells.

use crate::field::Family;

/// The kernel's `RTN_*` numbers.
pub mod addr_type {
    /// `RTN_UNSPEC`.
    pub const UNSPEC: u8 = 0;
    /// `RTN_UNICAST`: a gateway or direct route.
    pub const UNICAST: u8 = 1;
    /// `RTN_LOCAL`: an address of the host.
    pub const LOCAL: u8 = 2;
    /// `RTN_BROADCAST`: a broadcast address (sent and accepted as broadcast).
    pub const BROADCAST: u8 = 3;
    /// `RTN_ANYCAST`.
    pub const ANYCAST: u8 = 4;
    /// `RTN_MULTICAST`.
    pub const MULTICAST: u8 = 5;
    /// `RTN_BLACKHOLE`.
    pub const BLACKHOLE: u8 = 6;
    /// `RTN_UNREACHABLE`.
    pub const UNREACHABLE: u8 = 7;
    /// `RTN_PROHIBIT`.
    pub const PROHIBIT: u8 = 8;
    /// `RTN_THROW`.
    pub const THROW: u8 = 9;
    /// `RTN_NAT`.
    pub const NAT: u8 = 10;
    /// `RTN_XRESOLVE`.
    pub const XRESOLVE: u8 = 11;
    /// Largest type number.
    pub const MAX: u8 = XRESOLVE;

    /// iptables' names (nft writes them in lower case), by number.
    pub const NAMES: [&str; 12] = [
        "UNSPEC",
        "UNICAST",
        "LOCAL",
        "BROADCAST",
        "ANYCAST",
        "MULTICAST",
        "BLACKHOLE",
        "UNREACHABLE",
        "PROHIBIT",
        "THROW",
        "NAT",
        "XRESOLVE",
    ];

    /// The number of a name, in either case (`LOCAL`, `local`).
    pub fn from_name(s: &str) -> Option<u8> {
        NAMES
            .iter()
            .position(|n| n.eq_ignore_ascii_case(s))
            .map(|i| i as u8)
    }

    /// iptables' name of a type number.
    pub fn name(v: u8) -> Option<&'static str> {
        NAMES.get(v as usize).copied()
    }
}

/// The kernel's `PACKET_*` numbers (`skb->pkt_type`).
pub mod pkt_type {
    /// `PACKET_HOST`: addressed to this host's link address.
    pub const HOST: u8 = 0;
    /// `PACKET_BROADCAST`: to the link broadcast address.
    pub const BROADCAST: u8 = 1;
    /// `PACKET_MULTICAST`: to a link multicast address.
    pub const MULTICAST: u8 = 2;
    /// `PACKET_OTHERHOST`: to another host's link address.
    pub const OTHERHOST: u8 = 3;
    /// Largest number the key holds (`PACKET_OUTGOING` .. are never seen
    /// by a match: see `docs/hooks.md`).
    pub const MAX: u8 = 7;

    /// nft's names by number (`meta pkttype host`, `other`).
    pub const NAMES: [&str; 4] = ["host", "broadcast", "multicast", "other"];

    /// The number of an nft or iptables name: nft also reads `unicast`
    /// for host, iptables says `unicast` and `otherhost`.
    pub fn from_name(s: &str) -> Option<u8> {
        match s.to_ascii_lowercase().as_str() {
            "unicast" => Some(HOST),
            "otherhost" => Some(OTHERHOST),
            l => NAMES.iter().position(|n| *n == l).map(|i| i as u8),
        }
    }

    /// nft's name of a type number.
    pub fn name(v: u8) -> Option<&'static str> {
        NAMES.get(v as usize).copied()
    }

    /// iptables' name of a type number.
    pub fn iptables_name(v: u8) -> Option<&'static str> {
        ["unicast", "broadcast", "multicast", "otherhost"]
            .get(v as usize)
            .copied()
    }
}

/// The type of an address that no host state names: what the kernel's
/// `inet_addr_type` (IPv4) and nft's fib (IPv6) return from the address
/// alone — 0.0.0.0/8 and 255.255.255.255 BROADCAST, 224.0.0.0/4 and
/// ff00::/8 MULTICAST, 127.0.0.0/8 and ::1 LOCAL (the loopback interface's
/// routes), `::` UNSPEC, anything else UNICAST. The host's own addresses
/// and its subnets' broadcast addresses need the host's tables.
pub fn by_prefix(family: Family, addr: u128) -> u8 {
    use addr_type::*;
    match family {
        Family::V4 => {
            let a = addr as u32;
            if a >> 24 == 0 || a == u32::MAX {
                BROADCAST
            } else if a >> 28 == 0xe {
                MULTICAST
            } else if a >> 24 == 127 {
                LOCAL
            } else {
                UNICAST
            }
        }
        Family::V6 => {
            if addr == 0 {
                UNSPEC
            } else if addr >> 120 == 0xff {
                MULTICAST
            } else if addr == 1 {
                LOCAL
            } else {
                UNICAST
            }
        }
    }
}

/// The IPv6 route types beyond the `local` table: an address that is not
/// UNSPEC, LOCAL or MULTICAST is UNICAST in the dataplane (and in
/// [`by_prefix`]), while for IPv6 the kernel reads ANYCAST, BLACKHOLE,
/// UNREACHABLE (no route at all), PROHIBIT and THROW from a route lookup
/// in the whole table (xt_addrtype's `match_lookup_rt6`, nft's
/// `nft_fib6_eval_type`).
const UNICAST_LIKE: [u8; 8] = [1, 4, 6, 7, 8, 9, 10, 11];

/// Whether the dataplane's address types decide a rule on address type set
/// `set` as the kernel does, for a rule of families `family` (the rule's
/// [`crate::Field::Family`] set; `None`: both). IPv4 always: the kernel's
/// `inet_addr_type` reads the `local` table alone, whose local and
/// broadcast routes the dataplane mirrors, else UNICAST. IPv6 when the set
/// matches every unicast-like type alike (all of them, `! --dst-type
/// LOCAL`, or none, `--dst-type LOCAL`); a set telling UNICAST from
/// UNREACHABLE (`--dst-type UNREACHABLE`, `fib daddr type unicast` in
/// nft's ip6 family) does not: the compiler refuses it.
pub fn dataplane_typed(family: Option<&crate::IntervalSet>, set: &crate::IntervalSet) -> bool {
    if family.is_some_and(|f| !f.contains(6)) {
        return true;
    }
    let n = UNICAST_LIKE
        .iter()
        .filter(|&&t| set.contains(t as u128))
        .count();
    n == 0 || n == UNICAST_LIKE.len()
}

/// The link-layer packet type a packet to `dst_type` has when nothing else
/// says: multicast and broadcast destinations go to the link's multicast and
/// broadcast addresses, anything else to the host.
pub fn pkt_type_of(dst_type: u8) -> u8 {
    match dst_type {
        addr_type::MULTICAST => pkt_type::MULTICAST,
        addr_type::BROADCAST => pkt_type::BROADCAST,
        _ => pkt_type::HOST,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_give_the_kernels_types() {
        let v4 = |s: &str| {
            by_prefix(
                Family::V4,
                u32::from(s.parse::<std::net::Ipv4Addr>().unwrap()) as u128,
            )
        };
        assert_eq!(v4("0.0.0.0"), addr_type::BROADCAST);
        assert_eq!(v4("255.255.255.255"), addr_type::BROADCAST);
        assert_eq!(v4("224.0.0.1"), addr_type::MULTICAST);
        assert_eq!(v4("239.255.255.250"), addr_type::MULTICAST);
        assert_eq!(v4("127.0.0.53"), addr_type::LOCAL);
        assert_eq!(v4("10.0.0.255"), addr_type::UNICAST);
        assert_eq!(by_prefix(Family::V6, 0), addr_type::UNSPEC);
        assert_eq!(by_prefix(Family::V6, 1), addr_type::LOCAL);
        assert_eq!(
            by_prefix(Family::V6, 0xff02 << 112 | 1),
            addr_type::MULTICAST
        );
    }

    #[test]
    fn names_round_trip() {
        for v in 0..=addr_type::MAX {
            assert_eq!(addr_type::from_name(addr_type::name(v).unwrap()), Some(v));
        }
        assert_eq!(addr_type::from_name("local"), Some(addr_type::LOCAL));
        assert_eq!(pkt_type::from_name("unicast"), Some(pkt_type::HOST));
        assert_eq!(pkt_type::from_name("otherhost"), Some(pkt_type::OTHERHOST));
        assert_eq!(pkt_type::from_name("other"), Some(pkt_type::OTHERHOST));
        assert_eq!(
            pkt_type::iptables_name(pkt_type::OTHERHOST),
            Some("otherhost")
        );
    }
}
