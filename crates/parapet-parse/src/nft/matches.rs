//! nft match expressions: selectors (`ip saddr`, `tcp dport`, `ct state`,
//! concatenations for named sets), comparison operators, and the values and
//! anonymous sets they compare with, lowered to per-field interval sets.

use super::lexer::{Res, Tok, Token};
use super::rule::RuleParser;
use super::vmap::{entries, VmapEntry};
use crate::common::*;
use crate::owner_ids::OwnerKind;
use parapet_model::routing;
use parapet_model::*;

/// What kind of values a selector compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Addr(Family),
    Port,
    Proto,
    Iface,
    Ct,
    IcmpType(bool),
    /// `icmp code` / `icmpv6 code`: a number or a name `nft describe
    /// icmp_code` (or `icmpv6_code`) prints.
    IcmpCode(bool),
    Nfproto,
    /// `meta protocol`: the ethertype, which in ip/ip6/inet tables is the
    /// packet's family.
    Ethertype,
    /// A plain number up to the given maximum (`ip ttl`, `meta length`),
    /// decimal or `0x` hex, or a range `A-B`.
    Number(u128),
    /// `ip dscp`: a number or one of nft's names (`ef`, `af41`, `cs1`).
    Dscp,
    /// `fib saddr|daddr type`: a route type name (`local`) or number.
    AddrType,
    /// `meta pkttype`: a packet type name (`host`) or number.
    PktType,
    /// `fib saddr [. iif] oif`: `missing` or `exists`; true with `. iif`
    /// ([`parapet_model::rev_path`]).
    RevPath(bool),
    /// `ether saddr`: a MAC address `xx:xx:xx:xx:xx:xx`.
    Mac,
    /// `meta skuid`/`skgid`: a user or group name, an id or a range,
    /// packed as `parapet_model::owner` (id + 2).
    Owner(OwnerKind),
    /// `rt type|seg-left|hdrlength`: one byte of the first IPv6 routing
    /// header, lifted into `Field::Routing` (`parapet_model::routing`).
    Rt(routing::Part),
}

pub(super) struct Selector {
    pub(super) field: Field,
    pub(super) kind: Kind,
    /// Constraints the selector implies (`tcp dport` implies tcp).
    pub(super) implied: Vec<(Field, IntervalSet)>,
}

/// The start of the error for a payload or meta set statement (`ip dscp
/// set 1`): a chain whose only errors are these and that decides nothing
/// only mangles, and is left to the kernel (`kernel.rs`).
pub(super) const PAYLOAD_SET: &str = "a payload or meta statement";

const SUPPORTED_EXPRS: &str = "ip/ip6 saddr|daddr|protocol|nexthdr|dscp, ip ttl, ip6 hoplimit, tcp/udp/sctp/udplite/th sport|dport, tcp flags, meta l4proto|nfproto|protocol|iifname|oifname|length|pkttype|mark|skuid|skgid, mark, skuid, skgid, fib saddr|daddr type, fib saddr [. iif] oif missing|exists, ether saddr, rt type|seg-left|hdrlength, exthdr rt exists|missing, iifname, oifname, ct state|status|protocol|mark, ct original proto-dst|proto-src, ct original|reply ip|ip6 saddr|daddr, icmp/icmpv6 type|code, counter, log, limit, comment, accept, drop, reject, jump, goto, return";

