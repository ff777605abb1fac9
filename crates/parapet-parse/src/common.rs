//! Pieces every frontend shares: words with positions, addresses, ports,
//! ICMP names, TCP flag sets.

use crate::error::Errors;
use parapet_model::{width_mask, Family, IntervalSet, LeftToKernel, Ruleset};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A word of a line and the 1-based column it starts at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Word {
    pub text: String,
    pub col: u32,
    /// True when any part of the word was quoted: a quoted `!` is a value,
    /// not a negation.
    pub quoted: bool,
}

/// Splits a line the way a POSIX shell would (iptables-restore does the
/// same): whitespace separates words, `"…"` groups with `\"` and `\\`
/// escapes, `'…'` groups literally. Errors carry the column of the opening
/// quote.
pub(crate) fn shell_words(line: &str) -> Result<Vec<Word>, (u32, String)> {
    let mut out = Vec::new();
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        if chars[i].is_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        let mut text = String::new();
        let mut quoted = false;
        while i < chars.len() && !chars[i].is_whitespace() {
            match chars[i] {
                q @ ('"' | '\'') => {
                    quoted = true;
                    i = quoted_part(&chars, i, q, &mut text)?;
                }
                c => {
                    text.push(c);
                    i += 1;
                }
            }
        }
        out.push(Word {
            text,
            col: start as u32 + 1,
            quoted,
        });
    }
    Ok(out)
}

/// Reads the part of a word quoted by `q` that opens at `open` into
/// `text` and returns the index after its closing quote. Inside `"…"`,
/// `\"` and `\\` escape; inside `'…'` nothing does (POSIX).
fn quoted_part(
    chars: &[char],
    open: usize,
    q: char,
    text: &mut String,
) -> Result<usize, (u32, String)> {
    let mut i = open + 1;
    loop {
        match chars.get(i) {
            None => return Err((open as u32 + 1, format!("unterminated {q}-quoted string"))),
            Some(c) if *c == q => return Ok(i + 1),
            Some('\\') if q == '"' && matches!(chars.get(i + 1), Some('"' | '\\')) => {
                text.push(chars[i + 1]);
                i += 1;
            }
            Some(c) => text.push(*c),
        }
        i += 1;
    }
}

/// Quotes a word for iptables-save output when the shell would split or
/// alter it.
pub(crate) fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.:/+,=@%".contains(c))
    {
        return s.to_string();
    }
    let mut out = String::from("\"");
    for c in s.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// Parses an address of `family` (either family when `None`).
pub(crate) fn parse_ip(s: &str, family: Option<Family>) -> Option<(Family, u128)> {
    match (s.parse::<IpAddr>().ok()?, family) {
        (IpAddr::V4(a), None | Some(Family::V4)) => Some((Family::V4, u32::from(a) as u128)),
        (IpAddr::V6(a), None | Some(Family::V6)) => Some((Family::V6, u128::from(a))),
        _ => None,
    }
}

