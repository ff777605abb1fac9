//! The match modules (`-m tcp`, `-m multiport`, `-m set`, …) and every
//! match option, lowered to per-field interval sets.

use super::addrtype::{type_option_module, TYPE_MATCHES};
use super::header::{header_option_module, HEADER_MATCHES};
use super::mac::MAC_MATCHES;
use super::mark::MARK_MATCHES;
use super::option_arg::OptionArg;
use super::owner::{OWNER_MATCHES, OWNER_OPTIONS};
use super::rt::{RT_MATCHES, RT_OPTIONS};
use super::rule::{Need, RuleParser, StatisticDraft};
use super::statistic::STATISTIC_OPTIONS;
use crate::common::*;
use parapet_model::*;

pub(super) const SUPPORTED_MATCHES: &str =
    "tcp, udp, sctp, udplite, icmp, icmp6, multiport, iprange, conntrack, state, set, comment, limit, recent, hashlimit, quota, statistic, string, time, ttl, hl, length, dscp, addrtype, pkttype, mark, connmark, mac, owner, rt";

const PORT_PROTOS: &[u8] = &[6, 17, 132, 136];

/// Matches that keep state: checked after the rule's other matches, in
/// their written order.
const STATEFUL_MATCHES: &[&str] = &["limit", "recent", "hashlimit", "quota", "statistic"];

/// The condition a stateful match module is.
fn stateful_kind(module: &str) -> Option<StatefulKind> {
    Some(match module {
        "limit" => StatefulKind::Limit,
        "recent" => StatefulKind::Recent,
        "hashlimit" => StatefulKind::Hashlimit,
        "quota" => StatefulKind::Quota,
        "statistic" => StatefulKind::Statistic,
        _ => return None,
    })
}

/// Matches that read the transport header (see `fragment_blind`).
const L4_MATCHES: &[&str] = &[
    "tcp",
    "udp",
    "sctp",
    "udplite",
    "icmp",
    "icmp6",
    "multiport",
];

/// Every option of `-m hashlimit`.
pub(super) const HASHLIMIT_OPTIONS: &[&str] = &[
    "--hashlimit",
    "--hashlimit-upto",
    "--hashlimit-above",
    "--hashlimit-burst",
    "--hashlimit-mode",
    "--hashlimit-srcmask",
    "--hashlimit-dstmask",
    "--hashlimit-name",
    "--hashlimit-htable-size",
    "--hashlimit-htable-max",
    "--hashlimit-htable-gcinterval",
    "--hashlimit-htable-expire",
    "--hashlimit-rate-match",
    "--hashlimit-rate-interval",
];

/// Which module provides an option.
fn option_module(opt: &str) -> Option<&'static [&'static str]> {
    Some(match opt {
        "--sport" | "--source-port" | "--dport" | "--destination-port" => {
            &["tcp", "udp", "sctp", "udplite"]
        }
        "--tcp-flags" | "--syn" | "--tcp-option" => &["tcp"],
        "--icmp-type" => &["icmp"],
        "--icmpv6-type" => &["icmp6"],
        "--sports" | "--dports" | "--ports" | "--source-ports" | "--destination-ports" => {
            &["multiport"]
        }
        "--src-range" | "--dst-range" => &["iprange"],
        "--ctstate" | "--ctproto" | "--ctorigdstport" | "--ctorigsrcport" | "--ctorigsrc"
        | "--ctorigdst" | "--ctreplsrc" | "--ctrepldst" => &["conntrack"],
        o if super::ctorig::REFUSED_CT_OPTIONS.contains(&o) => &["conntrack"],
        "--mark" => &["mark", "connmark"],
        "--mac-source" => MAC_MATCHES,
        o if OWNER_OPTIONS.contains(&o) => OWNER_MATCHES,
        o if RT_OPTIONS.contains(&o) => RT_MATCHES,
        "--state" => &["state"],
        "--match-set" => &["set"],
        "--comment" => &["comment"],
        "--limit" | "--limit-burst" => &["limit"],
        "--set" | "--rcheck" | "--update" | "--remove" | "--seconds" | "--hitcount" | "--rttl"
        | "--reap" | "--name" | "--rsource" | "--rdest" | "--mask" => &["recent"],
        o if HASHLIMIT_OPTIONS.contains(&o) => &["hashlimit"],
        o if super::time::TIME_OPTIONS.contains(&o) => &["time"],
        "--quota" => &["quota"],
        o if STATISTIC_OPTIONS.contains(&o) => &["statistic"],
        o if super::string::STRING_OPTIONS.contains(&o) => &["string"],
        _ => return header_option_module(opt).or_else(|| type_option_module(opt)),
    })
}

