//! nft structure: `table FAMILY NAME { … }`, chains, base chain headers
//! (`type filter hook … priority …; policy …;`), raw `set` blocks, and the
//! jump check once a table is complete.

use super::lexer::{Res, Tok, Token};
use super::rule::{JumpAt, RuleParser};
use crate::common::*;
use crate::error::Errors;
use crate::SetBlock;
use parapet_model::*;

/// The whole file: tokens, a cursor, and what has been parsed so far.
pub(super) struct Parser<'a> {
    pub(super) text: &'a str,
    pub(super) toks: Vec<Token>,
    pub(super) pos: usize,
    pub(super) errs: Errors,
    pub(super) rs: Ruleset,
    pub(super) sets: Vec<SetBlock>,
    pub(super) next_id: u32,
}

/// A jump or goto to check once the table is complete.
struct Jump {
    chain: usize,
    target: String,
    line: u32,
    col: u32,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Token> {
        self.toks.get(self.pos)
    }

    /// Position for an error at the current token (or the end of input).
    fn here(&self) -> (u32, u32) {
        match self.peek() {
            Some(t) => (t.line, t.col),
            None => self
                .toks
                .last()
                .map_or((1, 1), |t| (t.line, t.col + (t.end - t.start) as u32)),
        }
    }

    fn fail<T>(&self, msg: impl Into<String>) -> Res<T> {
        let (l, c) = self.here();
        Err((l, c, msg.into()))
    }

    fn skip_separators(&mut self) {
        while matches!(self.peek().map(|t| &t.tok), Some(Tok::Newline | Tok::Semi)) {
            self.pos += 1;
        }
    }

    fn expect_word(&mut self, what: &str) -> Res<Token> {
        match self.peek() {
            Some(t) if matches!(t.tok, Tok::Word(_) | Tok::Str(_)) => {
                let t = t.clone();
                self.pos += 1;
                Ok(t)
            }
            Some(t) => self.fail(format!("expected {what}, found '{}'", t.show())),
            None => self.fail(format!("expected {what}, found the end of the file")),
        }
    }

    fn expect(&mut self, tok: Tok, what: &str) -> Res<()> {
        match self.peek() {
            Some(t) if t.tok == tok => {
                self.pos += 1;
                Ok(())
            }
            Some(t) => self.fail(format!("expected {what}, found '{}'", t.show())),
            None => self.fail(format!("expected {what}, found the end of the file")),
        }
    }

    /// Skips to the token after the `}` closing the block whose `{` was
    /// just consumed. Returns the index of that `}` token.
    fn skip_block(&mut self) -> usize {
        let mut depth = 1;
        while let Some(t) = self.peek() {
            match t.tok {
                Tok::Open => depth += 1,
                Tok::Close => {
                    depth -= 1;
                    if depth == 0 {
                        let at = self.pos;
                        self.pos += 1;
                        return at;
                    }
                }
                _ => {}
            }
            self.pos += 1;
        }
        self.toks.len().saturating_sub(1)
    }

    /// Skips to the end of the current line.
    fn skip_line(&mut self) {
        while let Some(t) = self.peek() {
            if matches!(t.tok, Tok::Newline) {
                return;
            }
            if matches!(t.tok, Tok::Open) {
                self.pos += 1;
                self.skip_block();
                continue;
            }
            if matches!(t.tok, Tok::Close) {
                return;
            }
            self.pos += 1;
        }
    }

    pub(super) fn file(&mut self) {
        loop {
            self.skip_separators();
            let Some(t) = self.peek().cloned() else {
                return;
            };
            match t.word() {
                Some("table") => {
                    self.pos += 1;
                    if let Err((l, c, m)) = self.table() {
                        self.errs.push(l, c, m);
                        // Resynchronize at the next top-level `table`.
                        while let Some(t) = self.peek() {
                            if t.word() == Some("table") && t.col == 1 {
                                break;
                            }
                            self.pos += 1;
                        }
                    }
                }
                Some("flush") => self.skip_line(),
                _ => {
                    self.errs.push(
                        t.line,
                        t.col,
                        format!("expected 'table FAMILY NAME {{', found '{}'", t.show()),
                    );
                    self.skip_line();
                }
            }
        }
    }

