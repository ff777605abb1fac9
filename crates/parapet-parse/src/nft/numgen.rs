//! nft's `numgen inc mod N [offset O] [==|!=] V` (`nft_numgen.c`): a
//! counter per rule the kernel starts at N - 1 and moves on, modulo N, for
//! every packet reaching the expression, so packet i (from 0) gets
//! `i mod N + O`. Compared with one value, that is `-m statistic --mode nth
//! --every N --packet V-O` exactly (`!=`: its `!`), the model's
//! [`Statistic`]. Refused: `numgen random` (a 32-bit scale, not
//! xt_statistic's 31-bit threshold), values as sets, maps and verdict maps
//! (one rule would pick among several answers), a value the counter never
//! gives.

use super::lexer::{Res, Tok};
use super::rule::RuleParser;
use parapet_model::*;

impl RuleParser<'_> {
    /// After `numgen`: the expression and its comparison, into the rule's
    /// stateful condition.
    pub(super) fn numgen(&mut self) -> Res<()> {
        let kind = self.next_word("'inc' after numgen")?;
        match kind.word() {
            Some("inc") => {}
            Some("random") => return Err((kind.line, kind.col, "'numgen random' is not supported: it scales a 32-bit random word (reciprocal_scale), which is not -m statistic's 31-bit threshold; write -m statistic --mode random in iptables".into())),
            _ => return Err((kind.line, kind.col, format!("expected 'inc' after numgen, found '{}'", kind.show()))),
        }
        let m = self.next_word("'mod N' after numgen inc")?;
        if m.word() != Some("mod") {
            return Err((
                m.line,
                m.col,
                format!("expected 'mod N' after numgen inc, found '{}'", m.show()),
            ));
        }
        let every = self.number("the modulus N of numgen inc mod N")?;
        let every = match u32::try_from(every) {
            Ok(n) if n >= 1 => n,
            _ => return self.fail("numgen's modulus must be 1 to 2^32 - 1"),
        };
        let mut offset = 0u64;
        if self.peek_word() == Some("offset") {
            self.i += 1;
            offset = self.number("the offset of numgen")?;
        }
        let invert = match self.peek_word() {
            Some("==") => {
                self.i += 1;
                false
            }
            Some("!=") => {
                self.i += 1;
                true
            }
            _ => false,
        };
        if matches!(self.peek().map(|t| &t.tok), Some(Tok::Open))
            || matches!(self.peek_word(), Some("map" | "vmap"))
            || self.peek_word().is_some_and(|w| w.starts_with('@'))
        {
            return self.fail("numgen compared with a set, or into a map or verdict map, is not supported: parapet keeps numgen as one comparison per rule (-m statistic --mode nth); write one rule per value");
        }
        let value = self.number("the value numgen is compared with")?;
        let Some(packet) = value.checked_sub(offset).filter(|p| *p < every as u64) else {
            return self.fail(format!("numgen inc mod {every} offset {offset} gives {offset} to {}, never {value}: the comparison is constant", offset + every as u64 - 1));
        };
        self.rule.statistic = Some(Statistic {
            mode: StatisticMode::Nth {
                every,
                packet: packet as u32,
            },
            invert,
        });
        Ok(())
    }
}