/// Parses `ADDR`, `ADDR/LEN` or `ADDR/MASK` (dotted, contiguous) into an
/// interval. The error names what was expected.
pub(crate) fn parse_cidr(s: &str, family: Option<Family>) -> Result<(Family, IntervalSet), String> {
    let (addr, len) = match s.split_once('/') {
        Some((a, l)) => (a, Some(l)),
        None => (s, None),
    };
    let host_name = addr.contains('.')
        && addr.chars().any(|c| c.is_ascii_alphabetic())
        && addr
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-');
    if host_name && parse_ip(addr, None).is_none() {
        // iptables resolves a name once, when it loads the rules: the rule
        // then holds whatever DNS answered at that moment. A filter that
        // changes with DNS answers at load time is refused, named.
        return Err(format!("'{addr}' is a host name: parapet does not resolve names (iptables resolves them once at load time, so the rule would depend on what DNS answered then); write its address(es)"));
    }
    let (fam, value) = parse_ip(addr, family).ok_or_else(|| match family {
        Some(Family::V4) => format!("expected an IPv4 address, found '{addr}'"),
        Some(Family::V6) => format!("expected an IPv6 address, found '{addr}'"),
        None => format!("expected an IP address, found '{addr}'"),
    })?;
    let bits = fam.addr_bits();
    let len = match len {
        None => bits,
        Some(l) => {
            if let Ok(n) = l.parse::<u32>() {
                if n > bits {
                    return Err(format!("prefix length {n} is longer than {bits}"));
                }
                n
            } else if let Some((mfam, mask)) = parse_ip(l, Some(fam)) {
                let _ = mfam;
                // A mask is usable only when it is a prefix mask: ones, then zeros.
                let ones = (mask << (128 - bits)).leading_ones().min(bits);
                if mask != (width_mask(bits) & !width_mask(bits - ones)) {
                    return Err(format!(
                        "mask '{l}' is not contiguous; only prefix masks are supported"
                    ));
                }
                ones
            } else {
                return Err(format!(
                    "expected a prefix length or mask after '/', found '{l}'"
                ));
            }
        }
    };
    Ok((fam, IntervalSet::prefix(value, len, bits)))
}

/// Parses `A-B` (an address range, inclusive).
pub(crate) fn parse_ip_range(
    s: &str,
    family: Option<Family>,
) -> Result<(Family, IntervalSet), String> {
    let (a, b) = s
        .split_once('-')
        .ok_or_else(|| format!("expected an address range FROM-TO, found '{s}'"))?;
    let (fa, lo) =
        parse_ip(a, family).ok_or_else(|| format!("expected an address, found '{a}'"))?;
    let (_, hi) = parse_ip(b, Some(fa))
        .ok_or_else(|| format!("expected an address of the same family, found '{b}'"))?;
    if lo > hi {
        return Err(format!("range '{s}' is empty (start after end)"));
    }
    Ok((fa, IntervalSet::range(lo, hi)))
}

/// Formats an address value of `family`.
pub(crate) fn fmt_ip(family: Family, v: u128) -> String {
    match family {
        Family::V4 => Ipv4Addr::from(v as u32).to_string(),
        Family::V6 => Ipv6Addr::from(v).to_string(),
    }
}

/// The single prefix `[lo, hi]` is, if it is one.
pub(crate) fn as_prefix(lo: u128, hi: u128, bits: u32) -> Option<u32> {
    parapet_model::prefix_len(lo, hi, bits)
}

/// Parses a port number or a well-known service name.
pub(crate) fn parse_port(s: &str) -> Result<u128, String> {
    if let Some(p) = parapet_model::service_port(s) {
        return Ok(p as u128);
    }
    s.parse::<u16>()
        .map(u128::from)
        .map_err(|_| format!("expected a port number 0-65535, found '{s}'"))
}

/// iptables' port range: `P`, `A:B`, `:B`, `A:`.
pub(crate) fn parse_port_range(s: &str, sep: char) -> Result<(u128, u128), String> {
    match s.split_once(sep) {
        None => {
            let p = parse_port(s)?;
            Ok((p, p))
        }
        Some((a, b)) => {
            let lo = if a.is_empty() { 0 } else { parse_port(a)? };
            let hi = if b.is_empty() { 65535 } else { parse_port(b)? };
            if lo > hi {
                return Err(format!("port range '{s}' is empty (start after end)"));
            }
            Ok((lo, hi))
        }
    }
}

