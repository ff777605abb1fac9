//! xt_conntrack's `--ctproto`, `--ctorigdstport`, `--ctorigsrcport` and
//! the tuples' addresses `--ctorigsrc`, `--ctorigdst`, `--ctreplsrc`,
//! `--ctrepldst` (values and spellings in [`crate::ctorig`]), and the
//! rule-level check of what a packet without a conntrack entry does with
//! them.

use super::option_arg::OptionArg;
use super::rule::RuleParser;
use crate::common::{parse_cidr, parse_port_range};
use parapet_model::*;

/// xt_conntrack options parapet refuses, and why.
pub(super) const REFUSED_CT_OPTIONS: &[&str] = &[
    "--ctreplsrcport",
    "--ctrepldstport",
    "--ctstatus",
    "--ctexpire",
    "--ctdir",
];

impl RuleParser<'_> {
    /// `[!] --ctproto P`, `[!] --ctorigdstport P[:P]`, `[!]
    /// --ctorigsrcport P[:P]` or `[!] --ctorigsrc|--ctorigdst|--ctreplsrc|
    /// --ctrepldst ADDR[/MASK]` (one address of the table's family, as
    /// libxt_conntrack's host/mask option reads it; xt_conntrack compares
    /// `(entry ^ addr) & mask`, the prefix here).
    pub(super) fn ct_tuple_option(&mut self, arg: OptionArg<'_>) {
        let (opt, col, negated, v, vcol) = arg.parts();
        let addr_field = match opt {
            "--ctorigsrc" => Some(Field::CtOrigSrc),
            "--ctorigdst" => Some(Field::CtOrigDst),
            "--ctreplsrc" => Some(Field::CtReplSrc),
            "--ctrepldst" => Some(Field::CtReplDst),
            _ => None,
        };
        let (field, set) = if let Some(f) = addr_field {
            match parse_cidr(v, Some(self.family)) {
                Ok((_, set)) => (f, set),
                Err(m) => return self.err(vcol, format!("{opt}: {m}")),
            }
        } else if opt == "--ctproto" {
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
        // An address's complement stays within the family's width.
        let max = if field.is_address() {
            width_mask(self.family.addr_bits())
        } else {
            field.max_value()
        };
        let set = if negated.is_some() {
            set.complement(max)
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
                "--ctproto/--ctorigdstport/--ctorigsrcport/--ctorigsrc/--ctorigdst/--ctreplsrc/--ctrepldst with a --ctstate admitting INVALID or UNTRACKED is not supported: xt_conntrack matches those packets (no entry) without reading the other options, which is a second box; write two rules",
            ),
            Some(false) => {}
            None => self
                .matches
                .constrain(Field::CtState, crate::ctstatus::tracked()),
        }
    }
}
