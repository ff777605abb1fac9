//! `ipset save` / `ipset restore` text.

use crate::desc::{IpsetInfo, SetDesc};
use crate::element::Element;
use crate::ipset_legacy::{canonical_type, option_word};
use crate::key::{fmt_value, parse_dim, KeyPart, MAX_DIMS};
use crate::list_set::{create_list, held_by, member_options, save_list};
use crate::set::Set;
use crate::store::{LoadStats, Loaded, SetStore, Staging};
use crate::Error;
use parapet_model::prefix_len;
use std::fmt::Write;

/// Splits a line into tokens with 1-based columns; `"…"` is one token (quotes removed).
fn tokens<'a>(line: &'a str, lno: usize, out: &mut Vec<(&'a str, usize)>) -> Result<(), Error> {
    let b = line.as_bytes();
    out.clear();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if b[i] == b'"' {
            let start = i + 1;
            let mut j = start;
            while j < b.len() && b[j] != b'"' {
                if b[j] == b'\\' {
                    j += 1;
                }
                j += 1;
            }
            if j >= b.len() {
                return Err(Error::new(
                    lno,
                    i + 1,
                    "unterminated string: expected a closing `\"`",
                ));
            }
            out.push((&line[start..j], i + 1));
            i = j + 1;
        } else {
            let start = i;
            while i < b.len() && !b[i].is_ascii_whitespace() {
                i += 1;
            }
            out.push((&line[start..i], start + 1));
        }
    }
    Ok(())
}

fn num<T: std::str::FromStr>(
    tok: Option<&(&str, usize)>,
    lno: usize,
    eol: usize,
    what: &str,
) -> Result<T, Error> {
    match tok {
        None => Err(Error::new(
            lno,
            eol,
            format!("expected {what}, found end of line"),
        )),
        Some(&(t, c)) => t
            .parse()
            .map_err(|_| Error::new(lno, c, format!("expected {what}, found `{t}`"))),
    }
}

/// (dims with family placeholder, interval) of an ipset type.
pub(crate) fn type_dims(typ: &str, v6: bool) -> Option<(Vec<KeyPart>, bool)> {
    let a = if v6 {
        KeyPart::Ipv6Addr
    } else {
        KeyPart::Ipv4Addr
    };
    let (kind, rest) = typ.split_once(':')?;
    let parts: Vec<&str> = rest.split(',').collect();
    let mut dims = Vec::new();
    let mut interval = false;
    for p in &parts {
        match *p {
            "ip" => dims.push(a),
            "net" => {
                dims.push(a);
                interval = true;
            }
            "port" => {
                dims.push(KeyPart::InetProto);
                dims.push(KeyPart::InetService);
            }
            "iface" => dims.push(KeyPart::IfName),
            "mac" => dims.push(KeyPart::EtherAddr),
            "mark" => dims.push(KeyPart::Mark),
            _ => return None,
        }
    }
    // The MAC and mark types ipset has: hash:mac, hash:ip,mac,
    // hash:ip,mark, bitmap:ip,mac.
    let mac_or_mark = |p: &&str| *p == "mac" || *p == "mark";
    if parts.iter().any(mac_or_mark)
        && !matches!(
            (kind, parts.as_slice()),
            ("hash", ["mac"] | ["ip", "mac"] | ["ip", "mark"]) | ("bitmap", ["ip", "mac"])
        )
    {
        return None;
    }
    if typ == "hash:mac" {
        // No address: the family plays no part.
        dims = vec![KeyPart::EtherAddr];
    }
    match kind {
        "hash" => {}
        "bitmap" if parts == ["ip", "mac"] => {
            if v6 {
                return None;
            }
        }
        "bitmap" => {
            if parts.len() != 1 || !(parts[0] == "ip" || parts[0] == "port") {
                return None;
            }
            if parts[0] == "port" {
                dims = vec![KeyPart::InetService];
            }
            if v6 {
                return None;
            }
        }
        _ => return None,
    }
    if dims.len() > MAX_DIMS {
        return None;
    }
    Some((dims, interval))
}