/// ICMP type names with `(type, code)`; `None` code means every code.
pub(crate) const ICMP_NAMES: &[(&str, u8, Option<u8>)] = &[
    ("echo-reply", 0, None),
    ("destination-unreachable", 3, None),
    ("network-unreachable", 3, Some(0)),
    ("host-unreachable", 3, Some(1)),
    ("protocol-unreachable", 3, Some(2)),
    ("port-unreachable", 3, Some(3)),
    ("fragmentation-needed", 3, Some(4)),
    ("source-route-failed", 3, Some(5)),
    ("network-prohibited", 3, Some(9)),
    ("host-prohibited", 3, Some(10)),
    ("communication-prohibited", 3, Some(13)),
    ("source-quench", 4, None),
    ("redirect", 5, None),
    ("echo-request", 8, None),
    ("router-advertisement", 9, None),
    ("router-solicitation", 10, None),
    ("time-exceeded", 11, None),
    ("ttl-zero-during-transit", 11, Some(0)),
    ("ttl-zero-during-reassembly", 11, Some(1)),
    ("parameter-problem", 12, None),
    ("timestamp-request", 13, None),
    ("timestamp-reply", 14, None),
    ("info-request", 15, None),
    ("info-reply", 16, None),
    ("address-mask-request", 17, None),
    ("address-mask-reply", 18, None),
];

/// ICMPv6 type names.
pub(crate) const ICMP6_NAMES: &[(&str, u8, Option<u8>)] = &[
    ("destination-unreachable", 1, None),
    ("no-route", 1, Some(0)),
    ("communication-prohibited", 1, Some(1)),
    ("address-unreachable", 1, Some(3)),
    ("port-unreachable", 1, Some(4)),
    ("packet-too-big", 2, None),
    ("time-exceeded", 3, None),
    ("parameter-problem", 4, None),
    ("echo-request", 128, None),
    ("echo-reply", 129, None),
    ("mld-listener-query", 130, None),
    ("mld-listener-report", 131, None),
    ("mld-listener-done", 132, None),
    ("nd-router-solicit", 133, None),
    ("router-solicitation", 133, None),
    ("nd-router-advert", 134, None),
    ("router-advertisement", 134, None),
    ("nd-neighbor-solicit", 135, None),
    ("neighbour-solicitation", 135, None),
    ("neighbor-solicitation", 135, None),
    ("nd-neighbor-advert", 136, None),
    ("neighbour-advertisement", 136, None),
    ("neighbor-advertisement", 136, None),
    ("nd-redirect", 137, None),
    ("redirect", 137, None),
    ("mld2-listener-report", 143, None),
];

/// The [`parapet_model::Field::IcmpTypeCode`] interval of an ICMP type and
/// optional code.
pub(crate) fn icmp_interval(t: u8, code: Option<u8>) -> IntervalSet {
    let base = (t as u128) << 8;
    match code {
        Some(c) => IntervalSet::point(base | c as u128),
        None => IntervalSet::range(base, base | 0xff),
    }
}

/// ICMP type names iptables reads (`iptables -p icmp -h`, libxt_icmp's
/// `icmp_codes`) beyond the names nft shares ([`ICMP_NAMES`]).
const IPTABLES_ICMP_NAMES: &[(&str, u8, Option<u8>)] = &[
    ("pong", 0, None),
    ("network-unknown", 3, Some(6)),
    ("host-unknown", 3, Some(7)),
    ("TOS-network-unreachable", 3, Some(11)),
    ("TOS-host-unreachable", 3, Some(12)),
    ("host-precedence-violation", 3, Some(14)),
    ("precedence-cutoff", 3, Some(15)),
    ("network-redirect", 5, Some(0)),
    ("host-redirect", 5, Some(1)),
    ("TOS-network-redirect", 5, Some(2)),
    ("TOS-host-redirect", 5, Some(3)),
    ("ping", 8, None),
    ("ttl-exceeded", 11, None),
    ("ip-header-bad", 12, Some(0)),
    ("required-option-missing", 12, Some(1)),
];

