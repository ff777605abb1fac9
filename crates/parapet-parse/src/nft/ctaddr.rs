//! nft's `ct original|reply [ip|ip6] saddr|daddr`: which family the
//! conntrack entry's address is read in (the fields and their meaning:
//! `crate::ctorig`).

use super::lexer::Res;
use super::rule::RuleParser;
use parapet_model::*;

impl RuleParser<'_> {
    /// The family of `ct original|reply [ip|ip6] saddr|daddr`: the one
    /// written, else the table's (nft asks for it in an inet table).
    pub(super) fn ct_addr_family(
        &self,
        written: Option<Family>,
        dir: &str,
        key: &str,
        (l, c): (u32, u32),
    ) -> Res<Family> {
        let table = match self.family {
            TableFamily::Ip => Some(Family::V4),
            TableFamily::Ip6 => Some(Family::V6),
            TableFamily::Inet => None,
        };
        match (written, table) {
            (Some(w), Some(t)) if w != t => Err((
                l,
                c,
                format!(
                    "'ct {dir} {} {key}' cannot appear in a {} table",
                    if w == Family::V4 { "ip" } else { "ip6" },
                    self.family.nft_name()
                ),
            )),
            (Some(f), _) | (None, Some(f)) => Ok(f),
            (None, None) => Err((
                l,
                c,
                format!("'ct {dir} {key}' in an inet table needs the family: write 'ct {dir} ip {key}' or 'ct {dir} ip6 {key}'"),
            )),
        }
    }
}