/// The ipset type name for a description, if one exists.
fn ipset_type(desc: &SetDesc) -> Option<String> {
    if let Some(i) = &desc.ipset {
        return Some(i.typ.clone());
    }
    use KeyPart::*;
    let d = &desc.dims;
    let a = |k: KeyPart| {
        if desc.interval {
            "net"
        } else if matches!(k, Ipv4Addr | Ipv6Addr) {
            "ip"
        } else {
            "?"
        }
    };
    let t = match d.as_slice() {
        [x @ (Ipv4Addr | Ipv6Addr)] => format!("hash:{}", a(*x)),
        [x @ (Ipv4Addr | Ipv6Addr), InetProto, InetService] => format!("hash:{},port", a(*x)),
        [x @ (Ipv4Addr | Ipv6Addr), InetProto, InetService, y] if y == x => {
            format!("hash:{},port,{}", a(*x), a(*x))
        }
        [x @ (Ipv4Addr | Ipv6Addr), y] if y == x && desc.interval => "hash:net,net".to_string(),
        [Ipv4Addr | Ipv6Addr, IfName] if desc.interval => "hash:net,iface".to_string(),
        [InetService] => "bitmap:port".to_string(),
        _ => return None,
    };
    Some(t)
}

/// Parses an ipset element `a,proto:port,b` for the dims.
pub(crate) fn parse_elem(dims: &[KeyPart], text: &str) -> Result<Element, (usize, String)> {
    let mut ranges = [(0u128, 0u128); MAX_DIMS];
    let mut parts = text.split(',');
    let mut off = 0usize;
    let mut i = 0;
    while i < dims.len() {
        let Some(p) = parts.next() else {
            return Err((
                off,
                format!(
                    "expected {} more comma-separated part(s) for {}",
                    dims.len() - i,
                    describe(dims)
                ),
            ));
        };
        let poff = off;
        off += p.len() + 1;
        let d = dims[i];
        if d == KeyPart::InetProto && dims.get(i + 1) == Some(&KeyPart::InetService) {
            let (proto, port) = match p.split_once(':') {
                Some((a, b)) => (a, b),
                None => ("tcp", p),
            };
            ranges[i] = parse_dim(KeyPart::InetProto, proto).map_err(|m| (poff, m))?;
            if !matches!(ranges[i].0, 6 | 17 | 132 | 136) || ranges[i].0 != ranges[i].1 {
                // ipset accepts port numbers only for tcp/udp/sctp/udplite;
                // another protocol (not ICMP's type:code) takes the pseudo
                // port 0, which is what its packets carry.
                let icmp = matches!(ranges[i].0, 1 | 58);
                if !(ranges[i].0 == ranges[i].1 && !icmp && port == "0") {
                    return Err((poff, format!("expected tcp:, udp:, sctp: or udplite: before the port, found `{p}` (icmp type/code elements are not supported)")));
                }
            }
            let pr = parse_dim(KeyPart::InetService, port).map_err(|m| (poff, m))?;
            ranges[i + 1] = pr;
            i += 2;
            continue;
        }
        if d == KeyPart::IfName && p.starts_with("physdev:") {
            return Err((poff, "physdev: interfaces are not supported".into()));
        }
        ranges[i] = parse_dim(d, p).map_err(|m| (poff, m))?;
        i += 1;
    }
    if parts.next().is_some() {
        return Err((
            off.saturating_sub(1),
            format!("too many comma-separated parts for {}", describe(dims)),
        ));
    }
    Ok(Element {
        ranges,
        dims: dims.len() as u8,
        timeout: None,
        expires: None,
        comment: None,
        counters: None,
    })
}

