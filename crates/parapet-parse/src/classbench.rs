//! The ClassBench filter frontend.
//!
//! `@SRC/LEN DST/LEN LO : HI LO : HI PROTO/MASK [FLAGS/MASK]`, one filter per
//! line, first match wins. Every filter becomes an ACCEPT rule of
//! `filter/INPUT` (policy DROP), id = its position; the flags column is
//! parsed and ignored (5-tuple semantics, as the literature uses).

use crate::common::*;
use crate::error::{Errors, ParseError};
use parapet_model::*;

/// Parses ClassBench filters into a one-chain ruleset.
pub(crate) fn parse(text: &str, file: &str) -> Result<Ruleset, Vec<ParseError>> {
    let mut errs = Errors::new(file);
    let mut rules = Vec::new();
    for (idx, line) in text.lines().enumerate() {
        let ln = idx as u32 + 1;
        if line.trim().is_empty() {
            continue;
        }
        match parse_line(line) {
            Ok(matches) => {
                let mut r = Rule::new(
                    rules.len() as u32 + 1,
                    matches,
                    Action::Verdict(Verdict::Accept),
                );
                r.origin = Origin { line: ln };
                rules.push(r);
            }
            Err((col, msg)) => errs.push(ln, col, msg),
        }
    }
    let rs = Ruleset {
        tables: vec![Table {
            name: "filter".into(),
            family: TableFamily::Ip,
            chains: vec![Chain {
                name: "INPUT".into(),
                base: Some(BaseChain {
                    hook: Hook::Input,
                    priority: 0,
                    policy: Verdict::Drop,
                    counters: Counters::default(),
                }),
                rules,
            }],
        }],
        set_refs: Vec::new(),
        left_to_kernel: Vec::new(),
    };
    errs.finish(rs)
}

/// Splits on whitespace, remembering 1-based columns.
fn fields(line: &str) -> Vec<(u32, &str)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in line.char_indices() {
        match (c.is_whitespace(), start) {
            (true, Some(s)) => {
                out.push((s as u32 + 1, &line[s..i]));
                start = None;
            }
            (false, None) => start = Some(i),
            _ => {}
        }
    }
    if let Some(s) = start {
        out.push((s as u32 + 1, &line[s..]));
    }
    out
}

fn parse_line(line: &str) -> Result<Matches, (u32, String)> {
    let f = fields(line);
    let end = line.chars().count() as u32 + 1;
    let at = |i: usize| f.get(i).map_or(end, |x| x.0);
    let mut m = Matches::any();
    m.constrain(Field::Family, IntervalSet::point(4));
    let first = f
        .first()
        .ok_or((1, "expected a filter line '@SRC/LEN …'".to_string()))?;
    let Some(src) = first.1.strip_prefix('@') else {
        return Err((
            first.0,
            format!("expected '@' and a source prefix, found '{}'", first.1),
        ));
    };
    let src = parse_cidr(src, Some(Family::V4))
        .map_err(|e| (first.0 + 1, e))?
        .1;
    m.constrain(Field::SrcAddr, src);
    let dst = f
        .get(1)
        .ok_or((at(1), "expected a destination prefix".to_string()))?;
    m.constrain(
        Field::DstAddr,
        parse_cidr(dst.1, Some(Family::V4))
            .map_err(|e| (dst.0, e))?
            .1,
    );
    // Port ranges are three words each: LO ':' HI.
    for (k, field) in [(2usize, Field::SrcPort), (5, Field::DstPort)] {
        let word = |i: usize, what: &str| -> Result<&str, (u32, String)> {
            f.get(i)
                .map(|x| x.1)
                .ok_or((at(i), format!("expected {what}")))
        };
        let lo = word(k, "a port range 'LO : HI'")?;
        let lo = parse_port(lo).map_err(|e| (at(k), e))?;
        if word(k + 1, "':' in the port range")? != ":" {
            return Err((
                at(k + 1),
                format!("expected ':' between the ports, found '{}'", f[k + 1].1),
            ));
        }
        let hi = parse_port(word(k + 2, "the upper port")?).map_err(|e| (at(k + 2), e))?;
        if lo > hi {
            return Err((
                at(k),
                format!("port range {lo} : {hi} is empty (start after end)"),
            ));
        }
        m.constrain(field, IntervalSet::range(lo, hi));
    }
    let proto = f.get(8).ok_or((
        at(8),
        "expected a protocol VALUE/MASK like 0x06/0xFF".to_string(),
    ))?;
    let (value, mask) = parse_value_mask(proto.1, 0xff).ok_or((
        proto.0,
        format!(
            "expected a protocol VALUE/MASK like 0x06/0xFF, found '{}'",
            proto.1
        ),
    ))?;
    m.constrain(Field::Proto, masked_byte_set(value as u8, mask as u8));
    if let Some(flags) = f.get(9) {
        // Parsed so a malformed file is caught, then ignored (5-tuple semantics).
        parse_value_mask(flags.1, 0xffff).ok_or((
            flags.0,
            format!(
                "expected TCP flags VALUE/MASK like 0x1000/0x1000, found '{}'",
                flags.1
            ),
        ))?;
    }
    if let Some(extra) = f.get(10) {
        return Err((
            extra.0,
            format!("expected the end of the filter, found '{}'", extra.1),
        ));
    }
    Ok(m)
}

fn parse_value_mask(s: &str, max: u32) -> Option<(u32, u32)> {
    let (v, m) = s.split_once('/')?;
    let num = |x: &str| -> Option<u32> {
        let n = match x.strip_prefix("0x").or_else(|| x.strip_prefix("0X")) {
            Some(h) => u32::from_str_radix(h, 16).ok()?,
            None => x.parse().ok()?,
        };
        (n <= max).then_some(n)
    };
    Some((num(v)?, num(m)?))
}