impl RuleParser<'_> {
    /// A selector expression: `ip saddr`, `tcp dport`, `ct state`, …
    pub(super) fn selector(&mut self) -> Res<Selector> {
        let t = self.next_word("an expression")?;
        let w = t.word().unwrap_or("").to_string();
        let (l, c) = (t.line, t.col);
        let fam_pt = |f: Family| (Field::Family, IntervalSet::point(f.value()));
        let sel = |field, kind, implied| {
            Ok(Selector {
                field,
                kind,
                implied,
            })
        };
        let sub = |p: &mut Self, what: &str| -> Res<String> {
            p.next_word(what)
                .map(|t| t.word().unwrap_or("").to_string())
        };
        match w.as_str() {
            "ip" | "ip6" => {
                let f = if w == "ip" { Family::V4 } else { Family::V6 };
                if (self.family == TableFamily::Ip && f == Family::V6)
                    || (self.family == TableFamily::Ip6 && f == Family::V4)
                {
                    return Err((
                        l,
                        c,
                        format!(
                            "'{w}' matches cannot appear in a {} table",
                            self.family.nft_name()
                        ),
                    ));
                }
                let k = sub(self, "saddr, daddr or protocol")?;
                match k.as_str() {
                    "saddr" => sel(Field::SrcAddr, Kind::Addr(f), vec![fam_pt(f)]),
                    "daddr" => sel(Field::DstAddr, Kind::Addr(f), vec![fam_pt(f)]),
                    "protocol" | "nexthdr" => sel(Field::Proto, Kind::Proto, vec![fam_pt(f)]),
                    "ttl" if f == Family::V4 => sel(Field::Ttl, Kind::Number(0xff), vec![fam_pt(f)]),
                    "hoplimit" if f == Family::V6 => sel(Field::Ttl, Kind::Number(0xff), vec![fam_pt(f)]),
                    "dscp" => sel(Field::Dscp, Kind::Dscp, vec![fam_pt(f)]),
                    "frag-off" if f == Family::V4 => {
                        // Only `ip frag-off & 0x1fff != 0` (non-first fragment).
                        let toks: Vec<String> = self.toks[self.i..].iter().take(4).map(|t| t.show()).collect();
                        let want_nf = ["&", "0x1fff", "!=", "0"];
                        let want_f = ["&", "0x1fff", "==", "0"];
                        let frag = if toks == want_nf {
                            1
                        } else if toks == want_f {
                            0
                        } else {
                            return self.fail("expected '& 0x1fff != 0' (non-first fragments) or '& 0x1fff == 0' after 'ip frag-off'");
                        };
                        self.i += 4;
                        self.matches.constrain(Field::Family, IntervalSet::point(4));
                        self.matches.constrain(Field::Fragment, IntervalSet::point(frag));
                        Err((0, 0, String::new()))
                    }
                    other => Err((l, c, format!("'{w} {other}' is not supported (supported: {w} saddr, {w} daddr, {w} {}, {w} dscp)", if w == "ip" { "protocol, ip ttl" } else { "nexthdr, ip6 hoplimit" }))),
                }
            }
            "tcp" | "udp" | "sctp" | "udplite" => {
                let p = protocol_number(&w).expect("known protocol");
                let proto = (Field::Proto, IntervalSet::point(p as u128));
                let k = sub(self, "sport, dport or flags")?;
                // A transport header load never matches a non-first
                // fragment (nft_payload breaks on `fragoff`).
                let first = (Field::Fragment, IntervalSet::point(0));
                match k.as_str() {
                    "sport" => sel(Field::SrcPort, Kind::Port, vec![proto, first]),
                    "dport" => sel(Field::DstPort, Kind::Port, vec![proto, first]),
                    "flags" if w == "tcp" => {
                        self.tcp_flags()?;
                        self.matches.constrain(proto.0, proto.1);
                        self.matches.constrain(first.0, first.1);
                        Err((0, 0, String::new()))
                    }
                    other => Err((
                        l,
                        c,
                        format!(
                            "'{w} {other}' is not supported (supported: {w} sport, {w} dport{})",
                            if w == "tcp" { ", tcp flags" } else { "" }
                        ),
                    )),
                }
            }
            "icmp" | "icmpv6" => {
                let v6 = w == "icmpv6";
                let f = if v6 { Family::V6 } else { Family::V4 };
                if (self.family == TableFamily::Ip && v6)
                    || (self.family == TableFamily::Ip6 && !v6)
                {
                    return Err((
                        l,
                        c,
                        format!(
                            "'{w}' matches cannot appear in a {} table",
                            self.family.nft_name()
                        ),
                    ));
                }
                let implied = vec![
                    fam_pt(f),
                    (Field::Proto, IntervalSet::point(if v6 { 58 } else { 1 })),
                    (Field::Fragment, IntervalSet::point(0)),
                ];
                let k = sub(self, "type or code")?;
                match k.as_str() {
                    "type" => sel(Field::IcmpTypeCode, Kind::IcmpType(v6), implied),
                    "code" => sel(Field::IcmpTypeCode, Kind::IcmpCode(v6), implied),
                    other => Err((
                        l,
                        c,
                        format!("'{w} {other}' is not supported (supported: {w} type, {w} code)"),
                    )),
                }
            }
            "meta" => {
                let k = sub(self, "l4proto, nfproto, iifname or oifname")?;
                match k.as_str() {
                    "l4proto" => sel(Field::Proto, Kind::Proto, vec![]),
                    "nfproto" => sel(Field::Family, Kind::Nfproto, vec![]),
                    "protocol" => sel(Field::Family, Kind::Ethertype, vec![]),
                    "iifname" | "iif" => sel(Field::InIface, Kind::Iface, vec![]),
                    "oifname" | "oif" => sel(Field::OutIface, Kind::Iface, vec![]),
                    "length" => sel(Field::Length, Kind::Number(0xffff_ffff), vec![]),
                    "pkttype" => sel(Field::PktType, Kind::PktType, vec![]),
                    "mark" => sel(Field::Mark, Kind::Number(0xffff_ffff), vec![]),
                    "skuid" => sel(Field::SkUid, Kind::Owner(OwnerKind::User), vec![]),
                    "skgid" => sel(Field::SkGid, Kind::Owner(OwnerKind::Group), vec![]),
                    other => Err((l, c, format!("'meta {other}' is not supported (supported: meta l4proto, nfproto, protocol, iifname, oifname, length, pkttype, mark, skuid, skgid)"))),
                }
            }
            "iifname" | "iif" => sel(Field::InIface, Kind::Iface, vec![]),
            "oifname" | "oif" => sel(Field::OutIface, Kind::Iface, vec![]),
            "pkttype" => sel(Field::PktType, Kind::PktType, vec![]),
            "fib" => {
                let (field, kind) = self.fib_head()?;
                sel(field, kind, vec![])
            }
            // nft's short form of `meta mark`
            "mark" => sel(Field::Mark, Kind::Number(0xffff_ffff), vec![]),
            // and of `meta skuid`/`meta skgid`
            "skuid" => sel(Field::SkUid, Kind::Owner(OwnerKind::User), vec![]),
            "skgid" => sel(Field::SkGid, Kind::Owner(OwnerKind::Group), vec![]),
            "rt" => {
                if self.family == TableFamily::Ip {
                    return Err((
                        l,
                        c,
                        "'rt' matches the IPv6 routing header: it cannot appear in an ip table"
                            .into(),
                    ));
                }
                let part = match sub(self, "type, seg-left or hdrlength")?.as_str() {
                    "type" => routing::Part::Type,
                    "seg-left" => routing::Part::SegmentsLeft,
                    "hdrlength" => routing::Part::HdrLen,
                    other => return Err((l, c, format!("'rt {other}' is not supported (supported: rt type, rt seg-left, rt hdrlength)"))),
                };
                sel(Field::Routing, Kind::Rt(part), vec![])
            }
            "exthdr" => {
                let what = sub(self, "rt")?;
                if what != "rt" {
                    return Err((l, c, format!("'exthdr {what}' is not supported (supported: exthdr rt exists, exthdr rt missing)")));
                }
                if self.family == TableFamily::Ip {
                    return Err((l, c, "'exthdr rt' matches the IPv6 routing header: it cannot appear in an ip table".into()));
                }
                let set = match sub(self, "exists or missing")?.as_str() {
                    "exists" => routing::present(),
                    "missing" => IntervalSet::point(0),
                    other => {
                        return Err((
                            l,
                            c,
                            format!(
                                "expected exists or missing after 'exthdr rt', found '{other}'"
                            ),
                        ))
                    }
                };
                self.matches.constrain(Field::Routing, set);
                Err((0, 0, String::new()))
            }
            "ether" => match sub(self, "saddr")?.as_str() {
                "saddr" => sel(Field::MacSrc, Kind::Mac, vec![]),
                other => Err((
                    l,
                    c,
                    format!("'ether {other}' is not supported (supported: ether saddr)"),
                )),
            },
            "th" => {
                // The transport header's first two 16-bit words: the ports
                // of tcp/udp/sctp/udplite, other bytes for other protocols.
                // Exact only where the rule matches port protocols alone,
                // which `table::rule` checks once the rule is read.
                let k = sub(self, "sport or dport")?;
                self.th.get_or_insert((l, c));
                let first = (Field::Fragment, IntervalSet::point(0));
                match k.as_str() {
                    "sport" => sel(Field::SrcPort, Kind::Port, vec![first]),
                    "dport" => sel(Field::DstPort, Kind::Port, vec![first]),
                    other => Err((
                        l,
                        c,
                        format!("'th {other}' is not supported (supported: th sport, th dport)"),
                    )),
                }
            }
            "ct" => {
                let k = sub(self, "state, status, mark, protocol or original")?;
                // nft_ct breaks (no match) on a packet without an entry.
                let entry = (Field::CtState, crate::ctstatus::tracked());
                match k.as_str() {
                    "state" => sel(Field::CtState, Kind::Ct, vec![]),
                    "mark" => sel(Field::CtMark, Kind::Number(0xffff_ffff), vec![]),
                    "protocol" => sel(Field::CtProto, Kind::Proto, vec![entry]),
                    "original" | "reply" => {
                        let mut key = sub(self, "ip, ip6, saddr, daddr, proto-src or proto-dst")?;
                        let fam = match key.as_str() {
                            "ip" => Some(Family::V4),
                            "ip6" => Some(Family::V6),
                            _ => None,
                        };
                        if fam.is_some() {
                            key = sub(self, "saddr or daddr")?;
                        }
                        match (k.as_str(), key.as_str()) {
                            ("original", "proto-dst") if fam.is_none() => sel(Field::CtOrigDstPort, Kind::Port, vec![entry]),
                            ("original", "proto-src") if fam.is_none() => sel(Field::CtOrigSrcPort, Kind::Port, vec![entry]),
                            (dir, "saddr" | "daddr") => {
                                let field = match (dir, key.as_str()) {
                                    ("original", "saddr") => Field::CtOrigSrc,
                                    ("original", _) => Field::CtOrigDst,
                                    (_, "saddr") => Field::CtReplSrc,
                                    _ => Field::CtReplDst,
                                };
                                let f = self.ct_addr_family(fam, dir, &key, (l, c))?;
                                // nft_ct breaks on an entry of the other
                                // family too (`nf_ct_l3num`)
                                sel(field, Kind::Addr(f), vec![entry, fam_pt(f)])
                            }
                            (dir, other) => Err((
                                l,
                                c,
                                format!("'ct {dir} {other}' is not supported (supported: ct original|reply ip|ip6 saddr|daddr, ct original proto-dst, ct original proto-src)"),
                            )),
                        }
                    }
                    "status" => {
                        self.ct_status()?;
                        Err((0, 0, String::new()))
                    }
                    // nft_connlimit counts the conntrack entries of a key;
                    // parapet's dataplane keeps no such count.
                    "count" => Err((
                        l,
                        c,
                        "'ct count' is not supported: it counts conntrack's connections per key (nft_connlimit), which parapet's dataplane does not keep; keep the rule in nftables".into(),
                    )),
                    other => Err((
                        l,
                        c,
                        format!("'ct {other}' is not supported (supported: ct state, ct status, ct mark, ct protocol, ct original proto-dst|proto-src, ct original|reply ip|ip6 saddr|daddr)"),
                    )),
                }
            }
            other => Err((
                l,
                c,
                format!("unknown expression '{other}' (supported: {SUPPORTED_EXPRS})"),
            )),
        }
    }

    pub(super) fn match_expr(&mut self) -> Res<()> {
        let mut sels = Vec::new();
        loop {
            match self.selector() {
                Ok(s) => sels.push(s),
                // A selector that consumed its own value (tcp flags, frag-off).
                Err((0, 0, _)) if sels.is_empty() => return Ok(()),
                Err(e) => return Err(e),
            }
            if self.peek_word() == Some(".") {
                self.i += 1;
                continue;
            }
            break;
        }
        if self.peek_word() == Some("set") {
            return self.fail(format!("{PAYLOAD_SET} ('ip daddr set …') is not supported in a chain that also filters: it changes the packet later rules see (a chain whose rules only change packets, with no verdict, is left to the kernel)"));
        }
        let ct_addr_keyed = sels.iter().any(|s| {
            matches!(
                s.field,
                Field::CtOrigSrc | Field::CtOrigDst | Field::CtReplSrc | Field::CtReplDst
            )
        });
        if ct_addr_keyed
            && (sels.len() > 1
                || self.peek_word() == Some("vmap")
                || self.peek_word().is_some_and(|w| w.starts_with('@'))
                || matches!(self.peek().map(|t| &t.tok), Some(Tok::Amp)))
        {
            return self.fail("'ct original|reply … saddr|daddr' as a set, map or concatenation key or with a mask is not supported yet: compare it with an address, a prefix, a range or an anonymous set");
        }
        if matches!(self.peek().map(|t| &t.tok), Some(Tok::Amp)) {
            return self.masked(&sels);
        }
        let keys: Vec<(Field, Kind)> = sels.iter().map(|s| (s.field, s.kind)).collect();
        let owner_keyed = sels.iter().any(|s| matches!(s.kind, Kind::Owner(_)));
        let looks_up = self.peek_word().is_some_and(|w| w.starts_with('@'));
        if owner_keyed && (sels.len() > 1 || self.peek_word() == Some("vmap") || looks_up) {
            return self.fail("'meta skuid'/'meta skgid' as a set, map or concatenation key is not supported yet: compare it with a value, a range or an anonymous set");
        }
        let rt_keyed = sels.iter().any(|s| matches!(s.kind, Kind::Rt(_)));
        if rt_keyed && (sels.len() > 1 || self.peek_word() == Some("vmap") || looks_up) {
            return self.fail("'rt type|seg-left|hdrlength' as a set, map or concatenation key is not supported yet: compare it with a value, a range or an anonymous set");
        }
        if self.peek_word() == Some("vmap") {
            if self.rule.limit.is_some() {
                return self.fail("'limit' before a verdict map is not supported (it would limit each element separately)");
            }
            self.i += 1;
            for s in &sels {
                for (f, v) in &s.implied {
                    self.matches.constrain(*f, v.clone());
                }
            }
            return self.vmap(&keys);
        }
        let mut neg = false;
        let mut cmp: Option<String> = None;
        match self.peek_word() {
            Some("!=") => {
                neg = true;
                self.i += 1;
            }
            Some("==") => self.i += 1,
            Some(op @ ("<" | ">" | "<=" | ">=" | "lt" | "gt" | "le" | "ge")) => {
                cmp = Some(op.to_string());
                self.i += 1;
            }
            _ => {}
        }
        for s in &sels {
            for (f, v) in &s.implied {
                self.matches.constrain(*f, v.clone());
            }
        }
        if let Some(name) = self
            .peek_word()
            .and_then(|w| w.strip_prefix('@'))
            .map(str::to_string)
        {
            self.i += 1;
            if let Some(d) = self.dynsets.iter().find(|d| d.name == name).cloned() {
                return self.dynset_lookup(d, &sels, neg);
            }
            // `meta l4proto . th dport @s`: a packet is a member only with
            // the protocol of one of the set's elements. parapet reads
            // ports for port protocols alone, so the rule keeps to them;
            // an element naming another protocol never matches (the
            // kernel would compare that protocol's header bytes).
            let th_keyed = sels.iter().any(|s| {
                s.kind == Kind::Port && !s.implied.iter().any(|(f, _)| *f == Field::Proto)
            });
            if !neg && th_keyed && sels.iter().any(|s| s.field == Field::Proto) {
                self.matches.constrain(
                    Field::Proto,
                    IntervalSet::from_ranges(PORT_PROTOCOLS.iter().map(|&p| (p, p))),
                );
            }
            let set_ref = SetRef {
                name,
                key: SetKeySpec::Fields(sels.iter().map(|s| s.field).collect()),
            };
            let n = match self.set_refs.iter().position(|s| *s == set_ref) {
                Some(n) => n,
                None => {
                    self.set_refs.push(set_ref);
                    self.set_refs.len() - 1
                }
            };
            self.matches.constrain(
                Field::Set(n as u16),
                IntervalSet::point(if neg { 0 } else { 1 }),
            );
            return Ok(());
        }
        if sels.len() > 1 {
            if neg || cmp.is_some() || !matches!(self.peek().map(|t| &t.tok), Some(Tok::Open)) {
                return self.fail("expected '@SET' or '{ A . B, … }' after a concatenation (a negated or compared concatenation is not supported: it is not a union of boxes)");
            }
            // `ip protocol . th dport { tcp . 22, udp . 53 }`: one model
            // rule per element (see `table::rule`).
            let elements = self.braced("'}' closing the set")?;
            let alts = entries(&elements, &keys, false, |k, t| self.element(k, t))?;
            return self.alternatives(alts);
        }
        let s = &sels[0];
        let max = match s.kind {
            Kind::Addr(f) => width_mask(f.addr_bits()),
            Kind::Rt(_) => routing::BYTE_MAX,
            _ => s.field.max_value(),
        };
        let mut set = self.value(s.kind)?;
        if matches!(s.kind, Kind::Owner(_)) {
            if cmp.is_some() {
                return self.fail("'meta skuid'/'meta skgid' compare with == or != only in parapet (write a range A-B)");
            }
            // Without a socket with a file nft_meta breaks the rule, `!=`
            // included: the complement is within the ids.
            set = owner::nft_ids(&set, neg);
            self.matches.constrain(s.field, set);
            return Ok(());
        }
        if s.kind == Kind::Mac {
            if cmp.is_some() {
                return self.fail("'ether saddr' compares with == or != only");
            }
            // A packet without a link-layer header matches neither way
            // (nft_payload breaks): the complement is within the present
            // addresses (`parapet_model::mac`).
            if neg {
                set = IntervalSet::range(mac::PRESENT, 2 * mac::PRESENT - 1).difference(&set);
            }
            self.matches.constrain(s.field, set);
            return Ok(());
        }
        if let Some(op) = cmp {
            // `tcp dport < 1024`: only numbers compare.
            let [(v, _)] = set.ranges() else {
                return self.fail("expected one number after a comparison");
            };
            let v = *v;
            set = match op.as_str() {
                "<" | "lt" if v == 0 => IntervalSet::empty(),
                "<" | "lt" => IntervalSet::range(0, v - 1),
                "<=" | "le" => IntervalSet::range(0, v),
                ">" | "gt" => IntervalSet::range(v + 1, max),
                _ => IntervalSet::range(v, max),
            };
        }
        if neg {
            set = set.complement(max);
        }
        if let Kind::RevPath(_) = s.kind {
            // The field's two bits hold three outcomes.
            set = set.intersect(&IntervalSet::range(0, rev_path::MAX as u128));
        }
        if let Kind::Rt(part) = s.kind {
            // Without a routing header nft_exthdr breaks the rule, `!=`
            // included: the values are present headers only.
            self.matches
                .constrain(Field::Routing, routing::values(part, &set));
            return Ok(());
        }
        // `ip saddr 0.0.0.0/0` says no more than the family does.
        if !set.is_full(max) {
            self.matches.constrain(s.field, set);
        }
        Ok(())
    }

    /// `SEL & MASK ==|!= V` on one address or number: the values whose
    /// masked bits equal V's, as intervals — one per setting of the mask's
    /// zero bits above its lowest one bit, so a mask with few such holes
    /// (`& 255.0.255.0`) is exact and small; more than
    /// 2^`MAX_MASK_BITS` intervals become a [`MaskedMatch`].
    fn masked(&mut self, sels: &[Selector]) -> Res<()> {
        let [s] = sels else {
            return self.fail("a masked comparison on a concatenation is not supported");
        };
        let (width, max) = match s.kind {
            Kind::Addr(f) => (f.addr_bits(), width_mask(f.addr_bits())),
            Kind::Port | Kind::Proto | Kind::Number(_) => {
                let max = s.field.max_value();
                (128 - max.leading_zeros(), max)
            }
            _ => {
                return self.fail(
                    "a masked comparison is supported on addresses, ports, protocols and numbers (mark, length) only",
                )
            }
        };
        self.i += 1;
        let point = |p: &mut Self, what: &str| -> Res<u128> {
            let t = p.next_word(what)?;
            // A number as nft prints masks of ports and protocols (`0xfff1`).
            let number = t.word().and_then(|w| match w.strip_prefix("0x") {
                Some(h) => u128::from_str_radix(h, 16).ok(),
                None => w.parse::<u128>().ok(),
            });
            if let Some(n) = number.filter(|&n| !matches!(s.kind, Kind::Addr(_)) && n <= max) {
                return Ok(n);
            }
            match p.element(s.kind, &t)?.ranges() {
                [(a, b)] if a == b => Ok(*a),
                _ => Err((
                    t.line,
                    t.col,
                    format!("expected one {what}, found '{}'", t.show()),
                )),
            }
        };
        let mask = point(self, "mask")?;
        let neg = match self.peek_word() {
            Some("!=") => true,
            Some("==") => false,
            _ => return self.fail("expected '==' or '!=' after the mask"),
        };
        self.i += 1;
        let value = point(self, "value")?;
        for (f, v) in &s.implied {
            self.matches.constrain(*f, v.clone());
        }
        constrain_masked(&mut self.matches, s.field, width, mask, value, neg);
        Ok(())
    }

    /// After `tcp flags`: `& (a|b) == c`, `& (a|b) != c`, `c / a,b`,
    /// `== c`, or a plain flag list (any of them set, nft's bitmask meaning).
    fn tcp_flags(&mut self) -> Res<()> {
        let flags_word = |p: &mut Self| -> Res<u8> {
            let mut bits = 0u8;
            let paren = matches!(p.peek().map(|t| &t.tok), Some(Tok::LParen));
            if paren {
                p.i += 1;
            }
            loop {
                let t = p.next_word("a TCP flag (fin, syn, rst, psh, ack, urg, ecn, cwr)")?;
                let w = t.word().unwrap_or("");
                let b = if let Some(h) = w.strip_prefix("0x") {
                    u8::from_str_radix(h, 16).ok()
                } else {
                    tcp_flags::parse_list(if w == "ecn" { "ECE" } else { w })
                };
                bits |= b.ok_or((
                    t.line,
                    t.col,
                    format!(
                        "expected a TCP flag (fin, syn, rst, psh, ack, urg, ecn, cwr), found '{w}'"
                    ),
                ))?;
                match p.peek().map(|t| &t.tok) {
                    Some(Tok::Pipe | Tok::Comma) => p.i += 1,
                    _ => break,
                }
            }
            if paren {
                match p.peek().map(|t| &t.tok) {
                    Some(Tok::RParen) => p.i += 1,
                    _ => return p.fail("expected ')' after the flags"),
                }
            }
            Ok(bits)
        };
        let (mask, comp, neg) = if matches!(self.peek().map(|t| &t.tok), Some(Tok::Amp)) {
            self.i += 1;
            let mask = flags_word(self)?;
            let neg = match self.peek_word() {
                Some("==") => false,
                Some("!=") => true,
                _ => return self.fail("expected '==' or '!=' after 'tcp flags & (…)'"),
            };
            self.i += 1;
            let comp = flags_word(self)?;
            (mask, comp, neg)
        } else {
            let neg = match self.peek_word() {
                Some("!=") => {
                    self.i += 1;
                    true
                }
                Some("==") => {
                    self.i += 1;
                    let v = flags_word(self)?;
                    self.matches
                        .constrain(Field::TcpFlags, tcp_flags_set(0xff, v));
                    return Ok(());
                }
                _ => false,
            };
            let v = flags_word(self)?;
            if self.peek_word() == Some("/") {
                self.i += 1;
                let mask = flags_word(self)?;
                (mask, v, neg)
            } else {
                // `tcp flags syn`: some of these flags are set.
                let none = tcp_flags_set(v, 0);
                let set = if neg { none } else { none.complement(0xff) };
                self.matches.constrain(Field::TcpFlags, set);
                return Ok(());
            }
        };
        let set = tcp_flags_set(mask, comp);
        self.matches.constrain(
            Field::TcpFlags,
            if neg { set.complement(0xff) } else { set },
        );
        Ok(())
    }

    /// After `KEY vmap`: an anonymous map `{ … }` or `@NAME`. Nothing but a
    /// comment may follow (the map is the rule's verdict).
    pub(super) fn vmap(&mut self, keys: &[(Field, Kind)]) -> Res<()> {
        let elements: Vec<Token> = match self.peek().map(|t| t.tok.clone()) {
            Some(Tok::Open) => self.braced("'}' closing the verdict map")?,
            Some(Tok::Word(w)) if w.starts_with('@') => {
                let name = &w[1..];
                let Some(map) = self.maps.iter().find(|m| m.name == name) else {
                    return self.fail(format!("no map '{name}' in this table (a 'map {name} {{ … }}' must come before its use)"));
                };
                if !map.verdict {
                    return self.fail(format!(
                        "map '{name}' is not a verdict map ('type … : verdict')"
                    ));
                }
                self.i += 1;
                map.elements.clone()
            }
            _ => return self.fail("expected '{ KEY : VERDICT, … }' or '@MAP' after 'vmap'"),
        };
        let entries = entries(&elements, keys, true, |k, t| self.element(k, t))?;
        self.alternatives(entries)?;
        self.action = Some(Action::Count);
        Ok(())
    }

    /// The tokens between `{` (at the cursor) and its `}`, which is
    /// consumed too.
    pub(super) fn braced(&mut self, what: &str) -> Res<Vec<Token>> {
        self.i += 1;
        let start = self.i;
        let mut depth = 1;
        while let Some(t) = self.peek() {
            match t.tok {
                Tok::Open => depth += 1,
                Tok::Close => depth -= 1,
                _ => {}
            }
            self.i += 1;
            if depth == 0 {
                return Ok(self.toks[start..self.i - 1].to_vec());
            }
        }
        self.fail(format!("expected {what}"))
    }

    /// The rule becomes one model rule per element (a verdict map, or an
    /// anonymous concatenated set): one such construct per rule.
    pub(super) fn alternatives(&mut self, entries: Vec<VmapEntry>) -> Res<()> {
        if self.vmap.is_some() {
            return self.fail(
                "a second verdict map or anonymous concatenated set in one rule is not supported",
            );
        }
        self.vmap = Some(entries);
        Ok(())
    }
}

/// Transport protocols whose first two header words parapet reads as
/// ports: `th sport|dport` means those ports there, and only there.
const PORT_PROTOCOLS: [u128; 4] = [6, 17, 132, 136];

/// `th` (at `th`) is exact only in rules that match port protocols alone.
pub(super) fn check_th(th: Option<(u32, u32)>, rules: &[Rule]) -> Res<()> {
    let Some((line, col)) = th else {
        return Ok(());
    };
    let ports = IntervalSet::from_ranges(PORT_PROTOCOLS.iter().map(|&p| (p, p)));
    for r in rules {
        let only_ports = r
            .matches
            .get(Field::Proto)
            .is_some_and(|p| p.intersect(&ports) == *p);
        if !only_ports && !r.matches.is_unsatisfiable() {
            return Err((line, col, "'th' needs the rule to match only tcp, udp, sctp or udplite first (like 'meta l4proto { tcp, udp } th dport 53'): on other protocols it reads other header bytes".into()));
        }
    }
    Ok(())
}
