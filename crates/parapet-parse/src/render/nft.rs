//! The `nft list ruleset` renderer.

use super::spelling::*;
use crate::common::*;
use crate::iptables::LOG_LEVELS;
use parapet_model::*;
use std::fmt::Write as _;

/// Renders the ruleset as `nft list ruleset` prints it.
///
/// Set references must be keyed by packet fields (nft's `ip saddr . tcp
/// dport @NAME`); iptables `--match-set` references are an error.
///
/// ```
/// use parapet_parse::{parse, render, without_origins, Format};
/// let text = "*filter\n:INPUT DROP [0:0]\n-A INPUT -p tcp -m multiport --dports 22,80,443 -j ACCEPT\nCOMMIT\n";
/// let rs = parse(text, "x", Format::IptablesSave).unwrap().ruleset;
/// let out = render::nft(&rs).unwrap();
/// assert!(out.contains("tcp dport { 22, 80, 443 } accept"), "{out}");
/// let again = parse(&out, "x", Format::Nft).unwrap().ruleset;
/// assert_eq!(without_origins(&again), without_origins(&rs));
/// ```
pub fn nft(rs: &Ruleset) -> Result<String, RenderError> {
    nft_with_sets(rs, &[])
}

/// [`nft`] with the file's named `set` blocks written back into their
/// tables (before the chains that use them), so the listing classifies.
pub fn nft_with_sets(rs: &Ruleset, sets: &[crate::SetBlock]) -> Result<String, RenderError> {
    let mut out = String::new();
    // nft cannot hold iptables tables: name them, so nothing goes unsaid
    // (`list --format iptables-save` writes them back).
    for l in rs.left_to_kernel.iter().filter(|l| !l.nft) {
        let _ = writeln!(
            out,
            "# left to the kernel's netfilter, not listed here: iptables table {}",
            l.describe()
        );
    }
    // Tables of other families (arp, bridge, netdev) go back whole, before
    // the first table whose rules come after theirs: ids are positions.
    let mut others = rs
        .left_to_kernel
        .iter()
        .filter(|l| l.is_other_family_table())
        .peekable();
    for t in &rs.tables {
        if let Some(first) = t.chains.iter().flat_map(|c| &c.rules).map(|r| r.id).min() {
            while let Some(l) = others.next_if(|l| l.first_id == 0 || l.first_id < first) {
                let _ = writeln!(out, "{}", l.text.trim_end());
            }
        }
        let _ = writeln!(out, "table {} {} {{", t.family.nft_name(), t.name);
        for b in sets.iter().filter(|b| b.table == t.name) {
            let _ = writeln!(out, "\t{}\n", b.text.trim_end());
        }
        // Its objects left to the kernel (flowtables, ct helpers, …), as
        // the file had them, before the chains that name them.
        for l in rs.left_to_kernel.iter().filter(|l| {
            l.nft
                && !l.text.is_empty()
                && !l.is_other_family_table()
                && l.object.is_some()
                && l.family == t.family
                && l.table == t.name
        }) {
            let _ = writeln!(out, "\t{}\n", l.text.trim_end());
        }
        out.push_str(&super::stateful::declarations(t));
        // The limit objects the table's rules name (`limit name "N"`).
        let mut objects: Vec<(&str, &Limit)> = Vec::new();
        for r in t.chains.iter().flat_map(|c| &c.rules) {
            if let Some(
                l @ Limit {
                    object: Some(n), ..
                },
            ) = &r.limit
            {
                if !objects.iter().any(|(m, _)| *m == n.as_str()) {
                    objects.push((n.as_str(), l));
                }
            }
        }
        for (n, l) in &objects {
            // A plain name as nft prints it; anything else quoted.
            let plain = n
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
            let name = if plain { n.to_string() } else { nft_quote(n) };
            let rate = super::stateful::nft_limit_rate(l);
            let rate = rate.trim_start_matches("limit ");
            let _ = writeln!(out, "\tlimit {name} {{\n\t\t{rate}\n\t}}\n");
        }
        // nft chains left to the kernel go back into their table, before
        // the first chain whose rules come after theirs: ids are positions.
        let mut kernel = kernel_chains_of(rs, t);
        for (ci, c) in t.chains.iter().enumerate() {
            if ci > 0 {
                out.push('\n');
            }
            if let Some(first) = c.rules.iter().map(|r| r.id).min() {
                while let Some(l) = kernel.next_if(|l| l.first_id != 0 && l.first_id < first) {
                    let _ = writeln!(out, "\t{}", l.text.trim_end());
                }
            }
            let _ = writeln!(out, "\tchain {} {{", c.name);
            if let Some(b) = &c.base {
                let _ = writeln!(
                    out,
                    "\t\ttype filter hook {} priority {}; policy {};",
                    b.hook.nft_name(),
                    b.priority,
                    b.policy.name().to_ascii_lowercase()
                );
                if !matches!(b.policy, Verdict::Accept | Verdict::Drop) {
                    return Err(rerr(
                        0,
                        format!("chain '{}': nft policies are accept or drop", c.name),
                    ));
                }
            }
            for r in &c.rules {
                let _ = writeln!(out, "\t\t{}", nft_rule(rs, t.family, r)?);
            }
            out.push_str("\t}\n");
        }
        for l in kernel {
            let _ = writeln!(out, "\t{}", l.text.trim_end());
        }
        out.push_str("}\n");
    }
    for l in others {
        let _ = writeln!(out, "{}", l.text.trim_end());
    }
    Ok(out)
}

