//! nft's `ct status`: `ct status dnat`, `ct status snat,dnat` (any of the
//! bits, as nft compiles it: `status & bits != 0`) and `ct status & M ==|!=
//! V` (a masked compare); value sets in [`crate::ctstatus`].
//!
//! Refused: `ct status == X`, `!= X` and `{ … }`, which compare all 32
//! status bits (nft emits `cmp eq|neq` on the whole word), of which the
//! key carries six.

use super::lexer::{Res, Tok};
use super::rule::RuleParser;
use crate::ctstatus::{any_of, masked, tracked, BITS};
use parapet_model::*;

impl RuleParser<'_> {
    /// After `ct status`: the condition, into the rule's matches.
    pub(super) fn ct_status(&mut self) -> Res<()> {
        let set = if matches!(self.peek().map(|t| &t.tok), Some(Tok::Amp)) {
            self.i += 1;
            let mask = self.status_bits("a mask")?;
            let neg = match self.peek_word() {
                Some("!=") => true,
                Some("==") => false,
                _ => return self.fail("expected '==' or '!=' after the ct status mask"),
            };
            self.i += 1;
            let value = self.status_bits("a value")?;
            if value & !mask != 0 {
                return self.fail("the value has bits outside the mask: it never matches");
            }
            let set = masked(mask, value);
            if neg {
                set.complement(BITS as u128)
            } else {
                set
            }
        } else {
            match self.peek().map(|t| &t.tok) {
                Some(Tok::Word(w)) if w == "==" || w == "!=" => {
                    return self.fail("'ct status ==' and '!=' compare all 32 status bits, of which parapet knows six; write 'ct status & dnat == 0' or 'ct status dnat'")
                }
                Some(Tok::Open) => {
                    return self.fail("a set of ct status values compares all 32 status bits, of which parapet knows six; write 'ct status snat,dnat' (any of them)")
                }
                _ => {}
            }
            let mut bits = self.status_bits("a ct status")?;
            while matches!(self.peek().map(|t| &t.tok), Some(Tok::Comma)) {
                self.i += 1;
                bits |= self.status_bits("a ct status")?;
            }
            any_of(bits)
        };
        // nft_ct breaks (no match) on a packet without an entry.
        self.matches.constrain(Field::CtState, tracked());
        self.matches.constrain(Field::CtStatus, set);
        Ok(())
    }

    /// A status name, a number, or `( a | b … )`.
    fn status_bits(&mut self, what: &str) -> Res<u8> {
        if matches!(self.peek().map(|t| &t.tok), Some(Tok::LParen)) {
            self.i += 1;
            let mut bits = 0;
            loop {
                bits |= self.status_bits(what)?;
                match self.peek().map(|t| &t.tok) {
                    Some(Tok::Pipe) => self.i += 1,
                    Some(Tok::RParen) => {
                        self.i += 1;
                        return Ok(bits);
                    }
                    _ => return self.fail("expected '|' or ')' in the ct status bits"),
                }
            }
        }
        let t = self.next_word(what)?;
        let w = t.word().unwrap_or("");
        let number = match w.strip_prefix("0x") {
            Some(h) => u32::from_str_radix(h, 16).ok(),
            None => w.parse::<u32>().ok(),
        };
        if let Some(b) = ct_status::from_name(w) {
            return Ok(b);
        }
        match number {
            Some(n) if n <= BITS as u32 => Ok(n as u8),
            _ => Err((
                t.line,
                t.col,
                format!("expected a ct status parapet knows (expected, seen-reply, assured, confirmed, snat, dnat, or a number below 0x40), found '{}'", t.show()),
            )),
        }
    }
}