/// `netmask N`: the element's address becomes its /N network; a bitmap's
/// `range` kept aside bounds the element's address.
fn fit_to_ipset_options(info: &IpsetInfo, first: KeyPart, el: &mut Element) -> Result<(), String> {
    let width = first.width();
    if let Some(m) = info.netmask {
        let host = if m >= width {
            0
        } else {
            (1u128 << (width - m)) - 1
        };
        let (lo, hi) = el.ranges[0];
        el.ranges[0] = (lo & !host, hi | host);
    }
    if let Some((a, b)) = info.range {
        let (lo, hi) = el.ranges[0];
        if lo < a || hi > b {
            return Err(format!(
                "element {} is outside the set's range {}-{}",
                fmt_dim(first, lo, hi),
                fmt_value(first, a),
                fmt_value(first, b)
            ));
        }
    }
    Ok(())
}

fn describe(dims: &[KeyPart]) -> String {
    dims.iter()
        .map(|d| d.nft_name())
        .collect::<Vec<_>>()
        .join(" . ")
}

fn fmt_dim(d: KeyPart, lo: u128, hi: u128) -> String {
    if lo == hi {
        return fmt_value(d, lo);
    }
    match d {
        KeyPart::Ipv4Addr | KeyPart::Ipv6Addr => match prefix_len(lo, hi, d.width()) {
            Some(l) => format!("{}/{}", fmt_value(d, lo), l),
            None => format!("{}-{}", fmt_value(d, lo), fmt_value(d, hi)),
        },
        KeyPart::IfName => {
            let l = prefix_len(lo, hi, 128).unwrap_or(0);
            let b = lo.to_be_bytes();
            format!("{}*", String::from_utf8_lossy(&b[..(l / 8) as usize]))
        }
        _ => format!("{}-{}", fmt_value(d, lo), fmt_value(d, hi)),
    }
}

/// Formats an ipset element.
pub(crate) fn fmt_elem(dims: &[KeyPart], el: &Element) -> String {
    let mut s = String::new();
    let r = el.ranges();
    let mut i = 0;
    while i < dims.len() {
        if i > 0 {
            s.push(',');
        }
        if dims[i] == KeyPart::InetProto && dims.get(i + 1) == Some(&KeyPart::InetService) {
            s.push_str(&fmt_dim(KeyPart::InetProto, r[i].0, r[i].1));
            s.push(':');
            s.push_str(&fmt_dim(KeyPart::InetService, r[i + 1].0, r[i + 1].1));
            i += 2;
        } else {
            s.push_str(&fmt_dim(dims[i], r[i].0, r[i].1));
            i += 1;
        }
    }
    s
}

