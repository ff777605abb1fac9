//! The IP header matches: `-m ttl` (IPv4), `-m hl` (IPv6), `-m length`,
//! `-m dscp`, with the kernel's semantics (xt_hl.c, xt_length.c,
//! xt_dscp.c).

use super::option_arg::OptionArg;
use super::rule::RuleParser;
use crate::common::dscp_class;
use parapet_model::*;

/// The header match modules this file reads.
pub(super) const HEADER_MATCHES: &[&str] = &["ttl", "hl", "length", "dscp"];

/// Which header module provides an option.
pub(super) fn header_option_module(opt: &str) -> Option<&'static [&'static str]> {
    Some(match opt {
        "--ttl-eq" | "--ttl-lt" | "--ttl-gt" => &["ttl"],
        "--hl-eq" | "--hl-lt" | "--hl-gt" => &["hl"],
        "--length" => &["length"],
        "--dscp" | "--dscp-class" => &["dscp"],
        _ => return None,
    })
}

/// A decimal or `0x` hexadecimal number no larger than `max`.
pub(crate) fn parse_number(s: &str, max: u32) -> Option<u32> {
    let v = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u32::from_str_radix(hex, 16).ok()?,
        None => s.parse().ok()?,
    };
    (v <= max).then_some(v)
}

impl RuleParser<'_> {
    /// Whether `-m NAME` is allowed in this family (iptables has `ttl`,
    /// ip6tables `hl`); an error message when not.
    pub(super) fn header_module_family(&self, n: &str) -> Option<String> {
        match (n, self.family) {
            ("ttl", Family::V6) => Some(
                "ip6tables has no -m ttl: the IPv6 hop limit is -m hl --hl-eq/--hl-lt/--hl-gt"
                    .into(),
            ),
            ("hl", Family::V4) => Some(
                "iptables has no -m hl: the IPv4 TTL is -m ttl --ttl-eq/--ttl-lt/--ttl-gt".into(),
            ),
            _ => None,
        }
    }

    /// One option of a header match. `vals` holds its one value.
    pub(super) fn header_option(&mut self, arg: OptionArg<'_>) {
        let (opt, col, negated, v, vcol) = arg.parts();
        // Each of these modules takes exactly one option per -m, as
        // iptables' parsers enforce (two need two -m).
        self.module_options += 1;
        if self.module_options > 1 {
            return self.err(col, format!("{opt}: this -m takes one option (iptables refuses a second; write another -m for it)"));
        }
        match opt {
            "--ttl-eq" | "--ttl-lt" | "--ttl-gt" | "--hl-eq" | "--hl-lt" | "--hl-gt" => {
                let Some(n) = parse_number(v, 255) else {
                    return self.err(
                        vcol,
                        format!("expected a number 0-255 after {opt}, found '{v}'"),
                    );
                };
                let n = n as u128;
                let set = match &opt[opt.len() - 2..] {
                    "eq" => IntervalSet::point(n),
                    "lt" if n == 0 => IntervalSet::empty(),
                    "lt" => IntervalSet::range(0, n - 1),
                    _ if n == 255 => IntervalSet::empty(),
                    _ => IntervalSet::range(n + 1, 255),
                };
                if negated.is_some() && !opt.ends_with("eq") {
                    let eq = opt.replace("lt", "eq").replace("gt", "eq");
                    return self.err(
                        negated.unwrap_or(col),
                        format!("'!' cannot negate {opt} (iptables allows it only for {eq})"),
                    );
                }
                self.constrain_exact(Field::Ttl, set, negated, 0xff);
            }
            "--length" => {
                let range = match v.split_once(':') {
                    Some((lo, hi)) => {
                        let lo = if lo.is_empty() {
                            Some(0)
                        } else {
                            parse_number(lo, 0xffff)
                        };
                        let hi = if hi.is_empty() {
                            Some(0xffff)
                        } else {
                            parse_number(hi, 0xffff)
                        };
                        lo.zip(hi)
                    }
                    None => parse_number(v, 0xffff).map(|n| (n, n)),
                };
                let Some((lo, hi)) = range else {
                    return self.err(
                        vcol,
                        format!("expected a length or range like 64:1500 (0-65535), found '{v}'"),
                    );
                };
                // xt_length compares the 16-bit header length: a reversed
                // range matches nothing, as in the kernel.
                let set = if lo > hi {
                    IntervalSet::empty()
                } else {
                    IntervalSet::range(lo as u128, hi as u128)
                };
                // Negation inside the 16-bit lengths the header can state.
                let set = match negated {
                    Some(_) => set.complement(0xffff),
                    None => set,
                };
                self.constrain_exact(Field::Length, set, None, 0xffff_ffff);
            }
            "--dscp" | "--dscp-class" => {
                let value = if opt == "--dscp" {
                    parse_number(v, 0x3f)
                } else {
                    dscp_class(v).map(u32::from)
                };
                let Some(d) = value else {
                    let what = if opt == "--dscp" {
                        "a DSCP value 0-63 (decimal or 0x hex)".to_string()
                    } else {
                        "a DSCP class (CS0-CS7, BE, AF11-AF43, EF)".to_string()
                    };
                    return self.err(vcol, format!("expected {what}, found '{v}'"));
                };
                self.constrain_exact(Field::Dscp, IntervalSet::point(d as u128), negated, 0x3f);
            }
            _ => unreachable!("not a header option: {opt}"),
        }
    }

    /// Constrains `field` to `set` (complemented within `max` when
    /// negated), keeping an empty set: a match no packet passes.
    fn constrain_exact(&mut self, field: Field, set: IntervalSet, negated: Option<u32>, max: u128) {
        let set = match negated {
            Some(_) => set.complement(max),
            None => set,
        };
        self.matches.constrain(field, set);
    }
}