    fn table(&mut self) -> Res<()> {
        let fam_tok = self.expect_word("a table family (inet, ip, ip6)")?;
        let family = match fam_tok.word() {
            Some("inet") => TableFamily::Inet,
            Some("ip") => TableFamily::Ip,
            Some("ip6") => TableFamily::Ip6,
            _ => {
                return Err((
                    fam_tok.line,
                    fam_tok.col,
                    format!(
                        "table family '{}' is not supported (supported: inet, ip, ip6)",
                        fam_tok.show()
                    ),
                ))
            }
        };
        let name = self.expect_word("a table name")?;
        let name = match name.tok {
            Tok::Word(w) | Tok::Str(w) => w,
            _ => unreachable!(),
        };
        self.expect(Tok::Open, "'{' after the table name")?;
        let mut chains: Vec<Chain> = Vec::new();
        let mut jumps: Vec<Jump> = Vec::new();
        loop {
            self.skip_separators();
            let Some(t) = self.peek().cloned() else {
                return self.fail(format!("expected '}}' closing table '{name}'"));
            };
            match (&t.tok, t.word()) {
                (Tok::Close, _) => {
                    self.pos += 1;
                    break;
                }
                (_, Some("chain")) => {
                    self.pos += 1;
                    if let Err((l, c, m)) = self.chain(family, &name, &mut chains, &mut jumps) {
                        self.errs.push(l, c, m);
                        // Skip the rest of the chain.
                        while let Some(t) = self.peek() {
                            if matches!(t.tok, Tok::Close) {
                                self.pos += 1;
                                break;
                            }
                            self.pos += 1;
                        }
                    }
                }
                (_, Some("set")) => {
                    self.pos += 1;
                    let set_name = self.expect_word("a set name")?;
                    self.expect(Tok::Open, "'{' after the set name")?;
                    let close = self.skip_block();
                    let end = self.toks[close].end;
                    self.sets.push(SetBlock {
                        table: name.clone(),
                        name: match set_name.tok {
                            Tok::Word(w) | Tok::Str(w) => w,
                            _ => unreachable!(),
                        },
                        text: self.text[t.start..end].to_string(),
                        line: t.line,
                    });
                }
                (_, Some("flags" | "comment")) => self.skip_line(),
                (
                    _,
                    Some(
                        other @ ("map" | "flowtable" | "counter" | "quota" | "ct" | "limit"
                        | "secmark" | "synproxy"),
                    ),
                ) => {
                    self.errs.push(
                        t.line,
                        t.col,
                        format!("table object '{other}' is not supported (supported: chain, set)"),
                    );
                    self.pos += 1;
                    self.skip_line();
                }
                _ => {
                    self.errs.push(
                        t.line,
                        t.col,
                        format!(
                            "expected 'chain NAME {{', 'set NAME {{' or '}}', found '{}'",
                            t.show()
                        ),
                    );
                    self.skip_line();
                }
            }
        }
        // Jump targets must exist in the table; loops are rejected.
        let mut edges: Vec<Vec<(usize, u32, u32)>> = vec![Vec::new(); chains.len()];
        for j in &jumps {
            match chains.iter().position(|c| c.name == j.target) {
                Some(t) if chains[t].base.is_some() => self.errs.push(
                    j.line,
                    j.col,
                    format!("cannot jump to base chain '{}'", j.target),
                ),
                Some(t) => edges[j.chain].push((t, j.line, j.col)),
                None => self.errs.push(
                    j.line,
                    j.col,
                    format!(
                        "jump to unknown chain '{}' (no 'chain {}' in table '{}')",
                        j.target, j.target, name
                    ),
                ),
            }
        }
        let names: Vec<&str> = chains.iter().map(|c| c.name.as_str()).collect();
        report_loops(&names, &edges, &mut self.errs);
        self.rs.tables.push(Table {
            name,
            family,
            chains,
        });
        Ok(())
    }

    fn chain(
        &mut self,
        family: TableFamily,
        table: &str,
        chains: &mut Vec<Chain>,
        jumps: &mut Vec<Jump>,
    ) -> Res<()> {
        let name_tok = self.expect_word("a chain name")?;
        let name = match &name_tok.tok {
            Tok::Word(w) | Tok::Str(w) => w.clone(),
            _ => unreachable!(),
        };
        if chains.iter().any(|c| c.name == name) {
            return Err((
                name_tok.line,
                name_tok.col,
                format!("chain '{name}' is defined twice in table '{table}'"),
            ));
        }
        self.expect(Tok::Open, "'{' after the chain name")?;
        let ci = chains.len();
        chains.push(Chain {
            name: name.clone(),
            base: None,
            rules: Vec::new(),
        });
        loop {
            self.skip_separators();
            let Some(t) = self.peek().cloned() else {
                return self.fail(format!("expected '}}' closing chain '{name}'"));
            };
            match (&t.tok, t.word()) {
                (Tok::Close, _) => {
                    self.pos += 1;
                    return Ok(());
                }
                (_, Some("type")) => {
                    self.pos += 1;
                    let r = self.base_chain();
                    match r {
                        Ok(b) => {
                            let old_policy = chains[ci].base.as_ref().map(|b| b.policy.clone());
                            let mut b = b;
                            if let Some(p) = old_policy {
                                b.policy = p;
                            }
                            chains[ci].base = Some(b);
                        }
                        Err((l, c, m)) => {
                            self.errs.push(l, c, m);
                            self.skip_line();
                        }
                    }
                }
                (_, Some("policy")) => {
                    self.pos += 1;
                    let p = self.expect_word("a policy (accept or drop)")?;
                    let v = match p.word() {
                        Some("accept") => Verdict::Accept,
                        Some("drop") => Verdict::Drop,
                        _ => {
                            self.errs.push(
                                p.line,
                                p.col,
                                format!("expected a policy accept or drop, found '{}'", p.show()),
                            );
                            continue;
                        }
                    };
                    match chains[ci].base.as_mut() {
                        Some(b) => b.policy = v,
                        None => self.errs.push(
                            t.line,
                            t.col,
                            "a policy needs a base chain ('type filter hook … priority …;' first)",
                        ),
                    }
                }
                (_, Some("comment")) => self.skip_line(),
                _ => {
                    let id = self.next_id;
                    self.next_id += 1;
                    match self.rule(family, id) {
                        Ok((rule, jump)) => {
                            if let Some((target, line, col)) = jump {
                                jumps.push(Jump {
                                    chain: ci,
                                    target,
                                    line,
                                    col,
                                });
                            }
                            chains[ci].rules.push(rule);
                        }
                        Err((l, c, m)) => {
                            self.errs.push(l, c, m);
                            self.skip_line();
                        }
                    }
                }
            }
        }
    }

