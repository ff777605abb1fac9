//! The nft frontend: the text `nft list ruleset` prints for `inet`, `ip`
//! and `ip6` tables.
//!
//! Structure (tables, chains, base chain `type … hook … priority …; policy
//! …;`) is parsed from tokens; each rule is one line (or `;`-separated
//! statement list) read left to right: selector expressions (`ip saddr`,
//! `tcp dport`, `ct state`, …) with an optional `!=`, a value, an anonymous
//! set `{ … }` or a named set `@NAME`; then statements (`counter`, `log`,
//! `limit`) and a verdict. Named `set` blocks are returned raw.

use crate::common::*;
use crate::error::{Errors, ParseError};
use crate::iptables::{parse_log_level, parse_rate};
use crate::SetBlock;
use parapet_model::*;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Tok {
    Word(String),
    Str(String),
    Open,
    Close,
    Semi,
    Newline,
    Comma,
    LParen,
    RParen,
    Pipe,
    Amp,
}

#[derive(Clone, Debug)]
struct Token {
    tok: Tok,
    line: u32,
    col: u32,
    /// Byte offsets in the text, for raw set blocks.
    start: usize,
    end: usize,
}

impl Token {
    fn word(&self) -> Option<&str> {
        match &self.tok {
            Tok::Word(w) => Some(w),
            _ => None,
        }
    }

    /// The token as the user wrote it, for messages.
    fn show(&self) -> String {
        match &self.tok {
            Tok::Word(w) => w.clone(),
            Tok::Str(s) => format!("\"{s}\""),
            Tok::Open => "{".into(),
            Tok::Close => "}".into(),
            Tok::Semi => ";".into(),
            Tok::Newline => "end of line".into(),
            Tok::Comma => ",".into(),
            Tok::LParen => "(".into(),
            Tok::RParen => ")".into(),
            Tok::Pipe => "|".into(),
            Tok::Amp => "&".into(),
        }
    }
}

fn tokenize(text: &str, errs: &mut Errors) -> Vec<Token> {
    let mut out = Vec::new();
    let mut line = 1u32;
    let mut line_start = 0usize;
    let bytes: Vec<(usize, char)> = text.char_indices().collect();
    let mut i = 0;
    let col_of = |pos: usize, line_start: usize| text[line_start..pos].chars().count() as u32 + 1;
    while i < bytes.len() {
        let (pos, c) = bytes[i];
        let single = |t: Tok| Token {
            tok: t,
            line,
            col: col_of(pos, line_start),
            start: pos,
            end: pos + c.len_utf8(),
        };
        match c {
            '\n' => {
                out.push(single(Tok::Newline));
                line += 1;
                line_start = pos + 1;
                i += 1;
            }
            c if c.is_whitespace() => i += 1,
            '#' => {
                while i < bytes.len() && bytes[i].1 != '\n' {
                    i += 1;
                }
            }
            '{' | '}' | ';' | ',' | '(' | ')' | '|' | '&' => {
                out.push(single(match c {
                    '{' => Tok::Open,
                    '}' => Tok::Close,
                    ';' => Tok::Semi,
                    ',' => Tok::Comma,
                    '(' => Tok::LParen,
                    ')' => Tok::RParen,
                    '|' => Tok::Pipe,
                    _ => Tok::Amp,
                }));
                i += 1;
            }
            '"' => {
                let col = col_of(pos, line_start);
                let mut s = String::new();
                i += 1;
                let mut closed = false;
                while i < bytes.len() {
                    match bytes[i].1 {
                        '"' => {
                            closed = true;
                            break;
                        }
                        '\n' => break,
                        '\\' if i + 1 < bytes.len() && matches!(bytes[i + 1].1, '"' | '\\') => {
                            s.push(bytes[i + 1].1);
                            i += 1;
                        }
                        ch => s.push(ch),
                    }
                    i += 1;
                }
                if !closed {
                    errs.push(line, col, "unterminated \"-quoted string");
                    continue;
                }
                let end = bytes[i].0 + 1;
                i += 1;
                out.push(Token {
                    tok: Tok::Str(s),
                    line,
                    col,
                    start: pos,
                    end,
                });
            }
            _ => {
                let col = col_of(pos, line_start);
                let mut s = String::new();
                while i < bytes.len() {
                    let ch = bytes[i].1;
                    if ch.is_whitespace() || "{};,()|&\"#".contains(ch) {
                        break;
                    }
                    s.push(ch);
                    i += 1;
                }
                let end = bytes.get(i).map_or(text.len(), |b| b.0);
                out.push(Token {
                    tok: Tok::Word(s),
                    line,
                    col,
                    start: pos,
                    end,
                });
            }
        }
    }
    out
}

