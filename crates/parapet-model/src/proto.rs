//! Names of transport protocols and well-known services: the one table
//! every frontend (iptables, nft, ipset, the daemon's clients) reads.
//!
//! Fixed lists, so parsing does not depend on the host's `/etc/protocols`
//! or `/etc/services` (whose names are in `netbase.rs`).

/// Protocol names iptables and nft accept, with their numbers. The first
/// name of a number is the one printed.
pub const PROTOCOLS: [(&str, u8); 10] = [
    ("icmp", 1),
    ("igmp", 2),
    ("tcp", 6),
    ("udp", 17),
    ("gre", 47),
    ("esp", 50),
    ("ah", 51),
    ("icmpv6", 58),
    ("sctp", 132),
    ("udplite", 136),
];

/// Other spellings of protocols in [`PROTOCOLS`].
const PROTOCOL_ALIASES: [(&str, u8); 2] = [("ipv6-icmp", 58), ("icmp6", 58)];

/// Looks up a protocol by name (`tcp`, `ipv6-icmp`; any case) or number.
pub fn protocol_number(s: &str) -> Option<u8> {
    PROTOCOLS
        .iter()
        .chain(&PROTOCOL_ALIASES)
        .chain(&crate::netbase::NETBASE_PROTOCOLS)
        .find(|(n, _)| n.eq_ignore_ascii_case(s))
        .map(|(_, p)| *p)
        .or_else(|| s.parse().ok())
}

/// The name of a protocol number, if it has a common one.
pub fn protocol_name(p: u8) -> Option<&'static str> {
    PROTOCOLS
        .iter()
        .find(|(_, n)| *n == p)
        .map(|(name, _)| *name)
}

/// Well-known service names accepted for ports (hand-written files use
/// them; iptables-save and nft print numbers).
pub const SERVICES: [(&str, u16); 27] = [
    ("ftp-data", 20),
    ("ftp", 21),
    ("ssh", 22),
    ("telnet", 23),
    ("smtp", 25),
    ("domain", 53),
    ("dns", 53),
    ("bootps", 67),
    ("bootpc", 68),
    ("tftp", 69),
    ("http", 80),
    ("www", 80),
    ("pop3", 110),
    ("ntp", 123),
    ("imap", 143),
    ("imap2", 143),
    ("snmp", 161),
    ("ldap", 389),
    ("https", 443),
    ("smtps", 465),
    ("submission", 587),
    ("ldaps", 636),
    ("imaps", 993),
    ("pop3s", 995),
    ("mysql", 3306),
    ("rdp", 3389),
    ("postgresql", 5432),
];

/// The port of a well-known service name (exact, lowercase).
pub fn service_port(name: &str) -> Option<u16> {
    SERVICES
        .iter()
        .chain(&crate::netbase::NETBASE_SERVICES)
        .find(|(n, _)| *n == name)
        .map(|&(_, p)| p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_numbers() {
        assert_eq!(protocol_number("TCP"), Some(6));
        assert_eq!(protocol_number("ipv6-icmp"), Some(58));
        assert_eq!(protocol_number("icmp6"), Some(58));
        assert_eq!(protocol_number("udplite"), Some(136));
        assert_eq!(protocol_number("99"), Some(99));
        assert_eq!(protocol_number("bogus"), None);
        assert_eq!(protocol_name(58), Some("icmpv6"));
        assert_eq!(protocol_name(99), None);
        assert_eq!(service_port("https"), Some(443));
        assert_eq!(service_port("www"), Some(80));
        assert_eq!(service_port("HTTPS"), None);
        assert_eq!(service_port("bgp"), Some(179));
        assert_eq!(service_port("pop3"), Some(110));
        assert_eq!(protocol_number("vrrp"), Some(112));
        assert_eq!(protocol_number("OSPFIGP"), Some(89));
        assert_eq!(protocol_number("mh"), Some(135));
        assert_eq!(protocol_number("ip"), None);
    }
}
