//! nft match values: one value, a comma list or an anonymous set `{ … }`
//! read as the interval set of the selector's kind (addresses, ports,
//! protocol and ICMP names, `ct state` words, numbers and ranges).

use super::lexer::{Res, Tok, Token};
use super::matches::Kind;
use super::rule::RuleParser;
use crate::common::*;
use parapet_model::routing;
use parapet_model::*;

/// `nft describe icmp_code`: the names nft accepts and prints for ICMP codes.
const NFT_ICMP_CODES: [(&str, u8); 8] = [
    ("net-unreachable", 0),
    ("host-unreachable", 1),
    ("prot-unreachable", 2),
    ("port-unreachable", 3),
    ("frag-needed", 4),
    ("net-prohibited", 9),
    ("host-prohibited", 10),
    ("admin-prohibited", 13),
];

/// `nft describe icmpv6_code`.
const NFT_ICMP6_CODES: [(&str, u8); 6] = [
    ("no-route", 0),
    ("admin-prohibited", 1),
    ("addr-unreachable", 3),
    ("port-unreachable", 4),
    ("policy-fail", 5),
    ("reject-route", 6),
];

impl RuleParser<'_> {
    /// A value, a comma list (ct state), or an anonymous set `{ a, b }`.
    pub(super) fn value(&mut self, kind: Kind) -> Res<IntervalSet> {
        let mut set = IntervalSet::empty();
        if matches!(self.peek().map(|t| &t.tok), Some(Tok::Open)) {
            self.i += 1;
            loop {
                let t = self.next_word("a set element")?;
                set = set.union(&self.element(kind, &t)?);
                self.element_counter()?;
                match self.peek().map(|t| &t.tok) {
                    Some(Tok::Comma) => {
                        self.i += 1;
                        if matches!(self.peek().map(|t| &t.tok), Some(Tok::Close)) {
                            self.i += 1;
                            break;
                        }
                    }
                    Some(Tok::Close) => {
                        self.i += 1;
                        break;
                    }
                    _ => return self.fail("expected ',' or '}' in the set"),
                }
            }
            return Ok(set);
        }
        let t = self.next_word("a value")?;
        set = self.element(kind, &t)?;
        // Bitmask-style lists: `ct state established,related`.
        while kind == Kind::Ct && matches!(self.peek().map(|t| &t.tok), Some(Tok::Comma)) {
            self.i += 1;
            let t = self.next_word("a conntrack state")?;
            set = set.union(&self.element(kind, &t)?);
        }
        Ok(set)
    }

    /// An element's own `counter [packets N bytes N]` (`{ 0xa counter
    /// packets 0 bytes 0 }`, as nft lists an anonymous set whose elements
    /// count): it counts the packets the element matches and decides
    /// nothing, so it is read and left to the kernel's listing.
    fn element_counter(&mut self) -> Res<()> {
        if !matches!(self.peek().map(|t| &t.tok), Some(Tok::Word(w)) if w == "counter") {
            return Ok(());
        }
        self.i += 1;
        for what in ["packets", "bytes"] {
            match self.peek().map(|t| &t.tok) {
                Some(Tok::Word(w)) if w == what => {
                    self.i += 1;
                    let n = self.next_word(&format!("a number of {what}"))?;
                    if !matches!(&n.tok, Tok::Word(w) if w.parse::<u64>().is_ok()) {
                        return Err((n.line, n.col, format!("expected a number of {what}")));
                    }
                }
                _ if what == "packets" => return Ok(()),
                _ => {
                    return self.fail("expected 'bytes N' after the element's 'counter packets N'")
                }
            }
        }
        Ok(())
    }

    pub(super) fn element(&self, kind: Kind, t: &Token) -> Res<IntervalSet> {
        let text = match &t.tok {
            Tok::Word(w) | Tok::Str(w) => w.as_str(),
            _ => unreachable!(),
        };
        let err = |m: String| (t.line, t.col, m);
        match kind {
            Kind::Addr(f) => {
                let r = if text.contains('-') && !text.contains('/') {
                    parse_ip_range(text, Some(f))
                } else {
                    parse_cidr(text, Some(f))
                };
                r.map(|(_, s)| s).map_err(err)
            }
            Kind::Port => {
                let (lo, hi) = match text.split_once('-') {
                    Some((a, b)) => (parse_port(a).map_err(err)?, parse_port(b).map_err(err)?),
                    None => {
                        let p = parse_port(text).map_err(err)?;
                        (p, p)
                    }
                };
                if lo > hi {
                    return Err(err(format!("port range '{text}' is empty (start after end)")));
                }
                Ok(IntervalSet::range(lo, hi))
            }
            Kind::Proto => protocol_number(text)
                .map(|p| IntervalSet::point(p as u128))
                .ok_or_else(|| err(format!("expected a protocol name or number (tcp, udp, icmp, …), found '{text}'"))),
            Kind::Ethertype => match text {
                "ip" | "0x0800" | "0x800" | "2048" => Ok(IntervalSet::point(4)),
                "ip6" | "0x86dd" | "34525" => Ok(IntervalSet::point(6)),
                // Other ethertypes never reach an ip, ip6 or inet table.
                "arp" | "vlan" | "8021ad" | "0x0806" | "0x8100" | "0x88a8" => {
                    Ok(IntervalSet::empty())
                }
                _ => Err(err(format!("expected an ethertype (ip, ip6, arp, vlan or 0xNNNN), found '{text}'"))),
            },
            Kind::Nfproto => match text {
                "ipv4" => Ok(IntervalSet::point(4)),
                "ipv6" => Ok(IntervalSet::point(6)),
                _ => Err(err(format!("expected ipv4 or ipv6, found '{text}'"))),
            },
            Kind::Iface => {
                let spec = match text.strip_suffix('*') {
                    Some(p) => format!("{p}+"),
                    None => text.to_string(),
                };
                crate::iptables::iface_set(&spec).map_err(err)
            }
            Kind::Ct => CtState::from_name(text)
                .map(|s| IntervalSet::point(s as u128))
                .ok_or_else(|| err(format!("expected a conntrack state (new, established, related, invalid, untracked), found '{text}'"))),
            Kind::IcmpType(v6) => {
                let names = if v6 { ICMP6_NAMES } else { ICMP_NAMES };
                // nft's own ICMPv6 names that ip6tables does not have.
                const NFT_ICMP6: [(&str, u8, Option<u8>); 4] = [
                    ("mld-listener-reduction", 132, None),
                    ("router-renumbering", 138, None),
                    ("ind-neighbor-solicit", 141, None),
                    ("ind-neighbor-advert", 142, None),
                ];
                let extra: &[(&str, u8, Option<u8>)] = if v6 { &NFT_ICMP6 } else { &[] };
                let t = match names.iter().chain(extra).find(|(n, _, c)| c.is_none() && *n == text) {
                    Some((_, t, _)) => *t,
                    None => text.parse::<u8>().map_err(|_| err(format!("expected an ICMP type name or number (like echo-request or 8), found '{text}'")))?,
                };
                Ok(icmp_interval(t, None))
            }
            Kind::Number(_) | Kind::Rt(_) => {
                let max = match kind {
                    Kind::Number(max) => max,
                    _ => routing::BYTE_MAX,
                };
                let num = |s: &str| crate::iptables::parse_number(s, max.min(u32::MAX as u128) as u32);
                let (lo, hi) = match text.split_once('-') {
                    Some((a, b)) => (num(a), num(b)),
                    None => (num(text), num(text)),
                };
                match (lo, hi) {
                    (Some(lo), Some(hi)) if lo <= hi => Ok(IntervalSet::range(lo as u128, hi as u128)),
                    _ => Err(err(format!("expected a number 0-{max} or a range A-B, found '{text}'"))),
                }
            }
            Kind::Dscp => {
                let one = |s: &str| {
                    dscp_class(s)
                        .map(u32::from)
                        .or_else(|| crate::iptables::parse_number(s, 0x3f))
                };
                let (lo, hi) = match text.split_once('-') {
                    Some((a, b)) => (one(a), one(b)),
                    None => (one(text), one(text)),
                };
                match (lo, hi) {
                    (Some(lo), Some(hi)) if lo <= hi => Ok(IntervalSet::range(lo as u128, hi as u128)),
                    _ => Err(err(format!("expected a DSCP value 0-63 or name (cs0-cs7, af11-af43, ef), found '{text}'"))),
                }
            }
            Kind::Owner(kind) => crate::owner_ids::nft_range(kind, text)
                .map(|(lo, hi)| IntervalSet::range(lo as u128, hi as u128))
                .map_err(err),
            Kind::Mac => match mac::parse(text) {
                Some(m) => Ok(IntervalSet::point(mac::key_value(Some(m)))),
                None => Err(err(format!("expected a MAC address xx:xx:xx:xx:xx:xx, found '{text}'"))),
            },
            Kind::RevPath(iif) => super::fib::rev_path_value(iif, text).map_err(err),
            Kind::AddrType | Kind::PktType => {
                let (found, max, what) = if kind == Kind::AddrType {
                    (addr_type::from_name(text), addr_type::MAX, "an address type (unspec, unicast, local, broadcast, anycast, multicast, blackhole, unreachable, prohibit, throw, nat, xresolve)")
                } else {
                    (pkt_type::from_name(text).filter(|_| text != "otherhost"), pkt_type::OTHERHOST, "a packet type (host, unicast, broadcast, multicast, other)")
                };
                match found.or_else(|| text.parse::<u8>().ok().filter(|&n| n <= max)) {
                    Some(v) => Ok(IntervalSet::point(v as u128)),
                    None => Err(err(format!("expected {what}, found '{text}'"))),
                }
            }
            Kind::IcmpCode(v6) => {
                let names: &[(&str, u8)] = if v6 { &NFT_ICMP6_CODES } else { &NFT_ICMP_CODES };
                let c: u8 = match names.iter().find(|(n, _)| *n == text) {
                    Some((_, c)) => *c,
                    None => text.parse().map_err(|_| {
                        let known: Vec<&str> = names.iter().map(|(n, _)| *n).collect();
                        err(format!(
                            "expected an ICMP{} code 0-255 or one of {}, found '{text}'",
                            if v6 { "v6" } else { "" },
                            known.join(", ")
                        ))
                    })?,
                };
                Ok(IntervalSet::from_ranges((0u128..=255).map(|t| ((t << 8) | c as u128, (t << 8) | c as u128))))
            }
        }
    }
}
