//! nft's `fib` expression: `fib saddr|daddr type` (address types,
//! [`crate::addrtype`]) and the reverse-path lookups `fib saddr . iif oif
//! missing|exists` and `fib saddr oif missing|exists`
//! ([`parapet_model::rev_path`]), with the kernel's semantics
//! (nft_fib_ipv4.c, nft_fib_ipv6.c).

use super::lexer::Res;
use super::matches::Kind;
use super::rule::RuleParser;
use parapet_model::*;

impl RuleParser<'_> {
    /// After `fib`: the field it reads and how its values read. Refused:
    /// a lookup with `. mark` (the mark's policy routes), `. oif`, a
    /// daddr lookup's interface and `oifname` (an interface name parapet's
    /// rev-path outcome does not keep).
    pub(super) fn fib_head(&mut self) -> Res<(Field, Kind)> {
        let t = self.next_word("saddr or daddr")?;
        let field = match t.word() {
            Some("saddr") => Field::SrcType,
            Some("daddr") => Field::DstType,
            _ => {
                return Err((
                    t.line,
                    t.col,
                    format!("expected saddr or daddr after fib, found '{}'", t.show()),
                ))
            }
        };
        let mut iif = false;
        while self.peek_word() == Some(".") {
            self.i += 1;
            let k = self.next_word("iif, oif or mark")?;
            match k.word() {
                Some("iif") => iif = true,
                Some("mark") => return Err((k.line, k.col, "a fib lookup with '. mark' is not supported: the mark selects policy routes (ip rule fwmark) that parapet's reverse-path outcome does not model; 'fib saddr . iif oif missing' without the mark is; keep the rule in nftables".into())),
                _ => return Err((k.line, k.col, format!("'fib {} . {}' is not supported (supported: fib saddr . iif oif missing|exists, fib saddr oif missing|exists, fib saddr|daddr type T)", if field == Field::SrcType { "saddr" } else { "daddr" }, k.show()))),
            }
        }
        let r = self.next_word("type or oif")?;
        match r.word() {
            Some("type") if !iif => Ok((field, Kind::AddrType)),
            Some("type") => Err((r.line, r.col, "'fib … . iif type' is not supported: it types the address by one interface's routes, which parapet's address types (the host's addresses, whatever the interface) do not model; keep the rule in nftables".into())),
            Some("oif") if field == Field::SrcType => Ok((Field::RevPath, Kind::RevPath(iif))),
            Some("oif") => Err((r.line, r.col, "'fib daddr oif' (the route's output interface for the destination) is not supported: parapet has no forward route lookup; 'fib saddr . iif oif missing' (reverse path) is; keep the rule in nftables".into())),
            Some("oifname") => Err((r.line, r.col, "'fib … oifname' is not supported: parapet keeps whether the route back leaves through the input interface, not its name; write 'fib saddr . iif oif missing|exists'".into())),
            _ => Err((r.line, r.col, format!("expected 'type' or 'oif' after fib {}, found '{}'", if field == Field::SrcType { "saddr" } else { "daddr" }, r.show()))),
        }
    }
}

/// The value after `fib saddr [. iif] oif`: `missing` (no route back, or
/// one that does not leave through the input interface with `. iif`) or
/// `exists`; `0` is nft's other spelling of missing (no interface).
pub(super) fn rev_path_value(iif: bool, text: &str) -> Result<IntervalSet, String> {
    let missing = rev_path::missing(iif);
    match text {
        "missing" | "0" => Ok(missing),
        "exists" => Ok(missing.complement(rev_path::MAX as u128)),
        _ => Err(format!(
            "expected missing or exists after 'fib saddr{} oif', found '{text}' (an interface index other than 0 or a name is not supported)",
            if iif { " . iif" } else { "" }
        )),
    }
}