pub(crate) fn load(store: &SetStore, text: &str, now: u64) -> Result<Loaded, Error> {
    let mut st = Staging::new(store);
    let mut lists = store.lists.clone();
    let mut stats = LoadStats::default();
    let mut toks: Vec<(&str, usize)> = Vec::with_capacity(8);
    for (li, raw) in text.lines().enumerate() {
        let lno = li + 1;
        let line = raw.trim_end_matches('\r');
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') || trimmed == "COMMIT" {
            continue;
        }
        tokens(line, lno, &mut toks)?;
        let toks = &toks;
        let eol = line.len() + 1;
        let (cmd, ccol) = toks[0];
        let need = |i: usize, what: &str| -> Result<(&str, usize), Error> {
            toks.get(i)
                .copied()
                .ok_or_else(|| Error::new(lno, eol, format!("expected {what}, found end of line")))
        };
        match cmd {
            "create" | "-N" | "n" => {
                let (name, ncol) = need(1, "a set name")?;
                let (typ, tcol) = need(2, "a set type (e.g. hash:ip)")?;
                let typ = canonical_type(typ);
                if st.exists(name) || lists.contains_key(name) {
                    return Err(Error::new(
                        lno,
                        ncol,
                        format!("set `{name}` already exists"),
                    ));
                }
                // options
                let mut v6 = false;
                let mut desc_opts: Vec<(&str, usize, Option<(&str, usize)>)> = Vec::new();
                let mut i = 3;
                while i < toks.len() {
                    let (o, oc) = toks[i];
                    let o = option_word(o);
                    let takes = matches!(
                        o,
                        "family"
                            | "hashsize"
                            | "maxelem"
                            | "timeout"
                            | "range"
                            | "netmask"
                            | "bucketsize"
                            | "initval"
                            | "markmask"
                            | "size"
                    );
                    let arg = if takes {
                        i += 1;
                        Some(*toks.get(i).ok_or_else(|| {
                            Error::new(
                                lno,
                                eol,
                                format!("expected a value after `{o}`, found end of line"),
                            )
                        })?)
                    } else {
                        None
                    };
                    if o == "family" {
                        let (f, fc) = arg.unwrap();
                        v6 = match f {
                            "inet" | "ipv4" => false,
                            "inet6" | "ipv6" => true,
                            _ => {
                                return Err(Error::new(
                                    lno,
                                    fc,
                                    format!("expected family inet or inet6, found `{f}`"),
                                ))
                            }
                        };
                    } else {
                        desc_opts.push((o, oc, arg));
                    }
                    i += 1;
                }
                if typ == "list:set" {
                    lists.insert(name.to_string(), create_list(&desc_opts, lno)?);
                    stats.sets_created += 1;
                    continue;
                }
                let (dims, interval) = type_dims(typ, v6).ok_or_else(|| {
                    Error::new(
                        lno,
                        tcol,
                        format!("unsupported set type `{typ}`: expected hash:ip, hash:net, hash:ip,port, hash:net,port, hash:ip,port,ip, hash:ip,port,net, hash:net,port,net, hash:net,net, hash:net,iface, hash:mac, hash:ip,mac, hash:ip,mark, bitmap:ip, bitmap:ip,mac or bitmap:port"),
                    )
                })?;
                let mut desc = SetDesc::new(&dims);
                desc.interval = interval;
                let mut info = IpsetInfo {
                    typ: typ.to_string(),
                    hashsize: None,
                    netmask: None,
                    range: None,
                };
                for (o, oc, arg) in desc_opts {
                    let a = arg.map(|x| x.0).unwrap_or("");
                    let ac = arg.map(|x| x.1).unwrap_or(oc);
                    let n = || {
                        a.parse::<u64>().map_err(|_| {
                            Error::new(
                                lno,
                                ac,
                                format!("expected a number after `{o}`, found `{a}`"),
                            )
                        })
                    };
                    match o {
                        "hashsize" => {
                            let v = n()? as usize;
                            info.hashsize = Some(v);
                        }
                        "maxelem" | "size" => {
                            let v = n()? as usize;
                            if v == 0 {
                                return Err(Error::new(lno, ac, "maxelem must be at least 1"));
                            }
                            desc.maxelem = Some(v);
                        }
                        "timeout" => {
                            desc.timeouts = true;
                            desc.default_timeout = n()?.saturating_mul(1000);
                        }
                        "counters" => desc.counters = true,
                        "comment" => desc.comment = true,
                        "range" => {
                            if !typ.starts_with("bitmap:") {
                                return Err(Error::new(lno, oc, "`range` applies to bitmap types only"));
                            }
                            let r = parse_dim(dims[0], a).map_err(|m| Error::new(lno, ac, m))?;
                            desc.range = Some(r);
                        }
                        "bucketsize" | "initval" => {}
                        "netmask" if matches!(typ, "hash:ip" | "bitmap:ip") => {
                            let bits = dims[0].width() as u64;
                            match n()? {
                                m @ 1.. if m <= bits => {
                                    info.netmask = Some(m as u32);
                                    desc.interval = true;
                                }
                                _ => return Err(Error::new(lno, ac, format!("expected a netmask 1-{bits}, found `{a}`"))),
                            }
                        }
                        // The default mark mask: every bit of the mark counts.
                        "markmask" if typ == "hash:ip,mark" && matches!(a, "0xffffffff" | "0xFFFFFFFF" | "4294967295") => {}
                        "netmask" | "markmask" | "skbinfo" | "forceadd" => {
                            return Err(Error::new(
                                lno,
                                oc,
                                format!("option `{o}` is not supported{}", if o == "forceadd" { " (parapet never evicts elements silently)" } else { "" }),
                            ))
                        }
                        _ => return Err(Error::new(lno, oc, format!("unknown create option `{o}`: expected family, hashsize, maxelem, timeout, counters, comment or range"))),
                    }
                }
                // A bitmap keyed on more than its range's dimension, or on
                // /N networks, is kept as a hash of its elements; the range
                // still bounds them.
                if typ == "bitmap:ip,mac" || (typ == "bitmap:ip" && info.netmask.is_some()) {
                    info.range = desc.range.take();
                }
                if typ.starts_with("bitmap:") && desc.range.is_none() && info.range.is_none() {
                    if typ == "bitmap:port" {
                        desc.range = Some((0, 65535));
                    } else {
                        return Err(Error::new(
                            lno,
                            eol,
                            "bitmap:ip needs `range FROM-TO` (at most 65536 addresses)",
                        ));
                    }
                }
                desc.ipset = Some(info);
                let set = Set::new(name, desc).map_err(|e| Error::new(lno, tcol, e.to_string()))?;
                st.create(set);
                stats.sets_created += 1;
            }
            "add" | "-A" | "a" | "del" | "-D" | "d" => {
                let (name, ncol) = need(1, "a set name")?;
                let (etext, ecol) = need(2, "an element")?;
                if lists.contains_key(name) {
                    let member = etext;
                    let (at, timeout) = member_options(&toks[3..], lno, eol)?;
                    if lists.contains_key(member) {
                        return Err(Error::new(
                            lno,
                            ecol,
                            format!("set `{member}` is a list:set: a list cannot hold a list"),
                        ));
                    }
                    let list = lists.get_mut(name).expect("checked above");
                    let done = if cmd.starts_with('a') || cmd == "-A" {
                        if !st.exists(member) {
                            return Err(Error::new(
                                lno,
                                ecol,
                                format!("set `{member}` does not exist"),
                            ));
                        }
                        list.add(member, at, timeout, now)
                    } else {
                        list.del(member, now)
                    };
                    done.map_err(|m| Error::new(lno, ecol, format!("list:set `{name}`: {m}")))?;
                    continue;
                }
                let set = st
                    .get_mut(name)
                    .ok_or_else(|| Error::new(lno, ncol, format!("set `{name}` does not exist")))?;
                let mut el = parse_elem(set.key_dims(), etext)
                    .map_err(|(o, m)| Error::new(lno, ecol + o, m))?;
                if let Some(info) = &set.desc().ipset {
                    fit_to_ipset_options(info, set.key_dims()[0], &mut el)
                        .map_err(|m| Error::new(lno, ecol, format!("set `{name}`: {m}")))?;
                }
                let mut i = 3;
                while i < toks.len() {
                    let (o, oc) = toks[i];
                    let o = option_word(o);
                    match o {
                        "timeout" => {
                            el.timeout = Some(num::<u64>(toks.get(i + 1), lno, eol, "a timeout in seconds")?.saturating_mul(1000));
                            i += 1;
                        }
                        "packets" | "bytes" => {
                            let v: u64 = num(toks.get(i + 1), lno, eol, "a counter value")?;
                            let c = el.counters.get_or_insert((0, 0));
                            if o == "packets" {
                                c.0 = v
                            } else {
                                c.1 = v
                            }
                            i += 1;
                        }
                        "comment" => {
                            let (c, _) = *toks.get(i + 1).ok_or_else(|| Error::new(lno, eol, "expected a quoted comment, found end of line"))?;
                            el.comment = Some(c.replace("\\\"", "\""));
                            i += 1;
                        }
                        "nomatch" | "skbmark" | "skbprio" | "skbqueue" => return Err(Error::new(lno, oc, format!("element option `{o}` is not supported"))),
                        _ => return Err(Error::new(lno, oc, format!("unknown element option `{o}`: expected timeout, packets, bytes or comment"))),
                    }
                    i += 1;
                }
                if cmd.starts_with('a') || cmd == "-A" {
                    let n = set
                        .add_staged(&el, now)
                        .map_err(|e| Error::new(lno, ecol, e.to_string()))?;
                    stats.elements_added += n;
                } else {
                    let n = set
                        .del(&el)
                        .map_err(|e| Error::new(lno, ecol, e.to_string()))?;
                    stats.elements_deleted += n;
                }
            }
            "flush" | "-F" => match toks.get(1) {
                Some(&(name, _)) if lists.contains_key(name) => {
                    lists.get_mut(name).expect("checked").members.clear()
                }
                Some(&(name, nc)) => st
                    .get_mut(name)
                    .ok_or_else(|| Error::new(lno, nc, format!("set `{name}` does not exist")))?
                    .flush(),
                None => {
                    lists.values_mut().for_each(|l| l.members.clear());
                    let names: Vec<String> = store
                        .names()
                        .iter()
                        .map(|s| s.to_string())
                        .chain(st.staged.keys().cloned())
                        .collect();
                    for n in names {
                        if let Some(s) = st.get_mut(&n) {
                            s.flush();
                        }
                    }
                }
            },
            "destroy" | "-X" | "x" => match toks.get(1) {
                Some(&(name, _)) if lists.remove(name).is_some() => {}
                Some(&(name, nc)) => {
                    if let Some(list) = held_by(&lists, name, now) {
                        return Err(Error::new(
                            lno,
                            nc,
                            format!("set `{name}` is in use: list:set `{list}` holds it"),
                        ));
                    }
                    if !st.destroy(name) {
                        return Err(Error::new(lno, nc, format!("set `{name}` does not exist")));
                    }
                }
                None => {
                    // The kernel destroys nothing while a list holds a set.
                    let mut held: Vec<(&String, &String)> = lists
                        .iter()
                        .flat_map(|(l, list)| list.members.iter().map(move |m| (l, &m.name)))
                        .collect();
                    held.sort();
                    if let Some((list, set)) = held.first() {
                        return Err(Error::new(lno, ccol, format!("set `{set}` is in use: list:set `{list}` holds it (flush the list first)")));
                    }
                    lists.clear();
                    st.destroy_all();
                }
            },
            "swap" | "-W" | "rename" | "-E" => {
                let (a, ac) = need(1, "a set name")?;
                let (b, bc) = need(2, "a set name")?;
                for (n, c) in [(a, ac), (b, bc)] {
                    if lists.contains_key(n) || held_by(&lists, n, now).is_some() {
                        return Err(Error::new(
                            lno,
                            c,
                            format!(
                                "{cmd} of a list:set or of a set a list:set holds is not supported"
                            ),
                        ));
                    }
                }
                let sa = st
                    .get(a)
                    .ok_or_else(|| Error::new(lno, ac, format!("set `{a}` does not exist")))?
                    .clone();
                if cmd == "swap" || cmd == "-W" {
                    let sb = st
                        .get(b)
                        .ok_or_else(|| Error::new(lno, bc, format!("set `{b}` does not exist")))?
                        .clone();
                    let (mut sa, mut sb) = (sa, sb);
                    sa.set_name_pub(b);
                    sb.set_name_pub(a);
                    st.create(sb);
                    st.create(sa);
                } else {
                    if st.exists(b) {
                        return Err(Error::new(lno, bc, format!("set `{b}` already exists")));
                    }
                    let mut sa = sa;
                    sa.set_name_pub(b);
                    st.destroy(a);
                    st.create(sa);
                }
            }
            _ => {
                return Err(Error::new(
                    lno,
                    ccol,
                    format!(
                        "expected create, add, del, flush, destroy, swap or rename, found `{cmd}`"
                    ),
                ))
            }
        }
    }
    let (staged, removed) = st.finish();
    Ok((staged, removed, stats, lists))
}

