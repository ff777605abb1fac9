//! Verdict maps: `KEY vmap { k : verdict, … }` and named `map NAME { type
//! K : verdict; elements = { … } }` used as `KEY vmap @NAME`. A vmap rule
//! lowers to one model rule per element, in order, each with the rule's
//! other conditions plus KEY in the element and the element's verdict; a
//! key in no element matches none of them, so evaluation goes on with the
//! next rule, as in nft.

use super::lexer::{Res, Tok, Token};
use super::matches::Kind;
use super::rule::{JumpAt, RuleParser};
use super::table::{word_text, Parser};
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

impl Parser {
    /// After `map` in table `ti`: `NAME { type K : V; flags …; elements =
    /// { … } }`.
    pub(super) fn map_block(&mut self, ti: usize) -> Res<()> {
        let name = word_text(&self.expect_word("a map name")?);
        self.expect(Tok::Open, "'{' after the map name")?;
        let t = &self.rs.tables[ti];
        let mut map = NamedMap {
            table: (t.family, t.name.clone()),
            name,
            verdict: false,
            elements: Vec::new(),
        };
        loop {
            self.skip_separators();
            let Some(t) = self.peek().cloned() else {
                return self.fail(format!("expected '}}' closing map '{}'", map.name));
            };
            self.pos += 1;
            match (&t.tok, t.word()) {
                (Tok::Close, _) => break,
                (_, Some("type" | "typeof")) => {
                    let start = self.pos;
                    self.skip_line();
                    let ty: Vec<&str> = self.toks[start..self.pos]
                        .iter()
                        .filter_map(|t| t.word())
                        .collect();
                    map.verdict = ty.ends_with(&[":", "verdict"]);
                }
                (_, Some("elements")) => {
                    let eq = self.expect_word("'='")?;
                    if eq.word() != Some("=") {
                        return Err((
                            eq.line,
                            eq.col,
                            format!("expected '=', found '{}'", eq.show()),
                        ));
                    }
                    self.expect(Tok::Open, "'{' after 'elements ='")?;
                    let start = self.pos;
                    let close = self.skip_block();
                    map.elements = self.toks[start..close]
                        .iter()
                        .filter(|t| t.tok != Tok::Newline)
                        .cloned()
                        .collect();
                }
                (
                    _,
                    Some(
                        "flags" | "comment" | "size" | "policy" | "counter" | "timeout"
                        | "gc-interval",
                    ),
                ) => self.skip_line(),
                _ => {
                    return Err((
                        t.line,
                        t.col,
                        format!(
                            "expected 'type', 'flags', 'elements' or '}}' in map '{}', found '{}'",
                            map.name,
                            t.show()
                        ),
                    ))
                }
            }
        }
        self.maps
            .retain(|m| !(m.table == map.table && m.name == map.name));
        self.maps.push(map);
        Ok(())
    }
}

impl RuleParser<'_> {
    /// After `KEY vmap`: an anonymous map `{ … }` or `@NAME`. Nothing but a
    /// comment may follow (the map is the rule's verdict).
    pub(super) fn vmap(&mut self, field: Field, kind: Kind) -> Res<()> {
        let elements: Vec<Token> = match self.peek().map(|t| t.tok.clone()) {
            Some(Tok::Open) => {
                self.i += 1;
                let start = self.i;
                let mut depth = 1;
                while let Some(t) = self.peek() {
                    match t.tok {
                        Tok::Open => depth += 1,
                        Tok::Close => depth -= 1,
                        _ => {}
                    }
                    self.i += 1;
                    if depth == 0 {
                        break;
                    }
                }
                if depth != 0 {
                    return self.fail("expected '}' closing the verdict map");
                }
                self.toks[start..self.i - 1].to_vec()
            }
            Some(Tok::Word(w)) if w.starts_with('@') => {
                let name = &w[1..];
                let Some(map) = self.maps.iter().find(|m| m.name == name) else {
                    return self.fail(format!("no map '{name}' in this table (a 'map {name} {{ … }}' must come before its use)"));
                };
                if !map.verdict {
                    return self.fail(format!(
                        "map '{name}' is not a verdict map ('type … : verdict')"
                    ));
                }
                self.i += 1;
                map.elements.clone()
            }
            _ => return self.fail("expected '{ KEY : VERDICT, … }' or '@MAP' after 'vmap'"),
        };
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
            let keys = self.element(kind, key)?;
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
        self.vmap = Some(entries);
        self.action = Some(Action::Count);
        Ok(())
    }
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