/// The nft chains of table `t` left to the kernel, in id order (chains
/// without rules last).
fn kernel_chains_of<'a>(
    rs: &'a Ruleset,
    t: &Table,
) -> std::iter::Peekable<std::vec::IntoIter<&'a LeftToKernel>> {
    let mut v: Vec<&LeftToKernel> = rs
        .left_to_kernel
        .iter()
        .filter(|l| l.nft && l.object.is_none() && l.family == t.family && l.table == t.name)
        .collect();
    v.sort_by_key(|l| {
        if l.first_id == 0 {
            u32::MAX
        } else {
            l.first_id
        }
    });
    v.into_iter().peekable()
}

/// `{ a, b }` when several, `a` when one.
fn nft_set(items: &[String]) -> String {
    if items.len() == 1 {
        items[0].clone()
    } else {
        format!("{{ {} }}", items.join(", "))
    }
}

fn nft_op(neg: bool) -> &'static str {
    if neg {
        "!= "
    } else {
        ""
    }
}

fn nft_addr_items(set: &IntervalSet, family: Family) -> Vec<String> {
    let bits = family.addr_bits();
    set.ranges()
        .iter()
        .map(|&(lo, hi)| match as_prefix(lo, hi, bits) {
            Some(len) if len == bits => fmt_ip(family, lo),
            Some(len) => format!("{}/{len}", fmt_ip(family, lo)),
            None => format!("{}-{}", fmt_ip(family, lo), fmt_ip(family, hi)),
        })
        .collect()
}

/// nft's reject spelling of an iptables `--reject-with` type.
fn nft_reject(with: &str) -> Option<String> {
    if with == "tcp-reset" {
        return Some("with tcp reset".into());
    }
    if let Some(x) = with.strip_prefix("icmp6-") {
        let x = match x {
            "adm-prohibited" => "admin-prohibited",
            other => other,
        };
        return Some(format!("with icmpv6 type {x}"));
    }
    if let Some(x) = with.strip_prefix("icmpx-") {
        return Some(format!("with icmpx type {x}"));
    }
    if let Some(x) = with.strip_prefix("icmp-") {
        let x = match x {
            "proto-unreachable" => "prot-unreachable",
            other => other,
        };
        return Some(format!("with icmp type {x}"));
    }
    None
}

/// `log prefix "…" level …`.
fn nft_log(spec: &LogSpec) -> String {
    let mut s = "log".to_string();
    if let Some(p) = &spec.prefix {
        let _ = write!(s, " prefix {}", nft_quote(p));
    }
    if let Some(l) = spec.level {
        let name = match l {
            4 => "warn",
            l => LOG_LEVELS[l as usize],
        };
        let _ = write!(s, " level {name}");
    }
    // `flags tcp sequence,options flags ip options`: one `flags` per group.
    let flags: Vec<&str> = LOG_OPTIONS
        .iter()
        .filter(|(o, _)| spec.options.iter().any(|x| x == o))
        .map(|(_, n)| *n)
        .collect();
    let tcp: Vec<&str> = flags
        .iter()
        .filter_map(|f| f.strip_prefix("tcp "))
        .collect();
    if !tcp.is_empty() {
        let _ = write!(s, " flags tcp {}", tcp.join(","));
    }
    for f in flags.iter().filter(|f| !f.starts_with("tcp ")) {
        let _ = write!(s, " flags {f}");
    }
    s
}