impl RuleParser<'_> {
    pub(super) fn module(&mut self, name: &Word) {
        const SUPPORTED: &[&str] = &[
            "tcp",
            "udp",
            "sctp",
            "udplite",
            "icmp",
            "icmp6",
            "icmpv6",
            "multiport",
            "iprange",
            "conntrack",
            "state",
            "set",
            "comment",
            "limit",
            "recent",
            "hashlimit",
            "quota",
            "statistic",
            "string",
            "time",
        ];
        let n = name.text.as_str();
        // A `-m string` before this one is complete (and stays before a
        // stateful match that follows).
        self.finish_string();
        // Stateful matches parapet cannot enforce exactly yet: refused, never
        // approximated (a rule that sometimes matches is not a rule that
        // always does).
        if n == "connlimit" {
            // nf_conncount keeps, per masked address, the list of the
            // host's tracked connections and prunes the closed ones; a BPF
            // program gets one packet's conntrack entry, never the set of
            // entries of an address, so the count cannot be known there.
            self.err(
                name.col,
                "match 'connlimit' is not supported: it counts the host's tracked connections per address (the kernel's nf_conncount), which parapet's dataplane cannot enumerate from a packet's conntrack entry; refused rather than guessed (-m hashlimit --hashlimit-mode srcip limits the rate of new connections instead)",
            );
            return;
        }
        if n == "rpfilter" {
            // xt_rpfilter's checkentry refuses every other table; in
            // `*raw`/`*mangle` (left to the kernel) it loads as written.
            self.err(
                name.col,
                "match 'rpfilter' is valid only in the raw and mangle tables (PREROUTING), as iptables-restore says: there parapet leaves it to the kernel, which enforces it; in nftables 'fib saddr . iif oif missing drop' in a prerouting chain is the same check, which parapet evaluates",
            );
            return;
        }
        if let Some(m) = self.header_module_family(n) {
            self.err(name.col, m);
            return;
        }
        if !SUPPORTED.contains(&n)
            && !HEADER_MATCHES.contains(&n)
            && !TYPE_MATCHES.contains(&n)
            && !MARK_MATCHES.contains(&n)
            && !MAC_MATCHES.contains(&n)
            && !OWNER_MATCHES.contains(&n)
            && !RT_MATCHES.contains(&n)
        {
            self.err(
                name.col,
                format!("unknown match '{n}' (supported: {SUPPORTED_MATCHES})"),
            );
            return;
        }
        let n = if n == "icmpv6" { "icmp6" } else { n };
        // Matching a protocol's options needs that protocol.
        let protos: Option<&'static [u8]> = match n {
            "tcp" => Some(&[6]),
            "udp" => Some(&[17]),
            "sctp" => Some(&[132]),
            "udplite" => Some(&[136]),
            "icmp" => Some(&[1]),
            "icmp6" => Some(&[58]),
            "multiport" => Some(PORT_PROTOS),
            _ => None,
        };
        if let Some(protos) = protos {
            self.needs.push(Need {
                col: name.col,
                what: format!("-m {n}"),
                protos,
            });
        }
        // The kernel runs a rule's matches in order: a stateful match
        // spends a token (or records a hit) only for the packets every
        // match before it admitted, so the rule keeps its stateful
        // matches in order (`Rule::stateful_order`) and what comes after
        // the first of them apart (`Rule::after_stateful`).
        if let Some(st) = self
            .modules
            .iter()
            .find(|m| STATEFUL_MATCHES.contains(&m.as_str()))
            .cloned()
        {
            if STATEFUL_MATCHES.contains(&n) {
                if n != st && self.before_stateful.is_some() {
                    self.err(
                        name.col,
                        format!("-m {n} after -m {st} and another match is not supported: parapet keeps a rule's stateful matches in order, with the matches before the first or after the last of them (write the other match before -m {st} or after -m {n})"),
                    );
                }
            } else if n == "time" {
                self.err(
                    name.col,
                    format!("-m time after -m {st} is not supported (parapet checks a time window before the stateful match): write -m time before -m {st}"),
                );
            } else if n != "comment" {
                self.begin_after_stateful();
            }
        }
        if let Some(kind) = stateful_kind(n).filter(|k| !self.stateful_order.contains(k)) {
            self.stateful_order.push(kind);
        }
        if n == "hashlimit" && self.hashlimit.is_none() {
            self.hashlimit = Some(super::rule::HashlimitDraft::new(self.family, name.col));
        }
        if n == "recent" && self.recent.is_none() {
            self.recent = Some((
                super::rule::RecentDraft {
                    recent: Recent::new(RECENT_DEFAULT_NAME, RecentCommand::Set),
                    command: None,
                    modifiers: Vec::new(),
                },
                name.col,
            ));
        }
        if n == "statistic" && self.statistic.is_none() {
            self.statistic = Some(StatisticDraft::new(name.col));
        }
        if n == "owner" {
            self.owner_module(name.col);
        }
        if n == "rt" {
            self.rt_module(name.col);
        }
        if n == "string" {
            self.string_module(name.col);
        }
        if L4_MATCHES.contains(&n) {
            self.fragment_blind();
        }
        if n == "tcp" {
            self.tcp_option_given = false;
        }
        if n == "multiport" || HEADER_MATCHES.contains(&n) || MARK_MATCHES.contains(&n) {
            self.module_options = 0;
        }
        self.modules.push(n.to_string());
    }

    /// The matches from here on run after the stateful one, as the kernel
    /// runs a rule's matches in order (`Rule::after_stateful`).
    fn begin_after_stateful(&mut self) {
        if self.before_stateful.is_none() {
            self.before_stateful = Some(self.matches.clone());
        }
    }

    /// True once a stateful match is loaded.
    fn stateful_loaded(&self) -> bool {
        self.modules
            .iter()
            .any(|m| STATEFUL_MATCHES.contains(&m.as_str()))
    }

    /// The kernel's tcp, udp, sctp, udplite, icmp, icmp6 and multiport
    /// matches never match a non-first fragment (it has no transport
    /// header), whatever their options and `!` say: a rule loading one
    /// matches first fragments and whole packets only.
    fn fragment_blind(&mut self) {
        self.matches
            .constrain(Field::Fragment, IntervalSet::point(0));
    }

    fn has_module(&self, mods: &[&str]) -> bool {
        // `-p tcp` loads the tcp match implicitly, as iptables does.
        let implicit = match self.proto {
            Some(6) => Some("tcp"),
            Some(17) => Some("udp"),
            Some(132) => Some("sctp"),
            Some(136) => Some("udplite"),
            Some(1) => Some("icmp"),
            Some(58) => Some("icmp6"),
            _ => None,
        };
        mods.iter()
            .any(|m| self.modules.iter().any(|l| l == m) || implicit == Some(*m))
    }

    fn constrain(&mut self, field: Field, set: IntervalSet, negated: Option<u32>, max: u128) {
        let set = if negated.is_some() {
            set.complement(max)
        } else {
            set
        };
        // `-s 0.0.0.0/0` constrains nothing once the family is fixed; keep
        // the model in the form iptables-save (which omits it) reads back to.
        if set.is_full(max) {
            return;
        }
        self.matches.constrain(field, set);
    }

    pub(super) fn option(&mut self, opt: &str, col: u32, negated: Option<u32>, vals: &[&Word]) {
        // The rule's own options (-s, -d, -p, -i, -o, -f) are the kernel's
        // IP part, checked before every match wherever they are written.
        let ip_part = matches!(
            opt,
            "-s" | "--source"
                | "-d"
                | "--destination"
                | "-p"
                | "--protocol"
                | "-i"
                | "--in-interface"
                | "-o"
                | "--out-interface"
                | "-f"
                | "--fragment"
        );
        if let Some(before) = self.before_stateful.take_if(|_| ip_part) {
            let whole = std::mem::replace(&mut self.matches, before);
            self.option_in_order(opt, col, negated, vals);
            let before = std::mem::replace(&mut self.matches, Matches::any());
            self.matches = whole.and(&before);
            self.before_stateful = Some(before);
            return;
        }
        // A protocol's options with no `-m` load its match implicitly, at
        // the first of them: after a stateful match, it runs after it.
        if let Some(mods) = option_module(opt) {
            let explicit = mods.iter().any(|m| self.modules.iter().any(|l| l == m));
            if !explicit && !ip_part {
                if self.stateful_loaded() && !self.implicit_l4 {
                    self.begin_after_stateful();
                }
                self.implicit_l4 = true;
            }
        }
        if opt == "--ports" && self.before_stateful.is_some() {
            return self.err(col, "-m multiport --ports after a stateful match is not supported (it is two boxes): write it before the stateful match");
        }
        self.option_in_order(opt, col, negated, vals)
    }

    fn option_in_order(&mut self, opt: &str, col: u32, negated: Option<u32>, vals: &[&Word]) {
        let v = vals.first().map(|w| w.text.as_str()).unwrap_or("");
        let vcol = vals.first().map_or(col, |w| w.col);
        let arg = OptionArg {
            name: opt,
            col,
            negated,
            value: v,
            vcol,
        };
        let addr_max = width_mask(self.family.addr_bits());
        if let Some(mods) = option_module(opt) {
            if !self.has_module(mods) {
                self.err(
                    col,
                    format!(
                        "option {opt} needs -m {} (or the matching -p) before it",
                        mods.join("|")
                    ),
                );
                return;
            }
            if mods.iter().all(|m| L4_MATCHES.contains(m)) {
                // Loaded implicitly by `-p tcp --dport …`: the same match.
                self.fragment_blind();
            }
        }
        match opt {
            "-s" | "--source" | "-d" | "--destination" => {
                let field = if opt.starts_with("-s") || opt == "--source" {
                    Field::SrcAddr
                } else {
                    Field::DstAddr
                };
                let mut set = IntervalSet::empty();
                for part in v.split(',') {
                    match parse_cidr(part, Some(self.family)) {
                        Ok((_, s)) => set = set.union(&s),
                        Err(m) => return self.err(vcol, m),
                    }
                }
                self.constrain(field, set, negated, addr_max);
            }
            "-p" | "--protocol" => {
                if self.proto.is_some() || self.matches.get(Field::Proto).is_some() {
                    return self.err(col, "-p given twice");
                }
                if v.eq_ignore_ascii_case("all") || v == "0" {
                    if let Some(c) = negated {
                        self.err(c, "'! -p all' matches nothing");
                    }
                    return;
                }
                let Some(p) = protocol_number(v) else {
                    return self.err(vcol, format!("expected a protocol name or number (tcp, udp, icmp, …), found '{v}'"));
                };
                if negated.is_none() {
                    self.proto = Some(p);
                }
                self.constrain(Field::Proto, IntervalSet::point(p as u128), negated, 0xff);
            }
            "-i" | "--in-interface" | "-o" | "--out-interface" => {
                let field = if opt.starts_with("-i") || opt.starts_with("--in") {
                    Field::InIface
                } else {
                    Field::OutIface
                };
                let chain = self.chain;
                if matches!((field, chain), (Field::OutIface, "INPUT") | (Field::InIface, "OUTPUT")) {
                    let short = if field == Field::InIface { "-i" } else { "-o" };
                    return self.err(col, format!("iptables refuses {short} in {chain} (\"Can't use {short} with {chain}\"): the packet has no {} interface there", if field == Field::InIface { "input" } else { "output" }));
                }
                match iface_set(v) {
                    Ok(set) => self.constrain(field, set, negated, u128::MAX),
                    Err(m) => self.err(vcol, m),
                }
            }
            "-f" | "--fragment" => {
                let set = IntervalSet::point(if negated.is_some() { 0 } else { 1 });
                self.matches.constrain(Field::Fragment, set);
            }
            "--sport" | "--source-port" | "--dport" | "--destination-port" => {
                let field = if matches!(opt, "--sport" | "--source-port") {
                    Field::SrcPort
                } else {
                    Field::DstPort
                };
                match parse_port_range(v, ':') {
                    Ok((lo, hi)) => self.constrain(field, IntervalSet::range(lo, hi), negated, 0xffff),
                    Err(m) => self.err(vcol, m),
                }
            }
            "--sports" | "--source-ports" | "--dports" | "--destination-ports" | "--ports" => {
                self.module_options += 1;
                if self.module_options > 1 {
                    return self.err(col, format!("one -m multiport takes one of --sports, --dports, --ports, as in iptables (write another -m multiport for {opt})"));
                }
                let mut set = IntervalSet::empty();
                for part in v.split(',') {
                    match parse_port_range(part, ':') {
                        Ok((lo, hi)) => set = set.union(&IntervalSet::range(lo, hi)),
                        Err(m) => return self.err(vcol, m),
                    }
                }
                if opt == "--ports" {
                    // "source OR destination" is a union of two boxes; only
                    // its negation ("neither") is one box.
                    if negated.is_none() {
                        self.either_port = Some((set, col));
                        return;
                    }
                    self.constrain(Field::SrcPort, set.clone(), negated, 0xffff);
                    self.constrain(Field::DstPort, set, negated, 0xffff);
                    return;
                }
                let field = if opt.starts_with("--s") {
                    Field::SrcPort
                } else {
                    Field::DstPort
                };
                self.constrain(field, set, negated, 0xffff);
            }
            "--src-range" | "--dst-range" => {
                let field = if opt == "--src-range" {
                    Field::SrcAddr
                } else {
                    Field::DstAddr
                };
                match parse_ip_range(v, Some(self.family)) {
                    Ok((_, set)) => self.constrain(field, set, negated, addr_max),
                    Err(m) => self.err(vcol, m),
                }
            }
            "--icmp-type" | "--icmpv6-type" => match parse_icmp_type(v, opt == "--icmpv6-type") {
                Ok(set) => self.constrain(Field::IcmpTypeCode, set, negated, 0xffff),
                Err(m) => self.err(vcol, m),
            },
            "--tcp-flags" => {
                let mask = parse_tcp_flags(v);
                let comp = parse_tcp_flags(&vals[1].text);
                match (mask, comp) {
                    (Ok(mask), Ok(comp)) => {
                        self.constrain(Field::TcpFlags, tcp_flags_set(mask, comp), negated, 0xff)
                    }
                    (Err(m), _) => self.err(vcol, m),
                    (_, Err(m)) => self.err(vals[1].col, m),
                }
            }
            "--syn" => {
                use tcp_flags::*;
                self.constrain(
                    Field::TcpFlags,
                    tcp_flags_set(FIN | SYN | RST | ACK, SYN),
                    negated,
                    0xff,
                );
            }
            "--ctstate" | "--state" => {
                let mut set = IntervalSet::empty();
                // xt_conntrack's virtual states: the entry's IPS_SRC_NAT /
                // IPS_DST_NAT bits (not in -m state)
                let mut nat = 0;
                for part in v.split(',') {
                    match CtState::from_name(part) {
                        Some(s) => set = set.union(&IntervalSet::point(s as u128)),
                        None if opt == "--ctstate" && part.eq_ignore_ascii_case("SNAT") => {
                            nat |= ct_status::SNAT
                        }
                        None if opt == "--ctstate" && part.eq_ignore_ascii_case("DNAT") => {
                            nat |= ct_status::DNAT
                        }
                        None => {
                            return self.err(
                                vcol,
                                format!("expected conntrack states (NEW, ESTABLISHED, RELATED, INVALID, UNTRACKED{}), found '{part}'", if opt == "--ctstate" { ", SNAT, DNAT" } else { "" }),
                            )
                        }
                    }
                }
                if opt == "--ctstate" {
                    // A packet without an entry is INVALID or UNTRACKED
                    // and carries no NAT bit.
                    let admitted = if negated.is_some() {
                        set.complement(0xff)
                    } else {
                        set.clone()
                    };
                    let no_entry = if nat != 0 {
                        negated.is_some()
                    } else {
                        admitted.contains(CtState::Invalid as u128)
                            || admitted.contains(CtState::Untracked as u128)
                    };
                    self.ctstate_no_entry = Some(no_entry);
                }
                if nat != 0 {
                    if !set.is_empty() {
                        return self.err(vcol, "--ctstate mixing SNAT/DNAT with states matches either (a state or a NAT bit), which is not one box; write two rules");
                    }
                    // No entry: no NAT bit (status 0), as in xt_conntrack.
                    let bits = crate::ctstatus::any_of(nat);
                    return self.constrain(Field::CtStatus, bits, negated, crate::ctstatus::BITS as u128);
                }
                self.constrain(Field::CtState, set, negated, 0xff);
            }
            "--match-set" => {
                let mut dirs = Vec::new();
                for part in vals[1].text.split(',') {
                    dirs.push(match part {
                        "src" => Dir::Src,
                        "dst" => Dir::Dst,
                        _ => {
                            return self.err(
                                vals[1].col,
                                format!("expected src or dst flags like src,dst after the set name, found '{part}'"),
                            )
                        }
                    });
                }
                let set_ref = SetRef {
                    name: v.to_string(),
                    key: SetKeySpec::Flags(dirs),
                };
                let n = match self.set_refs.iter().position(|s| *s == set_ref) {
                    Some(n) => n,
                    None => {
                        self.set_refs.push(set_ref);
                        self.set_refs.len() - 1
                    }
                };
                let bit = if negated.is_some() { 0 } else { 1 };
                self.matches
                    .constrain(Field::Set(n as u16), IntervalSet::point(bit));
            }
            "--comment" => {
                if let Some(c) = negated {
                    return self.err(c, "'!' cannot negate --comment");
                }
                self.comment = Some(v.to_string());
            }
            "--limit" | "--limit-burst" => {
                if let Some(c) = negated {
                    return self.err(c, format!("'!' cannot negate {opt}"));
                }
                // iptables' defaults: 3/hour, burst 5.
                let mut l = self.limit.take().unwrap_or(Limit {
                    rate: 3,
                    per: TimeUnit::Hour,
                    burst: 5,
                    flavor: LimitFlavor::Xt,
                    over: false,
                    object: None,
                });
                if opt == "--limit" {
                    match parse_rate(v) {
                        // libxt_limit: avg = 10000 × unit / rate must be ≥ 1
                        Some((rate, per))
                            if rate == 0 || rate as u64 > XT_LIMIT_SCALE as u64 * per.seconds() as u64 =>
                        {
                            return self.err(vcol, format!("rate '{v}' is too fast or zero (iptables allows at most 10000/second)"))
                        }
                        Some((rate, per)) => (l.rate, l.per) = (rate, per),
                        None => {
                            return self.err(vcol, format!("expected a rate like 5/min (units: second, minute, hour, day), found '{v}'"))
                        }
                    }
                } else {
                    match v.parse() {
                        Ok(0) => return self.err(vcol, "--limit-burst must be at least 1"),
                        Ok(b) => l.burst = b,
                        Err(_) => return self.err(vcol, format!("expected a burst count, found '{v}'")),
                    }
                }
                self.limit = Some(l);
            }
            "--set" | "--rcheck" | "--update" | "--remove" | "--seconds" | "--hitcount"
            | "--rttl" | "--reap" | "--name" | "--rsource" | "--rdest" | "--mask" => {
                self.recent_option(arg)
            }
            "--ctproto" | "--ctorigdstport" | "--ctorigsrcport" | "--ctorigsrc" | "--ctorigdst"
            | "--ctreplsrc" | "--ctrepldst" => self.ct_tuple_option(arg),
            o if super::ctorig::REFUSED_CT_OPTIONS.contains(&o) => self.err(
                col,
                format!("{o} is not supported (of xt_conntrack's options parapet reads --ctstate, --ctproto, --ctorigsrc, --ctorigdst, --ctreplsrc, --ctrepldst, --ctorigdstport and --ctorigsrcport): the packet model does not carry the entry's reply ports, status or expiry"),
            ),
            "--tcp-option" => self.tcp_option(arg),
            o if HASHLIMIT_OPTIONS.contains(&o) => {
                self.hashlimit_option(arg)
            }
            o if super::time::TIME_OPTIONS.contains(&o) => {
                self.time_option(arg)
            }
            "--quota" => self.quota_option(negated, v, vcol),
            o if STATISTIC_OPTIONS.contains(&o) => self.statistic_option(arg),
            o if super::string::STRING_OPTIONS.contains(&o) => self.string_option(arg),
            "--mark" => self.mark_option(arg),
            "--mac-source" => self.mac_option(arg),
            o if OWNER_OPTIONS.contains(&o) => self.owner_option(arg),
            o if RT_OPTIONS.contains(&o) => self.rt_option(arg),
            _ if header_option_module(opt).is_some() => {
                self.header_option(arg)
            }
            _ if type_option_module(opt).is_some() => self.type_option(arg),
            _ => self.err(
                col,
                format!("unknown option '{opt}' (options: -s -d -p -i -o -f -m -j -g and those of the matches {SUPPORTED_MATCHES})"),
            ),
        }
    }
}