pub(crate) fn save(store: &SetStore, only: Option<&str>, now: u64) -> String {
    let mut out = String::new();
    let names: Vec<&str> = match only {
        Some(n) => vec![n],
        None => store.names(),
    };
    let mut adds = String::new();
    for name in names {
        let Some(set) = store.get(name) else { continue };
        let d = set.desc();
        let Some(typ) = ipset_type(d) else {
            let _ = writeln!(
                out,
                "# set {name} (type {}) has no ipset equivalent",
                d.type_name()
            );
            continue;
        };
        let _ = write!(out, "create {name} {typ}");
        let info = d.ipset.as_ref();
        if typ.starts_with("bitmap:") {
            let (a, b) = d
                .range
                .or(info.and_then(|i| i.range))
                .unwrap_or((0, d.dims[0].max()));
            let _ = write!(
                out,
                " range {}-{}",
                fmt_value(d.dims[0], a),
                fmt_value(d.dims[0], b)
            );
        } else {
            let v6 = d.dims.contains(&KeyPart::Ipv6Addr);
            let hs = d
                .ipset
                .as_ref()
                .and_then(|i| i.hashsize)
                .unwrap_or_else(|| set.len().max(1024).next_power_of_two());
            if typ != "hash:mac" {
                let _ = write!(out, " family {}", if v6 { "inet6" } else { "inet" });
            }
            let _ = write!(out, " hashsize {hs} maxelem {}", set.maxelem());
        }
        if let Some(m) = info.and_then(|i| i.netmask) {
            let _ = write!(out, " netmask {m}");
        }
        if d.timeouts {
            let _ = write!(out, " timeout {}", d.default_timeout / 1000);
        }
        if d.counters {
            out.push_str(" counters");
        }
        if d.comment {
            out.push_str(" comment");
        }
        out.push('\n');
        set.for_each_element(now, &mut |se| {
            let el = &se.element;
            let _ = match info.and_then(|i| i.netmask) {
                // The /N network, as ipset prints it: its first address.
                Some(_) => write!(
                    adds,
                    "add {name} {}",
                    fmt_value(d.dims[0], el.ranges()[0].0)
                ),
                None => write!(adds, "add {name} {}", fmt_elem(&d.dims, el)),
            };
            if d.timeouts {
                let secs = se.remaining.map(|r| r.div_ceil(1000)).unwrap_or(0);
                let _ = write!(adds, " timeout {secs}");
            }
            if d.counters {
                let (p, b) = el.counters.unwrap_or((0, 0));
                let _ = write!(adds, " packets {p} bytes {b}");
            }
            if d.comment {
                if let Some(c) = &el.comment {
                    let _ = write!(adds, " comment \"{}\"", c.replace('"', "\\\""));
                }
            }
            adds.push('\n');
        });
        out.push_str(&adds);
        adds.clear();
    }
    // Lists after the sets they hold, as restore needs them.
    let lists = match only {
        Some(n) => vec![n],
        None => store.list_names(),
    };
    for name in lists {
        if let Some(list) = store.list(name) {
            out.push_str(&save_list(name, list, now));
        }
    }
    out
}

/// The `ipset save` / `ipset restore` side of the store.
impl SetStore {
    /// Loads `ipset save` / `ipset restore` text (`create`, `add`, `del`,
    /// `flush`, `destroy`, `swap`). All or nothing: on error nothing changes.
    pub fn load_ipset(&mut self, text: &str) -> Result<LoadStats, Error> {
        let now = self.now();
        let (staged, removed, stats, lists) = load(self, text, now)?;
        self.commit(staged, removed, lists);
        Ok(stats)
    }
    /// `ipset save` text of all sets (sorted by name), or of one set.
    pub fn save_ipset(&self, only: Option<&str>) -> String {
        save(self, only, self.now())
    }
}
