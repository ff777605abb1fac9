//! `-m string` (`Matches::payload`) in the listings: iptables-save's
//! spelling (libxt_string's `save`: `--string "…"` when every byte is
//! printable, else `--hex-string "|…|"`, then `--algo`, `--from` and `--to`
//! when not the defaults, `--icase`); nft has no string match.

use super::spelling::{rerr, RenderError};
use parapet_model::Rule;
use std::fmt::Write;

/// Writes each `-m string` of the rule.
pub(super) fn iptables(out: &mut String, r: &Rule) {
    for m in r.matches.payload() {
        let not = if m.invert { "! " } else { "" };
        let printable = m.pattern.iter().all(|b| (0x20..=0x7e).contains(b));
        let _ = write!(out, " -m string {not}");
        if printable {
            out.push_str("--string \"");
            for &b in &m.pattern {
                if b == b'"' || b == b'\\' {
                    out.push('\\');
                }
                out.push(b as char);
            }
            out.push('"');
        } else {
            out.push_str("--hex-string \"|");
            for b in &m.pattern {
                let _ = write!(out, "{b:02x}");
            }
            out.push_str("|\"");
        }
        let _ = write!(out, " --algo {}", m.algo.name());
        if m.from != 0 {
            let _ = write!(out, " --from {}", m.from);
        }
        if m.to != u16::MAX {
            let _ = write!(out, " --to {}", m.to);
        }
        if m.icase {
            out.push_str(" --icase");
        }
    }
}

/// nft has no match on a packet's bytes beyond fixed offsets: a rule with
/// `-m string` is refused.
pub(super) fn nft_refusal(r: &Rule) -> Result<(), RenderError> {
    if r.matches.has_payload() {
        return Err(rerr(
            r.id,
            "-m string has no nft spelling (nft has no search in a packet's bytes): list it as iptables",
        ));
    }
    Ok(())
}