/// Parses iptables' `--icmp-type` value: `any`, a name, `T` or `T/C`.
/// Type 255 is `any` in the kernel (`icmp_type_code_match`,
/// `icmp6_type_code_match`: `test_type == 0xFF` matches every type).
pub(crate) fn parse_icmp_type(s: &str, v6: bool) -> Result<IntervalSet, String> {
    if s == "any" {
        return Ok(IntervalSet::full(0xffff));
    }
    let names = if v6 {
        ICMP6_NAMES.iter().chain(&[])
    } else {
        ICMP_NAMES.iter().chain(IPTABLES_ICMP_NAMES)
    };
    if let Some((_, t, c)) = names
        .into_iter()
        .find(|(n, _, _)| n.eq_ignore_ascii_case(s))
    {
        return Ok(icmp_interval(*t, *c));
    }
    let (t, c) = match s.split_once('/') {
        Some((t, c)) => (t, Some(c)),
        None => (s, None),
    };
    let t: u8 = t.parse().map_err(|_| {
        format!("expected an ICMP type name or number (like echo-request or 8/0), found '{s}'")
    })?;
    let c = match c {
        Some(c) => Some(
            c.parse::<u8>()
                .map_err(|_| format!("expected an ICMP code 0-255 after '/', found '{c}'"))?,
        ),
        None => None,
    };
    if t == 255 {
        return Ok(IntervalSet::full(0xffff));
    }
    Ok(icmp_interval(t, c))
}

/// The TCP flags iptables can name; its `ALL` (libxt_tcp).
pub(crate) const IPTABLES_TCP_FLAGS: u8 = 0x3f;

/// Packets whose TCP flags satisfy `flags & mask == comp`, as a set of the
/// 256 flag-byte values.
pub(crate) fn tcp_flags_set(mask: u8, comp: u8) -> IntervalSet {
    IntervalSet::from_ranges(
        (0u128..=255)
            .filter(|v| (*v as u8) & mask == comp & mask)
            .map(|v| (v, v)),
    )
}

/// The `(mask, comp)` a flags set is, if it is one.
pub(crate) fn tcp_flags_mask(set: &IntervalSet) -> Option<(u8, u8)> {
    let values: Vec<u8> = (0u16..=255)
        .filter(|v| set.contains(*v as u128))
        .map(|v| v as u8)
        .collect();
    let first = *values.first()?;
    // Bits that are the same in every member form the mask.
    let varying = values.iter().fold(0u8, |acc, v| acc | (v ^ first));
    let mask = !varying;
    let comp = first & mask;
    (tcp_flags_set(mask, comp) == *set).then_some((mask, comp))
}

/// Values of a small field (protocol) matching `value/mask`, as intervals.
pub(crate) fn masked_byte_set(value: u8, mask: u8) -> IntervalSet {
    // The two masks ClassBench nearly always uses, without enumerating.
    match mask {
        0xff => IntervalSet::point(value as u128),
        0 => IntervalSet::full(0xff),
        _ => tcp_flags_set(mask, value),
    }
}

/// Reports every chain loop: `edges[c]` lists `(target, line, col)` of the
/// jumps and gotos of chain `c`. A depth-first search finds the back edges,
/// and the error sits on the rule that closes the loop.
pub(crate) fn report_loops(names: &[&str], edges: &[Vec<(usize, u32, u32)>], errs: &mut Errors) {
    let n = names.len();
    let mut state = vec![0u8; n]; // 0 new, 1 on the stack, 2 done
    for start in 0..n {
        if state[start] != 0 {
            continue;
        }
        let mut stack: Vec<(usize, usize)> = vec![(start, 0)];
        state[start] = 1;
        while let Some(&mut (c, ref mut i)) = stack.last_mut() {
            if let Some(&(target, line, col)) = edges[c].get(*i) {
                *i += 1;
                match state[target] {
                    0 => {
                        state[target] = 1;
                        stack.push((target, 0));
                    }
                    1 => {
                        let from = stack.iter().position(|(s, _)| *s == target).unwrap_or(0);
                        let mut path: Vec<&str> =
                            stack[from..].iter().map(|(s, _)| names[*s]).collect();
                        path.push(names[target]);
                        errs.push(line, col, format!("chain loop: {}", path.join(" -> ")));
                    }
                    _ => {}
                }
            } else {
                state[c] = 2;
                stack.pop();
            }
        }
    }
}

