//! `-m rt [!] --rt-type T [!] --rt-segsleft N[:M] [!] --rt-len L`
//! (ip6t_rt.c, ip6tables only): the first IPv6 routing header
//! `ipv6_find_hdr` finds, packed into `Field::Routing`
//! (`parapet_model::routing`). Without a routing header the match fails,
//! negated or not, which the packing's presence bit gives: every set built
//! here holds present headers only. `--rt-len` compares the header's
//! length in bytes (`ipv6_optlen`, `(hdrlen + 1) * 8`). The type 0
//! address checks (`--rt-0-res`, `--rt-0-addrs`, `--rt-0-not-strict`) read
//! the header's body, which the packed value does not hold: refused.

use super::option_arg::OptionArg;
use super::rule::RuleParser;
use parapet_model::routing::{self, Part};
use parapet_model::*;

/// The routing header match module.
pub(super) const RT_MATCHES: &[&str] = &["rt"];
/// Its options.
pub(super) const RT_OPTIONS: &[&str] = &[
    "--rt-type",
    "--rt-segsleft",
    "--rt-len",
    "--rt-0-res",
    "--rt-0-addrs",
    "--rt-0-not-strict",
];

/// A decimal `u32` (libxtables' `XTTYPE_UINT32`).
fn number(s: &str) -> Option<u32> {
    super::header::parse_number(s, u32::MAX)
}

impl RuleParser<'_> {
    /// `-m rt` at column `col`: ip6tables only; with no option it matches
    /// every packet that has a routing header.
    pub(super) fn rt_module(&mut self, col: u32) {
        if self.family == Family::V4 {
            return self.err(
                col,
                "iptables has no -m rt: the routing header is an IPv6 extension header (ip6tables -m rt)",
            );
        }
        self.matches.constrain(Field::Routing, routing::present());
    }

    /// One option of the last `-m rt`.
    pub(super) fn rt_option(&mut self, arg: OptionArg<'_>) {
        let (opt, col, negated, v, vcol) = arg.parts();
        let byte_max = routing::BYTE_MAX;
        let (part, bytes) = match opt {
            "--rt-0-res" | "--rt-0-addrs" | "--rt-0-not-strict" => {
                return self.err(
                    col,
                    format!("{opt} is not supported: it checks the addresses (or the reserved field) in the body of a type 0 routing header, which parapet's packet key does not hold (--rt-type, --rt-segsleft and --rt-len are supported)"),
                )
            }
            "--rt-type" => match number(v) {
                // the header's type is one byte: a larger one never equals it
                Some(t) => (Part::Type, IntervalSet::point(t as u128).intersect(&IntervalSet::full(byte_max))),
                None => return self.err(vcol, format!("expected a routing type 0-4294967295 after --rt-type, found '{v}'")),
            },
            "--rt-segsleft" => {
                let (a, b) = match v.split_once(':') {
                    Some((a, b)) => (
                        if a.is_empty() { Some(0) } else { number(a) },
                        if b.is_empty() { Some(u32::MAX) } else { number(b) },
                    ),
                    None => (number(v), number(v)),
                };
                let (Some(a), Some(b)) = (a, b) else {
                    return self.err(vcol, format!("expected a number N or a range N:M after --rt-segsleft, found '{v}'"));
                };
                // segsleft_match: min <= id <= max (a reversed range loads
                // and never matches)
                let set = if a <= b && a as u128 <= byte_max {
                    IntervalSet::range(a as u128, (b as u128).min(byte_max))
                } else {
                    IntervalSet::empty()
                };
                (Part::SegmentsLeft, set)
            }
            _ => match number(v) {
                Some(len) => (
                    Part::HdrLen,
                    routing::len_byte(len).map_or_else(IntervalSet::empty, |b| IntervalSet::point(b as u128)),
                ),
                None => return self.err(vcol, format!("expected a header length in bytes after --rt-len, found '{v}'")),
            },
        };
        let bytes = if negated.is_some() {
            bytes.complement(byte_max)
        } else {
            bytes
        };
        self.matches
            .constrain(Field::Routing, routing::values(part, &bytes));
    }
}