/// One rule's statement list, in the order `nft list ruleset` prints it.
fn nft_rule(rs: &Ruleset, tfam: TableFamily, r: &Rule) -> Result<String, RenderError> {
    let id = r.id;
    if r.after_stateful.is_some() {
        return Err(rerr(
            id,
            "matches after the stateful one (-m recent … -m udp --dport N): this order has no nft spelling parapet writes yet",
        ));
    }
    let mut parts: Vec<String> = Vec::new();
    // `-f` with a port match is empty (the port match never matches a
    // non-first fragment) and still written: iptables loads it.
    let fragment_only = r
        .matches
        .iter()
        .all(|(f, v)| !v.is_empty() || *f == Field::Fragment)
        && super::iptables::reads_transport_header(rs, r);
    if r.matches.is_unsatisfiable() && !fragment_only {
        return Err(rerr(id, "the rule matches nothing (an empty constraint)"));
    }
    let family = rule_family(r);
    let table_fam = match tfam {
        TableFamily::Ip => Some(Family::V4),
        TableFamily::Ip6 => Some(Family::V6),
        TableFamily::Inet => None,
    };
    if table_fam.is_some() && family != table_fam {
        return Err(rerr(
            id,
            format!(
                "the rule is not restricted to the {} table's family",
                tfam.nft_name()
            ),
        ));
    }
    if r.matches.get(Field::Family).is_some() && family.is_none() {
        return Err(rerr(id, "the family constraint is neither IPv4 nor IPv6"));
    }
    let has_addr =
        r.matches.get(Field::SrcAddr).is_some() || r.matches.get(Field::DstAddr).is_some();
    if let (TableFamily::Inet, Some(f), false) = (tfam, family, has_addr) {
        parts.push(format!(
            "meta nfproto {}",
            if f == Family::V4 { "ipv4" } else { "ipv6" }
        ));
    }
    push_addresses(&mut parts, r, family)?;
    if let Some(set) = r
        .matches
        .get(Field::Fragment)
        .filter(|s| !(s.ranges() == [(0, 0)] && super::iptables::reads_transport_header(rs, r)))
    {
        // An IPv6 rule that only excludes non-first fragments because a
        // full-range port match said so (`--dport 0:65535`) is written
        // below as that full-range selector: nft's transport payload never
        // matches a non-first fragment either.
        let first_only = set.ranges() == [(0, 0)] && port_protocol(single_proto(r)).is_some();
        if family != Some(Family::V4) && !first_only {
            return Err(rerr(
                id,
                "fragment matching is written only for IPv4 rules in nft (ip frag-off)",
            ));
        }
        let op = if set.ranges() == [(1, 1)] || set.is_empty() {
            "!="
        } else {
            "=="
        };
        if family == Some(Family::V4) {
            parts.push(format!("ip frag-off & 0x1fff {op} 0"));
        }
    }
    push_interfaces(&mut parts, r)?;
    let proto = single_proto(r);
    let port_key = port_protocol(proto);
    let icmp_key = transport_icmp(r, family);
    push_protocol(&mut parts, rs, r, family, port_key, icmp_key)?;
    push_ports(&mut parts, r, port_key)?;
    // the IPv6 first-fragment-only case of the fragment block above
    let first_only_v6 = family == Some(Family::V6)
        && r.matches
            .get(Field::Fragment)
            .is_some_and(|s| s.ranges() == [(0, 0)])
        && !super::iptables::reads_transport_header(rs, r);
    if let (true, Some(k)) = (first_only_v6, port_key) {
        parts.push(format!("{k} dport 0-65535"));
    }
    if let Some(set) = r.matches.get(Field::TcpFlags) {
        let s = spell_tcp_flags(set, proto, id)?;
        let (mask, comp) = s.items;
        let op = if s.neg { "!=" } else { "==" };
        parts.push(format!(
            "tcp flags & ({}) {op} {}",
            nft_flags(mask, "|"),
            nft_flags(comp, "|")
        ));
    }
    super::tcp_option::nft_refusal(r)?;
    super::string::nft_refusal(r)?;
    push_icmp(&mut parts, r, icmp_key)?;
    super::header::nft_header(&mut parts, r, family)?;
    super::owner::nft_owner(&mut parts, r)?;
    super::rt::nft_rt(&mut parts, r)?;
    if let Some(set) = r.matches.get(Field::CtState) {
        let (neg, states) = ct_states(set, id)?;
        let names: Vec<String> = states
            .iter()
            .map(|s| s.iptables_name().to_ascii_lowercase())
            .collect();
        // nft prints a ct state list comma-separated (a bitmask), not as a set.
        parts.push(format!("ct state {}{}", nft_op(neg), names.join(",")));
    }
    if let Some(set) = r.matches.get(Field::CtStatus) {
        let tracked_only = r
            .matches
            .get(Field::CtState)
            .is_some_and(|s| s.is_subset(&crate::ctstatus::tracked()));
        parts.push(crate::ctstatus::nft(set, tracked_only).map_err(|m| rerr(id, m))?);
    }
    for field in [Field::SrcType, Field::DstType, Field::PktType] {
        if let Some(set) = r.matches.get(field) {
            parts.push(crate::addrtype::nft(field, set).map_err(|m| rerr(id, m))?);
        }
    }
    if let Some(set) = r.matches.get(Field::RevPath) {
        parts.push(crate::rev_path::nft(set).map_err(|m| rerr(id, m))?);
    }
    parts.extend(crate::ctorig::nft(r).map_err(|m| rerr(id, m))?);
    push_set_lookups(&mut parts, rs, r, family, port_key)?;
    super::masked::nft_marks(&mut parts, r);
    super::masked::nft_masked(&mut parts, r, family, port_key)?;
    if let Some(w) = &r.time {
        parts.extend(nft_time(w).map_err(|m| rerr(id, m))?);
    }
    if r.recent.is_some() {
        return Err(rerr(
            id,
            "-m recent has no nft spelling parapet writes yet (nft's counterpart is a dynamic set with update @set)",
        ));
    }
    if r.hashlimit.is_some() {
        return Err(rerr(
            id,
            "-m hashlimit has no nft spelling parapet writes yet (nft's counterpart, a meter with a limit, rounds differently: nft_limit's, not xt_hashlimit's)",
        ));
    }
    // in the rule's order: nft runs a rule's expressions as written
    for c in r.conditions() {
        match c {
            Condition::Limit(l) => parts.push(match &l.object {
                Some(name) => format!("limit name {}", nft_quote(name)),
                None => super::stateful::nft_limit_rate(l),
            }),
            Condition::Dynset(d) => parts.push(super::stateful::statement(d, single_proto(r))),
            Condition::Quota(q) => parts.push(super::stateful::quota(q)),
            Condition::Statistic(st) => parts.push(super::stateful::statistic_nft(id, st)?),
            Condition::Recent(_) | Condition::Hashlimit(_) => {} // refused above
        }
    }
    if r.counters != Counters::default() || r.action == Action::Count {
        parts.push(format!(
            "counter packets {} bytes {}",
            r.counters.packets, r.counters.bytes
        ));
    }
    if let Some(spec) = &r.log {
        parts.push(nft_log(spec));
    }
    if let Some(change) = r.set_mark {
        parts.push(crate::mark_stmt::nft_mark_set(change));
    }
    for k in &r.kernel {
        parts.push(nft_kernel_statement(r.id, k)?);
    }
    push_verdict(&mut parts, r)?;
    if let Some(c) = &r.comment {
        parts.push(format!("comment {}", nft_quote(c)));
    }
    Ok(parts.join(" "))
}