/// The rules' statements and targets left to the kernel (nft `ct helper
/// set`, `flow add`, `notrack`; iptables `-j TCPMSS`, `-j NFLOG`), one note
/// per table and statement with the number of rules, for `check` and
/// `apply`.
pub(crate) fn kernel_statement_notes(rs: &Ruleset, nft: bool) -> Vec<LeftToKernel> {
    let mut notes: Vec<LeftToKernel> = Vec::new();
    for t in &rs.tables {
        let mut counts: Vec<(String, Vec<u32>)> = Vec::new();
        for r in t.chains.iter().flat_map(|c| &c.rules) {
            for k in &r.kernel {
                let head = if k.starts_with("-j ") {
                    k.split(' ').take(2).collect::<Vec<_>>().join(" ")
                } else {
                    match (k.find(" set "), k.find(" @")) {
                        (Some(i), _) => k[..i + 4].to_string(),
                        (None, Some(i)) => k[..i].to_string(),
                        _ => k.clone(),
                    }
                };
                match counts.iter_mut().find(|(h, _)| *h == head) {
                    Some((_, ids)) if ids.contains(&r.id) => {}
                    Some((_, ids)) => ids.push(r.id),
                    None => counts.push((head, vec![r.id])),
                }
            }
        }
        for (head, ids) in counts {
            let n = ids.len();
            notes.push(LeftToKernel {
                family: t.family,
                table: t.name.clone(),
                line: 0,
                chains: Vec::new(),
                text: String::new(),
                nft,
                first_id: 0,
                object: Some(format!(
                    "'{head}' {} of {n} rule{}",
                    if head.starts_with("-j ") {
                        "targets"
                    } else {
                        "statements"
                    },
                    if n == 1 { "" } else { "s" }
                )),
            });
        }
    }
    notes
}

/// The DSCP class names (libxt_dscp's `dscp_helper.c`; nft has the same
/// names in lower case, `be` included), with values. The first name of a
/// value is the one listings write.
pub(crate) const DSCP_CLASSES: [(&str, u8); 22] = [
    ("CS0", 0x00),
    ("CS1", 0x08),
    ("CS2", 0x10),
    ("CS3", 0x18),
    ("CS4", 0x20),
    ("CS5", 0x28),
    ("CS6", 0x30),
    ("CS7", 0x38),
    ("BE", 0x00),
    ("AF11", 0x0a),
    ("AF12", 0x0c),
    ("AF13", 0x0e),
    ("AF21", 0x12),
    ("AF22", 0x14),
    ("AF23", 0x16),
    ("AF31", 0x1a),
    ("AF32", 0x1c),
    ("AF33", 0x1e),
    ("AF41", 0x22),
    ("AF42", 0x24),
    ("AF43", 0x26),
    ("EF", 0x2e),
];

/// The DSCP value of a class name, any case (`EF`, `af41`, `cs1`, `be`).
pub(crate) fn dscp_class(name: &str) -> Option<u8> {
    DSCP_CLASSES
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| *v)
}

/// Most intervals a masked comparison is expanded to (2^this); past it the
/// comparison is kept as a [`parapet_model::MaskedMatch`].
pub(crate) const MAX_MASK_BITS: u32 = 8;