struct Parser<'a> {
    text: &'a str,
    toks: Vec<Token>,
    pos: usize,
    errs: Errors,
    rs: Ruleset,
    sets: Vec<SetBlock>,
    next_id: u32,
}

/// A jump or goto to check once the table is complete.
struct Jump {
    chain: usize,
    target: String,
    line: u32,
    col: u32,
}

/// An error at `(line, column)` with its message.
type Res<T> = Result<T, (u32, u32, String)>;

/// A jump target and where it is written.
type JumpAt = (String, u32, u32);

pub(crate) fn parse(text: &str, file: &str) -> Result<(Ruleset, Vec<SetBlock>), Vec<ParseError>> {
    let mut errs = Errors::new(file);
    let toks = tokenize(text, &mut errs);
    let mut p = Parser {
        text,
        toks,
        pos: 0,
        errs,
        rs: Ruleset::default(),
        sets: Vec::new(),
        next_id: 1,
    };
    p.file();
    let Parser { errs, rs, sets, .. } = p;
    errs.finish((rs, sets))
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

    fn file(&mut self) {
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

/// What kind of values a selector compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Addr(Family),
    Port,
    Proto,
    Iface,
    Ct,
    IcmpType(bool),
    IcmpCode,
    Nfproto,
}

struct Selector {
    field: Field,
    kind: Kind,
    /// Constraints the selector implies (`tcp dport` implies tcp).
    implied: Vec<(Field, IntervalSet)>,
}

struct RuleParser<'a> {
    toks: &'a [Token],
    i: usize,
    family: TableFamily,
    set_refs: &'a mut Vec<SetRef>,
    matches: Matches,
    rule: Rule,
    action: Option<Action>,
    jump: Option<JumpAt>,
}

const SUPPORTED_EXPRS: &str = "ip/ip6 saddr|daddr|protocol|nexthdr, tcp/udp/sctp/udplite sport|dport, tcp flags, meta l4proto|nfproto|iifname|oifname, iifname, oifname, ct state, icmp/icmpv6 type|code, counter, log, limit, comment, accept, drop, reject, jump, goto, return";

