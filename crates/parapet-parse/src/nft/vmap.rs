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

/// One element of a verdict map, lowered.
pub(super) struct VmapEntry {
    pub(super) field: Field,
    pub(super) keys: IntervalSet,
    pub(super) action: Action,
    pub(super) jump: Option<JumpAt>,
}

/// The elements of a verdict map (its tokens between the braces, no
/// newlines), lowered: `key` reads one key with the using selector's value
/// syntax. Elements must be disjoint, as nft requires.
pub(super) fn entries(
    elements: &[Token],
    field: Field,
    key_set: impl Fn(&Token) -> Res<IntervalSet>,
) -> Res<Vec<VmapEntry>> {
    let mut entries: Vec<VmapEntry> = Vec::new();
    let mut seen = IntervalSet::empty();
    for el in elements
        .split(|t| t.tok == Tok::Comma)
        .filter(|e| !e.is_empty())
    {
        let colon = el.iter().position(|t| t.word() == Some(":"));
        let (Some(colon @ 1), Some(key)) = (colon, el.first()) else {
            let t = &el[0];
            return Err((
                t.line,
                t.col,
                "expected 'KEY : VERDICT' in the verdict map".into(),
            ));
        };
        let keys = key_set(key)?;
        if !seen.intersect(&keys).is_empty() {
            return Err((
                key.line,
                key.col,
                format!(
                    "verdict map element '{}' overlaps an earlier one",
                    key.show()
                ),
            ));
        }
        seen = seen.union(&keys);
        let (action, jump) = element_verdict(&el[colon + 1..], el[colon].clone())?;
        entries.push(VmapEntry {
            field,
            keys,
            action,
            jump,
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
