//! The iptables-save renderer's match modules (`-m tcp`/`-m multiport`,
//! `-m icmp`, `-m set`, `-m time`, `-m recent`, …) and the port, protocol
//! and `!` spellings they share with the rule header.

use super::spelling::*;
use crate::common::*;
use parapet_model::*;
use std::fmt::Write as _;

/// The matches written as modules (`-m tcp`, `-m conntrack`, `-m set`, …),
/// in iptables-save's order.
pub(super) fn write_module_matches(
    out: &mut String,
    rs: &Ruleset,
    r: &Rule,
    proto: Option<u8>,
    family: Family,
    extra: &str,
) -> Result<(), RenderError> {
    let id = r.id;
    let multiport = write_ports_and_flags(out, r, proto)?;
    write_icmp(out, r, proto, family)?;
    out.push_str(&multiport);
    out.push_str(extra);
    super::header::ipt_header(out, r, family)?;
    super::owner::ipt_owner(out, r)?;
    super::rt::ipt_rt(out, r)?;
    if let Some(set) = r.matches.get(Field::CtState) {
        let (neg, states) = ct_states(set, id)?;
        let names: Vec<&str> = states.iter().map(|s| s.iptables_name()).collect();
        let _ = write!(
            out,
            " -m conntrack {}--ctstate {}",
            neg_str(neg),
            names.join(",")
        );
    }
    if let Some(set) = r.matches.get(Field::CtStatus) {
        out.push_str(&crate::ctstatus::iptables(set).map_err(|m| rerr(id, m))?);
    }
    out.push_str(&crate::addrtype::iptables(r, family).map_err(|m| rerr(id, m))?);
    out.push_str(&crate::ctorig::iptables(r, family).map_err(|m| rerr(id, m))?);
    out.push_str(&crate::rev_path::iptables(r).map_err(|m| rerr(id, m))?);
    write_set_matches(out, rs, r)?;
    super::masked::iptables_marks(out, r)?;
    super::masked::iptables_masked(out, r)?;
    super::string::iptables(out, r);
    Ok(())
}

/// The matches the kernel checks after the stateful one
/// (`Rule::after_stateful`), written after it, as modules.
pub(super) fn write_after_stateful(
    out: &mut String,
    rs: &Ruleset,
    r: &Rule,
    proto: Option<u8>,
    family: Family,
) -> Result<(), RenderError> {
    let Some(after) = &r.after_stateful else {
        return Ok(());
    };
    let mut later = after.beyond(&r.matches);
    // A protocol match written after the stateful one skips non-first
    // fragments there: implied by the module, as when parsed.
    if later
        .get(Field::Fragment)
        .is_some_and(|f| f.ranges() == [(0, 0)])
        && later.reads_transport_header()
    {
        later = later.without(Field::Fragment);
    }
    if let Some((f, _)) = later.iter().find(|(f, _)| {
        matches!(
            f,
            Field::SrcAddr
                | Field::DstAddr
                | Field::InIface
                | Field::OutIface
                | Field::Proto
                | Field::Family
                | Field::Fragment
        )
    }) {
        return Err(rerr(
            r.id,
            format!(
                "a match on {} after the stateful one has no iptables spelling parapet writes",
                f.name()
            ),
        ));
    }
    let mut post = Rule::new(r.id, later, r.action.clone());
    post.after_stateful = None;
    write_module_matches(out, rs, &post, proto, family, "")
}