/// A statement left to the kernel in nft syntax: nft's own as written, an
/// iptables target (`-j TCPMSS …`) in nft's spelling where it has one.
fn nft_kernel_statement(id: u32, k: &str) -> Result<String, RenderError> {
    let Some(target) = k.strip_prefix("-j ") else {
        return Ok(k.to_string());
    };
    match target.split(' ').collect::<Vec<_>>().as_slice() {
        ["TCPMSS", "--clamp-mss-to-pmtu"] => Ok("tcp option maxseg size set rt mtu".into()),
        ["TCPMSS", "--set-mss", n] => Ok(format!("tcp option maxseg size set {n}")),
        _ => Err(rerr(
            id,
            format!("the rule's target '{k}' (left to the kernel) has no nft spelling here"),
        )),
    }
}

/// `ip` or `ip6`: the address selector's protocol.
fn ip_key(f: Family) -> &'static str {
    if f == Family::V4 {
        "ip"
    } else {
        "ip6"
    }
}

/// `ip saddr …`, `ip6 daddr …`.
fn push_addresses(
    parts: &mut Vec<String>,
    r: &Rule,
    family: Option<Family>,
) -> Result<(), RenderError> {
    for (field, key) in [(Field::SrcAddr, "saddr"), (Field::DstAddr, "daddr")] {
        if let Some(set) = r.matches.get(field) {
            let f = family.ok_or_else(|| {
                rerr(
                    r.id,
                    "an address match needs the rule to be restricted to one family",
                )
            })?;
            let max = width_mask(f.addr_bits());
            let s = spell(set, max, |s| {
                (!s.is_empty()).then(|| (s.ranges().len(), nft_addr_items(s, f)))
            })
            .expect("addresses are always spellable");
            parts.push(format!(
                "{} {key} {}{}",
                ip_key(f),
                nft_op(s.neg),
                nft_set(&s.items)
            ));
        }
    }
    Ok(())
}