/// `X & mask ==|!= value` on a field of `width` bits: added to `matches`
/// as intervals — one per setting of the mask's zero bits above its
/// lowest one bit — when there are at most 2^[`MAX_MASK_BITS`], else as a
/// masked comparison. A `value` with bits outside the mask never equals.
pub(crate) fn constrain_masked(
    matches: &mut parapet_model::Matches,
    field: parapet_model::Field,
    width: u32,
    mask: u128,
    value: u128,
    neg: bool,
) {
    let max = width_mask(width);
    let low = mask.trailing_zeros().min(width);
    let holes: Vec<u32> = (low..width).filter(|b| mask >> b & 1 == 0).collect();
    if value & !mask == 0 && holes.len() > MAX_MASK_BITS as usize {
        matches.constrain_masked(parapet_model::MaskedMatch {
            field,
            mask,
            value,
            negate: neg,
        });
        return;
    }
    let mut set = IntervalSet::empty();
    if value & !mask == 0 {
        let span = if low >= 128 {
            u128::MAX
        } else {
            (1u128 << low) - 1
        };
        for combo in 0u32..(1 << holes.len()) {
            let lo = holes
                .iter()
                .enumerate()
                .filter(|(i, _)| combo >> i & 1 == 1)
                .fold(value & mask, |acc, (_, &b)| acc | 1u128 << b);
            set = set.union(&IntervalSet::range(lo, (lo | span) & max));
        }
    }
    if neg {
        set = set.complement(max);
    }
    if !set.is_full(max) {
        matches.constrain(field, set);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_words_quote_like_a_shell() {
        let w = shell_words(r#"-A X -m comment --comment "a \"b\" c" 'd e' x"y"z"#).unwrap();
        let texts: Vec<&str> = w.iter().map(|w| w.text.as_str()).collect();
        assert_eq!(
            texts,
            [
                "-A",
                "X",
                "-m",
                "comment",
                "--comment",
                "a \"b\" c",
                "d e",
                "xyz"
            ]
        );
        assert_eq!(w[5].col, 27);
        assert!(w[5].quoted && !w[4].quoted);
        assert_eq!(shell_words("a 'b").unwrap_err().0, 3);
        assert_eq!(
            shell_words("x \"b").unwrap_err(),
            (3, "unterminated \"-quoted string".to_string())
        );
        // single quotes take a backslash literally, double quotes escape
        assert_eq!(shell_words(r#"'a\"'"#).unwrap()[0].text, r#"a\""#);
        assert_eq!(shell_words(r#""a\\b""#).unwrap()[0].text, r"a\b");
    }

    #[test]
    fn shell_quote_round_trips() {
        for s in ["plain", "with space", "q\"uote", "back\\slash", ""] {
            let w = shell_words(&shell_quote(s)).unwrap();
            assert_eq!(w.len(), 1, "{s}");
            assert_eq!(w[0].text, s);
        }
    }

    #[test]
    fn tcp_flag_masks_are_recovered() {
        for (mask, comp) in [(0x17u8, 0x02u8), (0xff, 0), (0, 0), (0x12, 0x10)] {
            let set = tcp_flags_set(mask, comp);
            let (m, c) = tcp_flags_mask(&set).unwrap();
            assert_eq!(tcp_flags_set(m, c), set);
        }
        // {1, 2} is not a mask/comp set.
        assert_eq!(tcp_flags_mask(&IntervalSet::range(1, 2)), None);
    }

    #[test]
    fn cidr_forms() {
        assert_eq!(
            parse_cidr("10.1.2.3/8", None).unwrap().1,
            IntervalSet::range(0x0a00_0000, 0x0aff_ffff)
        );
        assert_eq!(
            parse_cidr("10.0.0.0/255.255.255.0", None).unwrap().1,
            IntervalSet::range(0x0a00_0000, 0x0a00_00ff)
        );
        assert_eq!(
            parse_cidr("0.0.0.0/0.0.0.0", None).unwrap().1,
            IntervalSet::full(0xffff_ffff)
        );
        let (f, s) = parse_cidr("2001:db8::/ffff:ffff::", None).unwrap();
        assert_eq!(
            (f, s.to_prefixes(128)),
            (Family::V6, vec![(0x2001_0db8 << 96, 32)])
        );
        assert!(parse_cidr("1.2.3.4/33", None).is_err());
        assert!(parse_ip_range("1.2.3.9-1.2.3.1", None)
            .unwrap_err()
            .contains("empty"));
    }
}