/// `-m time` as iptables-save writes it (libxt_time's order; only what
/// differs from the always-open window).
pub(super) fn write_time(out: &mut String, w: &TimeWindow) {
    let all = TimeWindow::default();
    out.push_str(" -m time");
    if (w.daytime_start, w.daytime_stop) != (all.daytime_start, all.daytime_stop) {
        let _ = write!(
            out,
            " --timestart {} --timestop {}",
            format_daytime(w.daytime_start),
            format_daytime(w.daytime_stop)
        );
    }
    if w.monthdays != ALL_MONTHDAYS {
        let days: Vec<String> = (1..=31)
            .filter(|d| w.monthdays & (1 << d) != 0)
            .map(|d: u32| d.to_string())
            .collect();
        let _ = write!(out, " --monthdays {}", days.join(","));
    }
    if w.weekdays != ALL_WEEKDAYS {
        let days: Vec<&str> = (1..=7)
            .filter(|d| w.weekdays & (1 << d) != 0)
            .map(|d| WEEKDAY_NAMES[d - 1])
            .collect();
        let _ = write!(out, " --weekdays {}", days.join(","));
    }
    if w.date_start != all.date_start {
        let _ = write!(out, " --datestart {}", format_date(w.date_start));
    }
    if w.date_stop != all.date_stop {
        let _ = write!(out, " --datestop {}", format_date(w.date_stop));
    }
    if w.kernel_tz {
        out.push_str(" --kerneltz");
    }
    if w.contiguous {
        out.push_str(" --contiguous");
    }
}

/// `-m recent` in iptables-save's order.
pub(super) fn write_recent(out: &mut String, rc: &Recent, family: Family) {
    let neg = if rc.invert { "! " } else { "" };
    let _ = write!(out, " -m recent {neg}{}", rc.command.option());
    if rc.seconds != 0 {
        let _ = write!(out, " --seconds {}", rc.seconds);
    }
    if rc.reap {
        out.push_str(" --reap");
    }
    if rc.hitcount != 0 {
        let _ = write!(out, " --hitcount {}", rc.hitcount);
    }
    if rc.rttl {
        out.push_str(" --rttl");
    }
    let mask = match family {
        Family::V4 => std::net::Ipv4Addr::from(rc.mask_v4).to_string(),
        Family::V6 => {
            let m = match rc.mask_v6 {
                0 => 0,
                n => u128::MAX << (128 - n.min(128) as u32),
            };
            std::net::Ipv6Addr::from(m).to_string()
        }
    };
    let side = if rc.rdest { "--rdest" } else { "--rsource" };
    let _ = write!(
        out,
        " --name {} --mask {mask} {side}",
        shell_quote(&rc.name)
    );
}

/// Writes the protocol module's options (`-m tcp --dport 22 --tcp-flags
/// …`); returns the `-m multiport` options, which iptables-save prints
/// after the ICMP match.
fn write_ports_and_flags(
    out: &mut String,
    r: &Rule,
    proto: Option<u8>,
) -> Result<String, RenderError> {
    let id = r.id;
    let port_mod = port_protocol(proto);
    let mut proto_opts = String::new();
    let mut multi = String::new();
    for (field, opt, mopt) in [
        (Field::SrcPort, "--sport", "--sports"),
        (Field::DstPort, "--dport", "--dports"),
    ] {
        if let Some(set) = r.matches.get(field) {
            if port_mod.is_none() {
                return Err(rerr(id, format!("{field} needs the rule to be restricted to one of tcp, udp, sctp, udplite (iptables needs -p)")));
            }
            let (neg, items) = ipt_ports(set).ok_or_else(|| {
                rerr(
                    id,
                    format!("{field} has more than 15 ports or ranges (multiport's limit)"),
                )
            })?;
            if let [(lo, hi)] = items.as_slice() {
                let v = if lo == hi {
                    lo.to_string()
                } else {
                    format!("{lo}:{hi}")
                };
                let _ = write!(proto_opts, " {}{opt} {v}", neg_str(neg));
            } else {
                let _ = write!(
                    multi,
                    " -m multiport {}{mopt} {}",
                    neg_str(neg),
                    port_list(&items, ':')
                );
            }
        }
    }
    // `--tcp-option` (iptables-save writes it before `--tcp-flags`)
    let more_options = super::tcp_option::iptables(&mut proto_opts, r, port_mod)?;
    if let Some(set) = r.matches.get(Field::TcpFlags) {
        let s = spell_tcp_flags(set, proto, id)?;
        let (mask, comp) = s.items;
        if mask & !IPTABLES_TCP_FLAGS != 0 {
            return Err(rerr(
                id,
                "iptables --tcp-flags cannot name ECE or CWR (its flags: FIN, SYN, RST, PSH, ACK, URG); list it as nft",
            ));
        }
        let _ = write!(
            proto_opts,
            " {}--tcp-flags {} {}",
            neg_str(s.neg),
            tcp_flags::format_list(mask),
            tcp_flags::format_list(comp)
        );
    }
    if let Some(m) = port_mod.filter(|_| !proto_opts.is_empty()) {
        let _ = write!(out, " -m {m}{proto_opts}{more_options}");
    } else if !proto_opts.is_empty() {
        unreachable!("port options are only written with a port protocol");
    }
    Ok(multi)
}

