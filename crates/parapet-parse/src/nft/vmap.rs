//! Verdict maps: `KEY vmap { k : verdict, … }` and named `map NAME { type
//! K : verdict; elements = { … } }` used as `KEY vmap @NAME`. A vmap rule
//! lowers to one model rule per element, in order, each with the rule's
//! other conditions plus KEY in the element and the element's verdict; a
//! key in no element matches none of them, so evaluation goes on with the
//! next rule, as in nft.

use super::lexer::{word_text, JumpAt, Res, Tok, Token};
use parapet_model::*;

/// A `map` block, kept as tokens: its elements are read where it is used,
/// with the using selector's value syntax.
pub(super) struct NamedMap {
    pub(super) table: (TableFamily, String),
    pub(super) name: String,
    /// `type … : verdict` (other maps feed NAT and are not filter input).
    pub(super) verdict: bool,
    pub(super) elements: Vec<Token>,
}

/// One element of a verdict map or of an anonymous concatenated set,
/// lowered: the box of its key (one interval set per key part).
pub(super) struct VmapEntry {
    pub(super) key: Vec<(Field, IntervalSet)>,
    /// The element's verdict; `None` for a set element (the rule's own
    /// action applies).
    pub(super) action: Option<Action>,
    pub(super) jump: Option<JumpAt>,
    /// The limit object an element of `limit name KEY map { … }` names
    /// (`nft/objref.rs`); `None` otherwise.
    pub(super) limit: Option<Limit>,
}

/// The elements of a verdict map or a set (its tokens between the braces,
/// no newlines), lowered: `key_set` reads one key part with the using
/// selector's value syntax (its kind `K`); a concatenated key is `a . b`. Elements must be
/// disjoint, as nft requires, so at most one of a rule's lowered rules
/// matches a packet (a jump or a log happens once, as in nft).
pub(super) fn entries<K: Copy>(
    elements: &[Token],
    keys: &[(Field, K)],
    verdicts: bool,
    key_set: impl Fn(K, &Token) -> Res<IntervalSet>,
) -> Res<Vec<VmapEntry>> {
    let mut entries: Vec<VmapEntry> = Vec::new();
    for el in elements
        .split(|t| t.tok == Tok::Comma)
        .filter(|e| !e.is_empty())
    {
        let first = &el[0];
        let (key_toks, verdict) = if verdicts {
            match el.iter().position(|t| t.word() == Some(":")) {
                Some(colon) if colon > 0 => (&el[..colon], Some((&el[colon + 1..], &el[colon]))),
                _ => {
                    return Err((
                        first.line,
                        first.col,
                        "expected 'KEY : VERDICT' in the verdict map".into(),
                    ))
                }
            }
        } else {
            (el, None)
        };
        let parts: Vec<&[Token]> = key_toks.split(|t| t.word() == Some(".")).collect();
        if parts.len() != keys.len() || parts.iter().any(|p| p.len() != 1) {
            return Err((
                first.line,
                first.col,
                format!(
                    "expected an element of {} part{} ('a . b'), found '{}'",
                    keys.len(),
                    if keys.len() == 1 { "" } else { "s" },
                    key_toks
                        .iter()
                        .map(Token::show)
                        .collect::<Vec<_>>()
                        .join(" ")
                ),
            ));
        }
        let mut key = Vec::new();
        for ((field, kind), part) in keys.iter().zip(&parts) {
            key.push((*field, key_set(*kind, &part[0])?));
        }
        let overlaps = entries.iter().any(|e| {
            e.key
                .iter()
                .zip(&key)
                .all(|((_, a), (_, b))| !a.intersect(b).is_empty())
        });
        if overlaps {
            return Err((
                first.line,
                first.col,
                format!(
                    "{}element '{}' overlaps an earlier one",
                    if verdicts { "verdict map " } else { "set " },
                    key_toks
                        .iter()
                        .map(Token::show)
                        .collect::<Vec<_>>()
                        .join(" ")
                ),
            ));
        }
        let (action, jump) = match verdict {
            Some((toks, colon)) => {
                let (a, j) = element_verdict(toks, colon.clone())?;
                (Some(a), j)
            }
            None => (None, None),
        };
        entries.push(VmapEntry {
            key,
            action,
            jump,
            limit: None,
        });
    }
    Ok(entries)
}

/// `accept`, `drop`, `return`, `continue`, `jump C` or `goto C`.
fn element_verdict(toks: &[Token], colon: Token) -> Res<(Action, Option<JumpAt>)> {
    let bad = |t: &Token| {
        Err((t.line, t.col, format!("expected a verdict (accept, drop, return, continue, jump CHAIN, goto CHAIN), found '{}'", t.show())))
    };
    let Some(v) = toks.first() else {
        return bad(&colon);
    };
    let action = match (v.word(), toks.len()) {
        (Some("accept"), 1) => Action::Verdict(Verdict::Accept),
        (Some("drop"), 1) => Action::Verdict(Verdict::Drop),
        (Some("return"), 1) => Action::Return,
        (Some("continue"), 1) => Action::Count,
        (Some(j @ ("jump" | "goto")), 2) => {
            let t = &toks[1];
            let name = word_text(t);
            let jump = Some((name.clone(), t.line, t.col));
            let a = if j == "jump" {
                Action::Jump(name)
            } else {
                Action::Goto(name)
            };
            return Ok((a, jump));
        }
        _ => return bad(v),
    };
    Ok((action, None))
}