/// `eth0` is one name, `eth+` every name starting with `eth`.
pub(crate) fn iface_set(v: &str) -> Result<IntervalSet, String> {
    if let Some(prefix) = v.strip_suffix('+') {
        if prefix.len() > IfName::MAX_LEN {
            return Err(format!(
                "interface name '{v}' is longer than {} bytes",
                IfName::MAX_LEN
            ));
        }
        let (lo, hi) = IfName::wildcard_range(prefix);
        return Ok(IntervalSet::range(lo, hi));
    }
    IfName::new(v)
        .map(|n| IntervalSet::point(n.0))
        .ok_or_else(|| {
            format!(
                "interface name '{v}' is longer than {} bytes",
                IfName::MAX_LEN
            )
        })
}

/// `5/min`, `10/second`, `3/h`: iptables accepts any prefix of the unit.
pub(crate) fn parse_rate(s: &str) -> Option<(u32, TimeUnit)> {
    let (n, unit) = s.split_once('/').unwrap_or((s, "second"));
    let n: u32 = n.parse().ok()?;
    let unit = unit.to_ascii_lowercase();
    if unit.is_empty() {
        return None;
    }
    let per = [
        ("second", TimeUnit::Second),
        ("minute", TimeUnit::Minute),
        ("hour", TimeUnit::Hour),
        ("day", TimeUnit::Day),
    ]
    .into_iter()
    .find(|(name, _)| name.starts_with(unit.as_str()) || (unit == "sec" && *name == "second"))?
    .1;
    Some((n, per))
}

