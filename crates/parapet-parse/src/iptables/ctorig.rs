//! xt_conntrack's `--ctproto`, `--ctorigdstport` and `--ctorigsrcport` (values and spellings
//! in [`crate::ctorig`]), and the rule-level check of what a packet
//! without a conntrack entry does with them.

use super::option_arg::OptionArg;
use super::rule::RuleParser;
use crate::common::parse_port_range;
use parapet_model::*;

/// xt_conntrack options parapet refuses, and why.
pub(super) const REFUSED_CT_OPTIONS: &[&str] = &[
    "--ctorigsrc",
    "--ctorigdst",
    "--ctreplsrc",
    "--ctrepldst",
    "--ctreplsrcport",
    "--ctrepldstport",
    "--ctstatus",
    "--ctexpire",
    "--ctdir",
];

impl RuleParser<'_> {
    /// `[!] --ctproto P`, `[!] --ctorigdstport P[:P]` or `[!] --ctorigsrcport P[:P]`.
    pub(super) fn ct_tuple_option(&mut self, arg: OptionArg<'_>) {
        let (opt, col, negated, v, vcol) = arg.parts();
        let (field, set) = if opt == "--ctproto" {
            match protocol_number(v) {
                // libxt_conntrack refuses it ("rule would never match protocol")
                Some(0) if negated.is_some() => {
                    return self.err(
                        vcol,
                        "'! --ctproto 0' is refused by iptables (the rule would never match)",
                    )
                }
                Some(p) => (Field::CtProto, IntervalSet::point(p as u128)),
                None => {
                    return self.err(
                        vcol,
                        format!("expected a protocol name or number after --ctproto, found '{v}'"),
                    )
                }
            }
        } else {
            match parse_port_range(v, ':') {
                Ok((lo, hi)) if opt == "--ctorigsrcport" => {
                    (Field::CtOrigSrcPort, IntervalSet::range(lo, hi))
                }
                Ok((lo, hi)) => (Field::CtOrigDstPort, IntervalSet::range(lo, hi)),
                Err(m) => return self.err(vcol, m),
            }
        };
        let set = if negated.is_some() {
            set.complement(field.max_value())
        } else {
            set
        };
        self.matches.constrain(field, set);
        self.ct_tuple.get_or_insert(col);
    }

    /// Once the rule is read: the options read the packet's conntrack
    /// entry, which a packet without one lacks. xt_conntrack then matches
    /// exactly when `--ctstate` was given and admits the packet's state
    /// (`conntrack_mt`), without reading the other options: no entry and
    /// no `--ctstate` never matches (the rule requires a tracked state);
    /// a `--ctstate` admitting INVALID or UNTRACKED is a second box.
    pub(super) fn check_ct_tuple(&mut self) {
        let Some(col) = self.ct_tuple else { return };
        match self.ctstate_no_entry {
            Some(true) => self.err(
                col,
                "--ctproto/--ctorigdstport/--ctorigsrcport with a --ctstate admitting INVALID or UNTRACKED is not supported: xt_conntrack matches those packets (no entry) without reading the other options, which is a second box; write two rules",
            ),
            Some(false) => {}
            None => self
                .matches
                .constrain(Field::CtState, crate::ctstatus::tracked()),
        }
    }
}