/// `iifname …`, `oifname …`.
fn push_interfaces(parts: &mut Vec<String>, r: &Rule) -> Result<(), RenderError> {
    for (field, key) in [(Field::InIface, "iifname"), (Field::OutIface, "oifname")] {
        if let Some(set) = r.matches.get(field) {
            let s = spell(set, u128::MAX, |s| {
                let mut items = Vec::new();
                for &(lo, hi) in s.ranges() {
                    let (name, wild) = iface_atom(&IntervalSet::range(lo, hi))?;
                    items.push(format!("\"{}{}\"", name, if wild { "*" } else { "" }));
                }
                (!items.is_empty()).then_some((items.len(), items))
            })
            .ok_or_else(|| {
                rerr(
                    r.id,
                    format!("{field} is not a list of interface names and 'prefix*' wildcards"),
                )
            })?;
            parts.push(format!("{key} {}{}", nft_op(s.neg), nft_set(&s.items)));
        }
    }
    Ok(())
}

/// The ICMP selector word of a rule on ICMP (IPv4) or ICMPv6 (IPv6).
fn transport_icmp(r: &Rule, family: Option<Family>) -> Option<&'static str> {
    match (single_proto(r), family) {
        (Some(1), Some(Family::V4)) => Some("icmp"),
        (Some(58), Some(Family::V6)) => Some("icmpv6"),
        _ => None,
    }
}

/// `meta l4proto …`, unless a port, flags or ICMP match implies the
/// protocol.
fn push_protocol(
    parts: &mut Vec<String>,
    rs: &Ruleset,
    r: &Rule,
    family: Option<Family>,
    port_key: Option<&str>,
    icmp_key: Option<&str>,
) -> Result<(), RenderError> {
    let has_ports =
        r.matches.get(Field::SrcPort).is_some() || r.matches.get(Field::DstPort).is_some();
    let has_flags = r.matches.get(Field::TcpFlags).is_some();
    let has_icmp = r.matches.get(Field::IcmpTypeCode).is_some();
    let has_set_port = r.matches.iter().any(|(f, _)| match f {
        Field::Set(n) => matches!(rs.set_refs.get(*n as usize).map(|s| &s.key), Some(SetKeySpec::Fields(fs)) if fs.iter().any(|f| matches!(f, Field::SrcPort | Field::DstPort))),
        _ => false,
    });
    // The protocol goes unsaid when a port, flags or ICMP match implies it.
    let implied = (port_key.is_some() && (has_ports || has_flags || has_set_port))
        || (icmp_key.is_some() && has_icmp);
    if let Some(set) = r.matches.get(Field::Proto) {
        if !implied {
            let fam = family.unwrap_or(Family::V4);
            let s = spell(set, 0xff, |s| {
                let items: Vec<String> = s
                    .ranges()
                    .iter()
                    .flat_map(|&(lo, hi)| lo..=hi)
                    .map(|p| nft_proto_word(p as u8, fam))
                    .collect();
                (!items.is_empty() && items.len() <= 32).then_some((items.len(), items))
            })
            .ok_or_else(|| rerr(r.id, "the protocol set is too large to list"))?;
            parts.push(format!(
                "meta l4proto {}{}",
                nft_op(s.neg),
                nft_set(&s.items)
            ));
        }
    }
    Ok(())
}