/// `--tcp-flags` as iptables reads it (libxt_tcp's `tcp_flag_names`): the
/// six classic flags, `ALL` = FIN,SYN,RST,PSH,ACK,URG (0x3F, so ECE and
/// CWR stay unconstrained: `ALL SYN` matches an ECN SYN) and `NONE`;
/// iptables has no name for ECE or CWR.
pub(super) fn parse_tcp_flags(s: &str) -> Result<u8, String> {
    let mut bits = 0u8;
    for part in s.split(',') {
        bits |= match part.to_ascii_uppercase().as_str() {
            "ALL" => IPTABLES_TCP_FLAGS,
            "NONE" => 0,
            "ECE" | "CWR" => {
                return Err(format!(
                    "iptables has no TCP flag '{part}' (its flags: FIN, SYN, RST, PSH, ACK, URG, ALL, NONE)"
                ))
            }
            name => match tcp_flags::NAMES.iter().find(|(n, _)| *n == name) {
                Some((_, bit)) => *bit,
                None => {
                    return Err(format!(
                        "expected TCP flags like SYN,ACK (or ALL, NONE), found '{s}'"
                    ))
                }
            },
        };
    }
    Ok(bits)
}

impl RuleParser<'_> {
    /// `-m quota [!] --quota N` (`xt_quota.c`): the rule matches while the
    /// bytes left are at least the packet's length, taking them; the first
    /// packet that does not fit leaves nothing, so no packet after it
    /// matches. That is nft's `quota N+1 bytes` exactly (nft matches while
    /// the count, this packet included, is below its quota: below N+1 is
    /// at most N; once over, the count only grows), and `!` is `quota
    /// over`; the rule's count is the model's [`Quota`].
    fn quota_option(&mut self, negated: Option<u32>, v: &str, vcol: u32) {
        let bytes = match v.parse::<u64>() {
            Ok(n) if n < u64::MAX => n + 1,
            _ => {
                return self.err(
                    vcol,
                    format!("expected a byte count below 2^64 - 1 after --quota, found '{v}'"),
                )
            }
        };
        self.quota = Some(Quota {
            bytes,
            over: negated.is_some(),
            used: 0,
        });
    }
}
