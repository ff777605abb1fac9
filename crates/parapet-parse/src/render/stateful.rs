//! nft's stateful statements written back: `limit rate` (`limit rate over
//! 3/minute burst 10 packets`), `quota`, `-m statistic` (both syntaxes), and dynamic sets: the declarations of the sets a table's
//! rules fill (`set s { type ipv4_addr; size N; flags dynamic,timeout;
//! timeout T; }`) and each rule's statement or lookup (`add @s { ip saddr
//! limit rate over 3/minute }`, `meter m size N { … }`, `ip saddr @s`).

use parapet_model::*;
use std::fmt::Write;

/// The declarations of the dynamic sets `t`'s rules use (meters declare
/// their own), in first-use order.
pub(super) fn declarations(t: &Table) -> String {
    let mut out = String::new();
    let mut seen: Vec<&str> = Vec::new();
    for d in t
        .chains
        .iter()
        .flat_map(|c| &c.rules)
        .flat_map(|r| r.dynset_lookup.iter().chain(&r.dynset))
    {
        let s = &d.set;
        if s.meter || seen.contains(&s.name.as_str()) {
            continue;
        }
        seen.push(&s.name);
        let ty = match (s.family, s.service) {
            (Family::V4, false) => "ipv4_addr",
            (Family::V6, false) => "ipv6_addr",
            (Family::V4, true) => "ipv4_addr . inet_service",
            (Family::V6, true) => "ipv6_addr . inet_service",
        };
        let flags = if s.has_timeout {
            "dynamic,timeout"
        } else {
            "dynamic"
        };
        let _ = write!(
            out,
            "\tset {} {{\n\t\ttype {ty}\n\t\tsize {}\n\t\tflags {flags}\n",
            s.name, s.size
        );
        if s.timeout_ms != 0 {
            let _ = writeln!(
                out,
                "\t\ttimeout {}",
                parapet_sets::format_duration(s.timeout_ms)
            );
        }
        if !s.elements.is_empty() {
            let elements: Vec<String> = s.elements.iter().map(|e| initial_element(s, e)).collect();
            let _ = writeln!(out, "\t\telements = {{ {} }}", elements.join(", "));
        }
        out.push_str("\t}\n\n");
    }
    out
}

/// A declared element as nft writes it: `10.0.0.1 . 22 timeout 30s
/// expires 12s`.
fn initial_element(s: &DynsetDecl, e: &DynsetInitial) -> String {
    let mut out = crate::common::fmt_ip(s.family, e.addr);
    if s.service {
        let _ = write!(out, " . {}", e.port);
    }
    if e.timeout_ms != 0 {
        let _ = write!(
            out,
            " timeout {}",
            parapet_sets::format_duration(e.timeout_ms)
        );
    }
    if let Some(ms) = e.expires_ms {
        let _ = write!(out, " expires {}", parapet_sets::format_duration(ms));
    }
    out
}

/// `limit rate [over] R/UNIT [burst B packets]` (burst 5 is nft's default).
pub(super) fn nft_limit_rate(l: &Limit) -> String {
    let over = if l.over { "over " } else { "" };
    let mut s = format!("limit rate {over}{}/{}", l.rate, l.per.name());
    if l.burst != 5 {
        let _ = write!(s, " burst {} packets", l.burst);
    }
    s
}

/// An nft `quota` statement, in the largest unit that divides it exactly,
/// as nft lists it.
pub(super) fn quota(q: &Quota) -> String {
    fn amount(n: u64) -> String {
        for (unit, size) in [
            ("gbytes", 1u64 << 30),
            ("mbytes", 1 << 20),
            ("kbytes", 1 << 10),
        ] {
            if n != 0 && n.is_multiple_of(size) {
                return format!("{} {unit}", n / size);
            }
        }
        format!("{n} bytes")
    }
    let over = if q.over { "over " } else { "" };
    let mut s = format!("quota {over}{}", amount(q.bytes));
    if q.used != 0 {
        s += &format!(" used {}", amount(q.used));
    }
    s
}

/// A rule's `-m statistic` in nft syntax: `--mode nth` is `numgen inc mod
/// N [!= ]P` (nft_numgen's counter hands packet i the number i mod N, as
/// xt_statistic picks packet P of every N); `--mode random` has no nft
/// spelling parapet reads back yet (`meta random`).
pub(super) fn statistic_nft(rule_id: u32, s: &Statistic) -> Result<String, super::RenderError> {
    match s.mode {
        StatisticMode::Nth { every, packet } => {
            let not = if s.invert { "!= " } else { "" };
            Ok(format!("numgen inc mod {every} {not}{packet}"))
        }
        StatisticMode::Random { .. } => Err(super::RenderError {
            rule_id,
            message: "-m statistic --mode random has no nft spelling parapet writes yet (nft's is 'meta random', which parapet does not read)".into(),
        }),
    }
}

/// A rule's `-m statistic` in iptables-save's words (libxt_statistic's
/// `statistic_save`: `--packet` always, the probability to 11 places).
pub(super) fn statistic_iptables(s: &Statistic) -> String {
    let not = if s.invert { " !" } else { "" };
    match s.mode {
        StatisticMode::Nth { every, packet } => {
            format!(" -m statistic --mode nth{not} --every {every} --packet {packet}")
        }
        StatisticMode::Random { threshold } => format!(
            " -m statistic --mode random{not} --probability {}",
            Statistic::probability_text(threshold)
        ),
    }
}

/// A rule's dynamic-set statement or lookup; `protocol` is the rule's one
/// protocol, if it has one (a key's packet port is that protocol's).
pub(super) fn statement(d: &Dynset, protocol: Option<u8>) -> String {
    let ip = match d.set.family {
        Family::V4 => "ip",
        Family::V6 => "ip6",
    };
    let mut key = format!("{ip} {}", if d.daddr { "daddr" } else { "saddr" });
    if let Some(p) = d.port {
        // The protocol a packet port implies is one of the rule's
        // matches (`tcp dport`): the listing names it again.
        let _ = write!(
            key,
            " . {}",
            match p {
                DynsetPort::Const(n) => n.to_string(),
                DynsetPort::Src => format!(
                    "{} sport",
                    super::spelling::port_protocol(protocol).unwrap_or("th")
                ),
                DynsetPort::Dst => format!(
                    "{} dport",
                    super::spelling::port_protocol(protocol).unwrap_or("th")
                ),
            }
        );
    }
    let head = match d.op {
        DynsetOp::Lookup => {
            let op = if d.invert { "!= " } else { "" };
            return format!("{key} {op}@{}", d.set.name);
        }
        _ if d.set.meter => {
            let size = if d.set.size != DYNSET_DEFAULT_SIZE {
                format!(" size {}", d.set.size)
            } else {
                String::new()
            };
            format!("meter {}{size}", d.set.name)
        }
        DynsetOp::Add => format!("add @{}", d.set.name),
        DynsetOp::Update => format!("update @{}", d.set.name),
        DynsetOp::Delete => format!("delete @{}", d.set.name),
    };
    let mut body = key;
    if d.timeout_ms != 0 {
        let _ = write!(
            body,
            " timeout {}",
            parapet_sets::format_duration(d.timeout_ms)
        );
    }
    if let Some(l) = &d.limit {
        let limit = Limit {
            rate: l.rate,
            per: l.per,
            burst: l.burst,
            flavor: LimitFlavor::Nft,
            over: l.over,
            object: None,
        };
        let _ = write!(body, " {}", nft_limit_rate(&limit));
    }
    format!("{head} {{ {body} }}")
}
