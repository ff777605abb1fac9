//! `-m mark [!] --mark V[/M]` and `-m connmark [!] --mark V[/M]`
//! (xt_mark.c: `(mark & M) == V` xor the `!`; M defaults to 0xffffffff).
//! A mask with few zero bits above its lowest one bit becomes intervals,
//! others a masked comparison (`common::constrain_masked`).

use super::header::parse_number;
use super::option_arg::OptionArg;
use super::rule::RuleParser;
use parapet_model::*;

/// The mark match modules.
pub(super) const MARK_MATCHES: &[&str] = &["mark", "connmark"];

impl RuleParser<'_> {
    /// `--mark V[/M]` of the last `-m mark` or `-m connmark`.
    pub(super) fn mark_option(&mut self, arg: OptionArg<'_>) {
        let (_, col, negated, v, vcol) = arg.parts();
        self.module_options += 1;
        if self.module_options > 1 {
            return self.err(
                col,
                "--mark: this -m takes one --mark (write another -m for a second)",
            );
        }
        let field = match self
            .modules
            .iter()
            .rev()
            .find(|m| MARK_MATCHES.contains(&m.as_str()))
        {
            Some(m) if m == "connmark" => Field::CtMark,
            _ => Field::Mark,
        };
        let (value, mask) = match v.split_once('/') {
            Some((a, b)) => (parse_number(a, u32::MAX), parse_number(b, u32::MAX)),
            None => (parse_number(v, u32::MAX), Some(u32::MAX)),
        };
        let (Some(value), Some(mask)) = (value, mask) else {
            return self.err(
                vcol,
                format!("expected --mark VALUE[/MASK] (numbers up to 0xffffffff), found '{v}'"),
            );
        };
        // xt_mark compares the masked mark with the value as given, so a
        // value with bits outside the mask never matches: kept so.
        crate::common::constrain_masked(
            &mut self.matches,
            field,
            32,
            mask as u128,
            value as u128,
            negated.is_some(),
        );
    }
}