/// Writes `-m icmp --icmp-type T[/C]` (`icmp6 --icmpv6-type` for IPv6).
fn write_icmp(
    out: &mut String,
    r: &Rule,
    proto: Option<u8>,
    family: Family,
) -> Result<(), RenderError> {
    if let Some(set) = r.matches.get(Field::IcmpTypeCode) {
        let (want, module, opt) = match family {
            Family::V4 => (1, "icmp", "--icmp-type"),
            Family::V6 => (58, "icmp6", "--icmpv6-type"),
        };
        if proto != Some(want) {
            return Err(rerr(
                r.id,
                format!(
                    "an ICMP type needs the rule to be restricted to {}",
                    proto_word(want, family)
                ),
            ));
        }
        let s = spell(set, 0xffff, |s| icmp_atom(s).map(|a| (1, a))).ok_or_else(|| {
            rerr(
                r.id,
                "the ICMP types are not one type or one type/code (nor its negation)",
            )
        })?;
        let _ = write!(out, " -m {module} {}{opt} {}", neg_str(s.neg), s.items);
    }
    Ok(())
}

/// Writes `-m set --match-set NAME src,dst` for each set reference.
fn write_set_matches(out: &mut String, rs: &Ruleset, r: &Rule) -> Result<(), RenderError> {
    for (field, set) in r.matches.iter() {
        if let Field::Set(n) = field {
            let sr = set_ref(rs, *n, r.id)?;
            let SetKeySpec::Flags(dirs) = &sr.key else {
                return Err(rerr(r.id, format!("set '{}' is keyed by packet fields (nft style), which iptables cannot write", sr.name)));
            };
            let flags: Vec<&str> = dirs
                .iter()
                .map(|d| if *d == Dir::Src { "src" } else { "dst" })
                .collect();
            let neg = set.ranges() == [(0, 0)];
            let _ = write!(
                out,
                " -m set {}--match-set {} {}",
                neg_str(neg),
                shell_quote(&sr.name),
                flags.join(",")
            );
        }
    }
    Ok(())
}

/// One ICMP type (all codes) or one type/code, in iptables' `T` / `T/C`.
fn icmp_atom(set: &IntervalSet) -> Option<String> {
    let [(lo, hi)] = set.ranges() else {
        return None;
    };
    let (t, c) = (lo >> 8, lo & 0xff);
    if lo == hi {
        Some(format!("{t}/{c}"))
    } else if c == 0 && *hi == lo | 0xff {
        Some(t.to_string())
    } else {
        None
    }
}

/// A port set as `P`, `A:B` or a multiport list of at most 15 items.
pub(super) fn ipt_ports(set: &IntervalSet) -> Option<(bool, Vec<(u128, u128)>)> {
    let s = spell(set, 0xffff, |s| {
        let items: usize = s
            .ranges()
            .iter()
            .map(|(lo, hi)| if lo == hi { 1 } else { 2 })
            .sum();
        (!s.is_empty() && items <= 15).then(|| (items, s.ranges().to_vec()))
    })?;
    Some((s.neg, s.items))
}

pub(super) fn port_list(items: &[(u128, u128)], sep: char) -> String {
    items
        .iter()
        .map(|(lo, hi)| {
            if lo == hi {
                lo.to_string()
            } else {
                format!("{lo}{sep}{hi}")
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

pub(super) fn neg_str(neg: bool) -> &'static str {
    if neg {
        "! "
    } else {
        ""
    }
}

pub(super) fn proto_word(p: u8, family: Family) -> String {
    match p {
        58 if family == Family::V6 => "ipv6-icmp".into(),
        136 => "udplite".into(),
        p => protocol_name(p).map_or(p.to_string(), str::to_string),
    }
}