/// `tcp sport …`, `udp dport …`.
fn push_ports(
    parts: &mut Vec<String>,
    r: &Rule,
    port_key: Option<&str>,
) -> Result<(), RenderError> {
    for (field, key) in [(Field::SrcPort, "sport"), (Field::DstPort, "dport")] {
        if let Some(set) = r.matches.get(field) {
            let pk = port_selector(r, port_key).ok_or_else(|| {
                rerr(
                    r.id,
                    format!(
                        "{field} needs the rule to be restricted to one of tcp, udp, sctp, udplite"
                    ),
                )
            })?;
            let s = spell(set, 0xffff, |s| {
                (!s.is_empty()).then(|| (s.ranges().len(), s.ranges().to_vec()))
            })
            .expect("non-empty");
            let items: Vec<String> = s
                .items
                .iter()
                .map(|(lo, hi)| {
                    if lo == hi {
                        lo.to_string()
                    } else {
                        format!("{lo}-{hi}")
                    }
                })
                .collect();
            parts.push(format!("{pk} {key} {}{}", nft_op(s.neg), nft_set(&items)));
        }
    }
    Ok(())
}

/// `icmp type T icmp code C` or `icmp type { … }` (`icmpv6` for IPv6).
fn push_icmp(parts: &mut Vec<String>, r: &Rule, icmp_key: Option<&str>) -> Result<(), RenderError> {
    let id = r.id;
    if let Some(set) = r.matches.get(Field::IcmpTypeCode) {
        let key = icmp_key.ok_or_else(|| {
            rerr(
                id,
                "an ICMP type needs the rule to be restricted to icmp (IPv4) or icmpv6 (IPv6)",
            )
        })?;
        let s = spell(set, 0xffff, |s| {
            // One type/code is `icmp type T icmp code C`; whole types list
            // as `icmp type { … }`.
            if let [(lo, hi)] = s.ranges() {
                if lo == hi {
                    return Some((2, Icmp::TypeCode((lo >> 8) as u8, (lo & 0xff) as u8)));
                }
            }
            let mut types = Vec::new();
            for &(lo, hi) in s.ranges() {
                if lo & 0xff != 0 || hi & 0xff != 0xff {
                    return None;
                }
                types.extend(((lo >> 8)..=(hi >> 8)).map(|t| t as u8));
            }
            (!types.is_empty() && types.len() <= 64).then_some((types.len(), Icmp::Types(types)))
        })
        .ok_or_else(|| {
            rerr(
                id,
                "the ICMP types are neither whole types nor one type/code",
            )
        })?;
        match (s.neg, s.items) {
            (false, Icmp::TypeCode(t, c)) => parts.push(format!("{key} type {t} {key} code {c}")),
            (true, Icmp::TypeCode(..)) => {
                return Err(rerr(
                    id,
                    "all but one ICMP type/code cannot be written in nft",
                ))
            }
            (neg, Icmp::Types(types)) => {
                let items: Vec<String> = types.iter().map(|t| t.to_string()).collect();
                parts.push(format!("{key} type {}{}", nft_op(neg), nft_set(&items)));
            }
        }
    }
    Ok(())
}

/// `ip saddr . tcp dport @NAME` for each set reference.
fn push_set_lookups(
    parts: &mut Vec<String>,
    rs: &Ruleset,
    r: &Rule,
    family: Option<Family>,
    port_key: Option<&str>,
) -> Result<(), RenderError> {
    let id = r.id;
    for (field, set) in r.matches.iter() {
        if let Field::Set(n) = field {
            let sr = set_ref(rs, *n, id)?;
            let SetKeySpec::Fields(fields) = &sr.key else {
                return Err(rerr(id, format!("set '{}' is an iptables --match-set (direction flags), which nft cannot write", sr.name)));
            };
            let mut keys = Vec::new();
            for f in fields {
                keys.push(match f {
                    Field::SrcAddr | Field::DstAddr => {
                        let fam = family
                            .ok_or_else(|| rerr(id, "an address set key needs one family"))?;
                        format!(
                            "{} {}",
                            ip_key(fam),
                            if *f == Field::SrcAddr {
                                "saddr"
                            } else {
                                "daddr"
                            }
                        )
                    }
                    Field::SrcPort | Field::DstPort => {
                        let pk = port_selector(r, port_key).ok_or_else(|| {
                            rerr(id, "a port set key needs one of tcp, udp, sctp, udplite")
                        })?;
                        format!(
                            "{pk} {}",
                            if *f == Field::SrcPort {
                                "sport"
                            } else {
                                "dport"
                            }
                        )
                    }
                    Field::Proto => "meta l4proto".into(),
                    Field::InIface => "iifname".into(),
                    Field::OutIface => "oifname".into(),
                    other => {
                        return Err(rerr(
                            id,
                            format!("field {other} cannot be a set key in nft"),
                        ))
                    }
                });
            }
            let neg = set.ranges() == [(0, 0)];
            parts.push(format!("{} {}@{}", keys.join(" . "), nft_op(neg), sr.name));
        }
    }
    Ok(())
}