impl RuleParser<'_> {
    fn peek(&self) -> Option<&Token> {
        self.toks.get(self.i)
    }

    fn peek_word(&self) -> Option<&str> {
        self.peek().and_then(|t| t.word())
    }

    fn at_end_pos(&self) -> (u32, u32) {
        match self.peek() {
            Some(t) => (t.line, t.col),
            None => self
                .toks
                .last()
                .map_or((0, 1), |t| (t.line, t.col + (t.end - t.start) as u32)),
        }
    }

    fn fail<T>(&self, msg: impl Into<String>) -> Res<T> {
        let (l, c) = self.at_end_pos();
        Err((l, c, msg.into()))
    }

    fn next_word(&mut self, what: &str) -> Res<Token> {
        match self.peek() {
            Some(t) if matches!(t.tok, Tok::Word(_) | Tok::Str(_)) => {
                let t = t.clone();
                self.i += 1;
                Ok(t)
            }
            Some(t) => self.fail(format!("expected {what}, found '{}'", t.show())),
            None => self.fail(format!("expected {what} at the end of the rule")),
        }
    }

    fn parse(&mut self) -> Res<()> {
        while let Some(t) = self.peek().cloned() {
            if self.action.is_some() {
                if t.word() == Some("comment") {
                    self.i += 1;
                    self.comment()?;
                    continue;
                }
                if matches!(self.action, Some(Action::Log(_)))
                    && matches!(
                        t.word(),
                        Some("accept" | "drop" | "reject" | "jump" | "goto" | "return")
                    )
                {
                    // `log … drop`: the log rides on the rule; the verdict
                    // that follows becomes its action.
                    if let Some(Action::Log(spec)) = self.action.take() {
                        self.rule.log = Some(spec);
                    }
                    continue;
                }
                return Err((
                    t.line,
                    t.col,
                    format!(
                        "expected the end of the rule after the verdict, found '{}'",
                        t.show()
                    ),
                ));
            }
            let Some(w) = t.word() else {
                return Err((
                    t.line,
                    t.col,
                    format!(
                        "expected an expression or a statement, found '{}'",
                        t.show()
                    ),
                ));
            };
            match w {
                "counter" => {
                    self.i += 1;
                    if self.peek_word() == Some("packets") {
                        self.i += 1;
                        let p = self.number("a packet count")?;
                        let b = self.next_word("'bytes'")?;
                        if b.word() != Some("bytes") {
                            return Err((
                                b.line,
                                b.col,
                                format!("expected 'bytes', found '{}'", b.show()),
                            ));
                        }
                        let n = self.number("a byte count")?;
                        self.rule.counters = Counters {
                            packets: p,
                            bytes: n,
                        };
                    }
                }
                "log" => {
                    self.i += 1;
                    self.log()?;
                }
                "limit" => {
                    self.i += 1;
                    self.limit()?;
                }
                "comment" => {
                    self.i += 1;
                    self.comment()?;
                }
                "accept" | "drop" | "return" => {
                    self.i += 1;
                    self.action = Some(match w {
                        "accept" => Action::Verdict(Verdict::Accept),
                        "drop" => Action::Verdict(Verdict::Drop),
                        _ => Action::Return,
                    });
                }
                "reject" => {
                    self.i += 1;
                    self.reject()?;
                }
                "jump" | "goto" => {
                    self.i += 1;
                    let target = self.next_word("a chain name")?;
                    let name = match &target.tok {
                        Tok::Word(s) | Tok::Str(s) => s.clone(),
                        _ => unreachable!(),
                    };
                    self.jump = Some((name.clone(), target.line, target.col));
                    self.action = Some(if w == "jump" {
                        Action::Jump(name)
                    } else {
                        Action::Goto(name)
                    });
                }
                _ => self.match_expr()?,
            }
        }
        Ok(())
    }

    fn number(&mut self, what: &str) -> Res<u64> {
        let t = self.next_word(what)?;
        t.word().and_then(|w| w.parse().ok()).ok_or((
            t.line,
            t.col,
            format!("expected {what}, found '{}'", t.show()),
        ))
    }

    fn string(&mut self, what: &str) -> Res<String> {
        let t = self.next_word(what)?;
        match t.tok {
            Tok::Str(s) | Tok::Word(s) => Ok(s),
            _ => unreachable!(),
        }
    }

    fn comment(&mut self) -> Res<()> {
        self.rule.comment = Some(self.string("a quoted comment")?);
        Ok(())
    }

    fn log(&mut self) -> Res<()> {
        let mut spec = LogSpec::default();
        while let Some(w) = self.peek_word() {
            match w {
                "prefix" => {
                    self.i += 1;
                    spec.prefix = Some(self.string("a quoted log prefix")?);
                }
                "level" => {
                    self.i += 1;
                    let t = self.next_word("a log level")?;
                    spec.level = Some(t.word().and_then(parse_log_level).ok_or((t.line, t.col, format!("expected a log level (emerg, alert, crit, err, warn, notice, info, debug), found '{}'", t.show())))?);
                }
                "group" | "flags" | "snaplen" | "queue-threshold" => {
                    return self.fail(format!(
                        "log option '{w}' is not supported (supported: prefix, level)"
                    ))
                }
                _ => break,
            }
        }
        self.action = Some(Action::Log(spec));
        Ok(())
    }

    fn limit(&mut self) -> Res<()> {
        let r = self.next_word("'rate'")?;
        if r.word() != Some("rate") {
            return Err((
                r.line,
                r.col,
                format!("expected 'rate', found '{}'", r.show()),
            ));
        }
        if self.peek_word() == Some("over") {
            return self
                .fail("'limit rate over' is not supported (a limit matches while under the rate)");
        }
        let v = self.next_word("a rate like 10/second")?;
        let (rate, per) = v
            .word()
            .filter(|w| w.contains('/'))
            .and_then(parse_rate)
            .ok_or((
                v.line,
                v.col,
                format!("expected a rate like 10/second, found '{}'", v.show()),
            ))?;
        let mut burst = 5;
        if self.peek_word() == Some("burst") {
            self.i += 1;
            burst = self.number("a burst size")? as u32;
            if self.peek_word() == Some("packets") {
                self.i += 1;
            } else if self.peek_word() == Some("bytes") {
                return self.fail("byte-based limits are not supported");
            }
        }
        self.rule.limit = Some(Limit { rate, per, burst });
        Ok(())
    }

    fn reject(&mut self) -> Res<()> {
        let mut with = None;
        if self.peek_word() == Some("with") {
            self.i += 1;
            let a = self.next_word("tcp, icmp, icmpv6 or icmpx")?;
            let b = self.next_word("'reset' or 'type'")?;
            with = Some(match (a.word(), b.word()) {
                (Some("tcp"), Some("reset")) => "tcp-reset".to_string(),
                (Some(k @ ("icmp" | "icmpv6" | "icmpx")), Some("type")) => {
                    let t = self.next_word("a reject type")?;
                    let t = t.word().unwrap_or("").to_string();
                    match k {
                        "icmp" => format!(
                            "icmp-{}",
                            if t == "prot-unreachable" {
                                "proto-unreachable"
                            } else {
                                &t
                            }
                        ),
                        "icmpv6" => format!(
                            "icmp6-{}",
                            if t == "admin-prohibited" {
                                "adm-prohibited"
                            } else {
                                &t
                            }
                        ),
                        _ => format!("icmpx-{t}"),
                    }
                }
                _ => {
                    return Err((
                        a.line,
                        a.col,
                        "expected 'with tcp reset' or 'with icmp|icmpv6|icmpx type TYPE'".into(),
                    ))
                }
            });
        }
        self.action = Some(Action::Verdict(Verdict::Reject { with }));
        Ok(())
    }

    /// A selector expression: `ip saddr`, `tcp dport`, `ct state`, …
    fn selector(&mut self) -> Res<Selector> {
        let t = self.next_word("an expression")?;
        let w = t.word().unwrap_or("").to_string();
        let (l, c) = (t.line, t.col);
        let fam_pt = |f: Family| (Field::Family, IntervalSet::point(f.value()));
        let sel = |field, kind, implied| {
            Ok(Selector {
                field,
                kind,
                implied,
            })
        };
        let sub = |p: &mut Self, what: &str| -> Res<String> {
            p.next_word(what)
                .map(|t| t.word().unwrap_or("").to_string())
        };
        match w.as_str() {
            "ip" | "ip6" => {
                let f = if w == "ip" { Family::V4 } else { Family::V6 };
                if (self.family == TableFamily::Ip && f == Family::V6)
                    || (self.family == TableFamily::Ip6 && f == Family::V4)
                {
                    return Err((
                        l,
                        c,
                        format!(
                            "'{w}' matches cannot appear in a {} table",
                            self.family.nft_name()
                        ),
                    ));
                }
                let k = sub(self, "saddr, daddr or protocol")?;
                match k.as_str() {
                    "saddr" => sel(Field::SrcAddr, Kind::Addr(f), vec![fam_pt(f)]),
                    "daddr" => sel(Field::DstAddr, Kind::Addr(f), vec![fam_pt(f)]),
                    "protocol" | "nexthdr" => sel(Field::Proto, Kind::Proto, vec![fam_pt(f)]),
                    "frag-off" if f == Family::V4 => {
                        // Only `ip frag-off & 0x1fff != 0` (non-first fragment).
                        let toks: Vec<String> = self.toks[self.i..].iter().take(4).map(|t| t.show()).collect();
                        let want_nf = ["&", "0x1fff", "!=", "0"];
                        let want_f = ["&", "0x1fff", "==", "0"];
                        let frag = if toks == want_nf {
                            1
                        } else if toks == want_f {
                            0
                        } else {
                            return self.fail("expected '& 0x1fff != 0' (non-first fragments) or '& 0x1fff == 0' after 'ip frag-off'");
                        };
                        self.i += 4;
                        self.matches.constrain(Field::Family, IntervalSet::point(4));
                        self.matches.constrain(Field::Fragment, IntervalSet::point(frag));
                        Err((0, 0, String::new()))
                    }
                    other => Err((l, c, format!("'{w} {other}' is not supported (supported: {w} saddr, {w} daddr, {w} protocol)"))),
                }
            }
            "tcp" | "udp" | "sctp" | "udplite" => {
                let p = protocol_number(&w).expect("known protocol");
                let proto = (Field::Proto, IntervalSet::point(p as u128));
                let k = sub(self, "sport, dport or flags")?;
                match k.as_str() {
                    "sport" => sel(Field::SrcPort, Kind::Port, vec![proto]),
                    "dport" => sel(Field::DstPort, Kind::Port, vec![proto]),
                    "flags" if w == "tcp" => {
                        self.tcp_flags()?;
                        self.matches.constrain(proto.0, proto.1);
                        Err((0, 0, String::new()))
                    }
                    other => Err((
                        l,
                        c,
                        format!(
                            "'{w} {other}' is not supported (supported: {w} sport, {w} dport{})",
                            if w == "tcp" { ", tcp flags" } else { "" }
                        ),
                    )),
                }
            }
            "icmp" | "icmpv6" => {
                let v6 = w == "icmpv6";
                let f = if v6 { Family::V6 } else { Family::V4 };
                if (self.family == TableFamily::Ip && v6)
                    || (self.family == TableFamily::Ip6 && !v6)
                {
                    return Err((
                        l,
                        c,
                        format!(
                            "'{w}' matches cannot appear in a {} table",
                            self.family.nft_name()
                        ),
                    ));
                }
                let implied = vec![
                    fam_pt(f),
                    (Field::Proto, IntervalSet::point(if v6 { 58 } else { 1 })),
                ];
                let k = sub(self, "type or code")?;
                match k.as_str() {
                    "type" => sel(Field::IcmpTypeCode, Kind::IcmpType(v6), implied),
                    "code" => sel(Field::IcmpTypeCode, Kind::IcmpCode, implied),
                    other => Err((
                        l,
                        c,
                        format!("'{w} {other}' is not supported (supported: {w} type, {w} code)"),
                    )),
                }
            }
            "meta" => {
                let k = sub(self, "l4proto, nfproto, iifname or oifname")?;
                match k.as_str() {
                    "l4proto" => sel(Field::Proto, Kind::Proto, vec![]),
                    "nfproto" => sel(Field::Family, Kind::Nfproto, vec![]),
                    "iifname" | "iif" => sel(Field::InIface, Kind::Iface, vec![]),
                    "oifname" | "oif" => sel(Field::OutIface, Kind::Iface, vec![]),
                    other => Err((l, c, format!("'meta {other}' is not supported (supported: meta l4proto, nfproto, iifname, oifname)"))),
                }
            }
            "iifname" | "iif" => sel(Field::InIface, Kind::Iface, vec![]),
            "oifname" | "oif" => sel(Field::OutIface, Kind::Iface, vec![]),
            "ct" => {
                let k = sub(self, "state")?;
                match k.as_str() {
                    "state" => sel(Field::CtState, Kind::Ct, vec![]),
                    other => Err((
                        l,
                        c,
                        format!("'ct {other}' is not supported (supported: ct state)"),
                    )),
                }
            }
            other => Err((
                l,
                c,
                format!("unknown expression '{other}' (supported: {SUPPORTED_EXPRS})"),
            )),
        }
    }

    fn match_expr(&mut self) -> Res<()> {
        let mut sels = Vec::new();
        loop {
            match self.selector() {
                Ok(s) => sels.push(s),
                // A selector that consumed its own value (tcp flags, frag-off).
                Err((0, 0, _)) if sels.is_empty() => return Ok(()),
                Err(e) => return Err(e),
            }
            if self.peek_word() == Some(".") {
                self.i += 1;
                continue;
            }
            break;
        }
        if self.peek_word() == Some("vmap") {
            return self.fail("verdict maps (vmap) are not supported: write one rule per verdict");
        }
        let mut neg = false;
        let mut cmp: Option<String> = None;
        match self.peek_word() {
            Some("!=") => {
                neg = true;
                self.i += 1;
            }
            Some("==") => self.i += 1,
            Some(op @ ("<" | ">" | "<=" | ">=" | "lt" | "gt" | "le" | "ge")) => {
                cmp = Some(op.to_string());
                self.i += 1;
            }
            _ => {}
        }
        for s in &sels {
            for (f, v) in &s.implied {
                self.matches.constrain(*f, v.clone());
            }
        }
        if let Some(name) = self
            .peek_word()
            .and_then(|w| w.strip_prefix('@'))
            .map(str::to_string)
        {
            self.i += 1;
            let set_ref = SetRef {
                name,
                key: SetKeySpec::Fields(sels.iter().map(|s| s.field).collect()),
            };
            let n = match self.set_refs.iter().position(|s| *s == set_ref) {
                Some(n) => n,
                None => {
                    self.set_refs.push(set_ref);
                    self.set_refs.len() - 1
                }
            };
            self.matches.constrain(
                Field::Set(n as u16),
                IntervalSet::point(if neg { 0 } else { 1 }),
            );
            return Ok(());
        }
        if sels.len() > 1 {
            return self.fail("expected '@SET' after a concatenation (anonymous concatenated sets are not supported)");
        }
        let s = &sels[0];
        let max = match s.kind {
            Kind::Addr(f) => width_mask(f.addr_bits()),
            _ => s.field.max_value(),
        };
        let mut set = self.value(s.kind)?;
        if let Some(op) = cmp {
            // `tcp dport < 1024`: only numbers compare.
            let [(v, _)] = set.ranges() else {
                return self.fail("expected one number after a comparison");
            };
            let v = *v;
            set = match op.as_str() {
                "<" | "lt" if v == 0 => IntervalSet::empty(),
                "<" | "lt" => IntervalSet::range(0, v - 1),
                "<=" | "le" => IntervalSet::range(0, v),
                ">" | "gt" => IntervalSet::range(v + 1, max),
                _ => IntervalSet::range(v, max),
            };
        }
        if neg {
            set = set.complement(max);
        }
        // `ip saddr 0.0.0.0/0` says no more than the family does.
        if !set.is_full(max) {
            self.matches.constrain(s.field, set);
        }
        Ok(())
    }

    /// A value, a comma list (ct state), or an anonymous set `{ a, b }`.
    fn value(&mut self, kind: Kind) -> Res<IntervalSet> {
        let mut set = IntervalSet::empty();
        if matches!(self.peek().map(|t| &t.tok), Some(Tok::Open)) {
            self.i += 1;
            loop {
                let t = self.next_word("a set element")?;
                set = set.union(&self.element(kind, &t)?);
                match self.peek().map(|t| &t.tok) {
                    Some(Tok::Comma) => {
                        self.i += 1;
                        if matches!(self.peek().map(|t| &t.tok), Some(Tok::Close)) {
                            self.i += 1;
                            break;
                        }
                    }
                    Some(Tok::Close) => {
                        self.i += 1;
                        break;
                    }
                    _ => return self.fail("expected ',' or '}' in the set"),
                }
            }
            return Ok(set);
        }
        let t = self.next_word("a value")?;
        set = self.element(kind, &t)?;
        // Bitmask-style lists: `ct state established,related`.
        while kind == Kind::Ct && matches!(self.peek().map(|t| &t.tok), Some(Tok::Comma)) {
            self.i += 1;
            let t = self.next_word("a conntrack state")?;
            set = set.union(&self.element(kind, &t)?);
        }
        Ok(set)
    }

    fn element(&self, kind: Kind, t: &Token) -> Res<IntervalSet> {
        let text = match &t.tok {
            Tok::Word(w) | Tok::Str(w) => w.as_str(),
            _ => unreachable!(),
        };
        let err = |m: String| (t.line, t.col, m);
        match kind {
            Kind::Addr(f) => {
                let r = if text.contains('-') && !text.contains('/') {
                    parse_ip_range(text, Some(f))
                } else {
                    parse_cidr(text, Some(f))
                };
                r.map(|(_, s)| s).map_err(err)
            }
            Kind::Port => {
                let (lo, hi) = match text.split_once('-') {
                    Some((a, b)) => (parse_port(a).map_err(err)?, parse_port(b).map_err(err)?),
                    None => {
                        let p = parse_port(text).map_err(err)?;
                        (p, p)
                    }
                };
                if lo > hi {
                    return Err(err(format!("port range '{text}' is empty (start after end)")));
                }
                Ok(IntervalSet::range(lo, hi))
            }
            Kind::Proto => protocol_number(text)
                .map(|p| IntervalSet::point(p as u128))
                .ok_or_else(|| err(format!("expected a protocol name or number (tcp, udp, icmp, …), found '{text}'"))),
            Kind::Nfproto => match text {
                "ipv4" => Ok(IntervalSet::point(4)),
                "ipv6" => Ok(IntervalSet::point(6)),
                _ => Err(err(format!("expected ipv4 or ipv6, found '{text}'"))),
            },
            Kind::Iface => {
                let spec = match text.strip_suffix('*') {
                    Some(p) => format!("{p}+"),
                    None => text.to_string(),
                };
                crate::iptables::iface_set(&spec).map_err(err)
            }
            Kind::Ct => CtState::from_name(text)
                .map(|s| IntervalSet::point(s as u128))
                .ok_or_else(|| err(format!("expected a conntrack state (new, established, related, invalid, untracked), found '{text}'"))),
            Kind::IcmpType(v6) => {
                let names = if v6 { ICMP6_NAMES } else { ICMP_NAMES };
                let t = match names.iter().find(|(n, _, c)| c.is_none() && *n == text) {
                    Some((_, t, _)) => *t,
                    None => text.parse::<u8>().map_err(|_| err(format!("expected an ICMP type name or number (like echo-request or 8), found '{text}'")))?,
                };
                Ok(icmp_interval(t, None))
            }
            Kind::IcmpCode => {
                let c: u8 = text.parse().map_err(|_| err(format!("expected an ICMP code 0-255, found '{text}'")))?;
                Ok(IntervalSet::from_ranges((0u128..=255).map(|t| ((t << 8) | c as u128, (t << 8) | c as u128))))
            }
        }
    }

    /// After `tcp flags`: `& (a|b) == c`, `& (a|b) != c`, `c / a,b`,
    /// `== c`, or a plain flag list (any of them set, nft's bitmask meaning).
    fn tcp_flags(&mut self) -> Res<()> {
        let flags_word = |p: &mut Self| -> Res<u8> {
            let mut bits = 0u8;
            let paren = matches!(p.peek().map(|t| &t.tok), Some(Tok::LParen));
            if paren {
                p.i += 1;
            }
            loop {
                let t = p.next_word("a TCP flag (fin, syn, rst, psh, ack, urg, ecn, cwr)")?;
                let w = t.word().unwrap_or("");
                let b = if let Some(h) = w.strip_prefix("0x") {
                    u8::from_str_radix(h, 16).ok()
                } else {
                    tcp_flags::parse_list(if w == "ecn" { "ECE" } else { w })
                };
                bits |= b.ok_or((
                    t.line,
                    t.col,
                    format!(
                        "expected a TCP flag (fin, syn, rst, psh, ack, urg, ecn, cwr), found '{w}'"
                    ),
                ))?;
                match p.peek().map(|t| &t.tok) {
                    Some(Tok::Pipe | Tok::Comma) => p.i += 1,
                    _ => break,
                }
            }
            if paren {
                match p.peek().map(|t| &t.tok) {
                    Some(Tok::RParen) => p.i += 1,
                    _ => return p.fail("expected ')' after the flags"),
                }
            }
            Ok(bits)
        };
        let (mask, comp, neg) = if matches!(self.peek().map(|t| &t.tok), Some(Tok::Amp)) {
            self.i += 1;
            let mask = flags_word(self)?;
            let neg = match self.peek_word() {
                Some("==") => false,
                Some("!=") => true,
                _ => return self.fail("expected '==' or '!=' after 'tcp flags & (…)'"),
            };
            self.i += 1;
            let comp = flags_word(self)?;
            (mask, comp, neg)
        } else {
            let neg = match self.peek_word() {
                Some("!=") => {
                    self.i += 1;
                    true
                }
                Some("==") => {
                    self.i += 1;
                    let v = flags_word(self)?;
                    self.matches
                        .constrain(Field::TcpFlags, tcp_flags_set(0xff, v));
                    return Ok(());
                }
                _ => false,
            };
            let v = flags_word(self)?;
            if self.peek_word() == Some("/") {
                self.i += 1;
                let mask = flags_word(self)?;
                (mask, v, neg)
            } else {
                // `tcp flags syn`: some of these flags are set.
                let none = tcp_flags_set(v, 0);
                let set = if neg { none } else { none.complement(0xff) };
                self.matches.constrain(Field::TcpFlags, set);
                return Ok(());
            }
        };
        let set = tcp_flags_set(mask, comp);
        self.matches.constrain(
            Field::TcpFlags,
            if neg { set.complement(0xff) } else { set },
        );
        Ok(())
    }
}