    /// After `type`: `filter hook HOOK priority P` (policy comes separately).
    fn base_chain(&mut self) -> Res<BaseChain> {
        let ty = self.expect_word("a chain type (filter)")?;
        if ty.word() != Some("filter") {
            return Err((ty.line, ty.col, format!("chain type '{}' is not supported (supported: filter; NAT and route chains are out of scope)", ty.show())));
        }
        let hk = self.expect_word("'hook'")?;
        if hk.word() != Some("hook") {
            return Err((
                hk.line,
                hk.col,
                format!("expected 'hook', found '{}'", hk.show()),
            ));
        }
        let h =
            self.expect_word("a hook name (input, forward, output, prerouting, postrouting)")?;
        let hook = h.word().and_then(Hook::from_name).ok_or((h.line, h.col, format!("expected a hook name (input, forward, output, prerouting, postrouting, ingress), found '{}'", h.show())))?;
        if self.peek().and_then(|t| t.word()) == Some("device")
            || self.peek().and_then(|t| t.word()) == Some("devices")
        {
            return self.fail("ingress devices are not supported");
        }
        let pr = self.expect_word("'priority'")?;
        if pr.word() != Some("priority") {
            return Err((
                pr.line,
                pr.col,
                format!("expected 'priority', found '{}'", pr.show()),
            ));
        }
        let v = self.expect_word("a priority (a number or filter, raw, mangle, security)")?;
        let w = v.word().unwrap_or("");
        let mut priority: i32 = match w {
            "raw" => -300,
            "mangle" => -150,
            "dstnat" => -100,
            "filter" => 0,
            "security" => 50,
            "srcnat" => 100,
            n => n.parse().map_err(|_| (v.line, v.col, format!("expected a priority (a number or filter, raw, mangle, security), found '{n}'")))?,
        };
        // `filter + 10`, `filter - 5`.
        if let Some(op) = self
            .peek()
            .and_then(|t| t.word())
            .filter(|w| *w == "+" || *w == "-")
            .map(str::to_string)
        {
            self.pos += 1;
            let n = self.expect_word("a number")?;
            let k: i32 = n.word().and_then(|w| w.parse().ok()).ok_or((
                n.line,
                n.col,
                format!("expected a number, found '{}'", n.show()),
            ))?;
            priority += if op == "+" { k } else { -k };
        }
        Ok(BaseChain {
            hook,
            priority,
            policy: Verdict::Accept,
            counters: Counters::default(),
        })
    }

    /// The tokens of one rule: up to a newline or `;` outside braces.
    fn rule_tokens(&mut self) -> Vec<Token> {
        let mut out = Vec::new();
        let mut depth = 0;
        while let Some(t) = self.peek() {
            match t.tok {
                Tok::Newline | Tok::Semi if depth == 0 => break,
                Tok::Newline => {
                    self.pos += 1;
                    continue;
                }
                Tok::Close if depth == 0 => break,
                Tok::Open => depth += 1,
                Tok::Close => depth -= 1,
                _ => {}
            }
            out.push(t.clone());
            self.pos += 1;
        }
        out
    }

    fn rule(&mut self, family: TableFamily, id: u32) -> Res<(Rule, Option<JumpAt>)> {
        let toks = self.rule_tokens();
        let first_line = toks.first().map_or(0, |t| t.line);
        let mut rp = RuleParser {
            toks: &toks,
            i: 0,
            family,
            set_refs: &mut self.rs.set_refs,
            matches: Matches::any(),
            rule: Rule::new(id, Matches::any(), Action::Count),
            action: None,
            jump: None,
        };
        match family {
            TableFamily::Ip => rp.matches.constrain(Field::Family, IntervalSet::point(4)),
            TableFamily::Ip6 => rp.matches.constrain(Field::Family, IntervalSet::point(6)),
            TableFamily::Inet => {}
        }
        rp.parse()?;
        let mut rule = rp.rule;
        rule.matches = rp.matches;
        rule.action = rp.action.unwrap_or(Action::Count);
        rule.origin = Origin { line: first_line };
        Ok((rule, rp.jump))
    }
}