/// The action: `accept`, `reject with …`, `log …`, `jump C`, …
fn push_verdict(parts: &mut Vec<String>, r: &Rule) -> Result<(), RenderError> {
    match &r.action {
        Action::Verdict(Verdict::Accept) => parts.push("accept".into()),
        Action::Verdict(Verdict::Drop) => parts.push("drop".into()),
        Action::Verdict(Verdict::Reject { with: None }) => parts.push("reject".into()),
        Action::Verdict(Verdict::Reject { with: Some(w) }) => {
            let s = nft_reject(w)
                .ok_or_else(|| rerr(r.id, format!("reject type '{w}' has no nft spelling")))?;
            parts.push(format!("reject {s}"));
        }
        Action::Log(spec) => parts.push(nft_log(spec)),
        Action::Count => {}
        Action::Return => parts.push("return".into()),
        Action::Jump(c) => parts.push(format!("jump {c}")),
        Action::Goto(c) => parts.push(format!("goto {c}")),
    }
    Ok(())
}

enum Icmp {
    TypeCode(u8, u8),
    Types(Vec<u8>),
}

fn nft_quote(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

fn nft_flags(bits: u8, sep: &str) -> String {
    if bits == 0 {
        return "0x0".into();
    }
    tcp_flags::NAMES
        .iter()
        .filter(|(_, b)| bits & b != 0)
        .map(|(n, _)| n.to_ascii_lowercase())
        .collect::<Vec<_>>()
        .join(sep)
}

fn nft_proto_word(p: u8, _family: Family) -> String {
    match p {
        58 => "ipv6-icmp".into(),
        136 => "udplite".into(),
        p => protocol_name(p).map_or(p.to_string(), str::to_string),
    }
}

/// A time window in nft's words (`meta time`, `meta hour`, `meta day`),
/// dates and hours in UTC; what nft cannot say is an error.
fn nft_time(w: &TimeWindow) -> Result<Vec<String>, &'static str> {
    let all = TimeWindow::default();
    if w.monthdays != ALL_MONTHDAYS {
        return Err("-m time --monthdays has no nft spelling");
    }
    if w.kernel_tz || w.contiguous {
        return Err("-m time --kerneltz or --contiguous has no nft spelling");
    }
    let date = |s: i64| format_date(s).replacen('T', " ", 1);
    let mut out = Vec::new();
    match (w.date_start == all.date_start, w.date_stop == all.date_stop) {
        (true, true) => {}
        (false, true) => out.push(format!("meta time >= \"{}\"", date(w.date_start))),
        (true, false) => out.push(format!("meta time <= \"{}\"", date(w.date_stop))),
        (false, false) => out.push(format!(
            "meta time \"{}\"-\"{}\"",
            date(w.date_start),
            date(w.date_stop)
        )),
    }
    if (w.daytime_start, w.daytime_stop) != (all.daytime_start, all.daytime_stop) {
        if w.daytime_start > w.daytime_stop {
            return Err("a -m time window past midnight has no one-rule nft spelling");
        }
        out.push(format!(
            "meta hour \"{}\"-\"{}\"",
            format_daytime(w.daytime_start),
            format_daytime(w.daytime_stop)
        ));
    }
    if w.weekdays != ALL_WEEKDAYS {
        const DAYS: [&str; 7] = [
            "Monday",
            "Tuesday",
            "Wednesday",
            "Thursday",
            "Friday",
            "Saturday",
            "Sunday",
        ];
        let days: Vec<String> = (1..=7)
            .filter(|d| w.weekdays & (1 << d) != 0)
            .map(|d| format!("\"{}\"", DAYS[d - 1]))
            .collect();
        out.push(format!("meta day {{ {} }}", days.join(", ")));
    }
    Ok(out)
}
