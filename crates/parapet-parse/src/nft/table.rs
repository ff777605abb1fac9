//! nft structure: `table FAMILY NAME { … }`, chains, base chain headers
//! (`type filter hook … priority …; policy …;`), raw `set` blocks, and the
//! jump check once a table is complete.

use super::lexer::SUBSTITUTED;
use super::lexer::{word_text, JumpAt, Res, Tok, Token};
use super::matches::check_th;
use super::rule::RuleParser;
use super::script::Sources;
use super::vmap::NamedMap;
use crate::common::*;
use crate::error::Errors;
use crate::SetBlock;
use parapet_model::*;

/// The whole file: tokens, a cursor, and what has been parsed so far.
pub(super) struct Parser {
    pub(super) toks: Vec<Token>,
    pub(super) pos: usize,
    pub(super) errs: Errors,
    pub(super) rs: Ruleset,
    pub(super) sets: Vec<SetBlock>,
    pub(super) next_id: u32,
    pub(super) sources: Sources,
    pub(super) jumps: Vec<Jump>,
    /// Tables with `flags dormant`: read, then left out of the ruleset.
    pub(super) dormant: Vec<(TableFamily, String)>,
    pub(super) maps: Vec<NamedMap>,
    /// Per chain: rule count, jumps, deferred errors, text (see `kernel`).
    pub(super) notes: Vec<ChainNote>,
    /// Named limit objects (`limit NAME { rate … }`) by table.
    pub(super) limits: Vec<((TableFamily, String), String, Limit)>,
    /// The names of the sets some rule writes (`add @s { … }`).
    pub(super) written: Vec<String>,
    /// Dynamic sets (those some rule writes) by table.
    pub(super) dynsets: Vec<((TableFamily, String), DynsetDecl)>,
}

/// A jump or goto to check once the file is complete.
pub(super) struct Jump {
    table: (TableFamily, String),
    chain: String,
    target: String,
    line: u32,
    col: u32,
}

impl Parser {
    pub(super) fn peek(&self) -> Option<&Token> {
        self.toks.get(self.pos)
    }

    /// Position for an error at the current token (or the end of input).
    pub(super) fn here(&self) -> (u32, u32) {
        match self.peek() {
            Some(t) => (t.line, t.col),
            None => self
                .toks
                .last()
                .map_or((1, 1), |t| (t.line, t.col + (t.end - t.start) as u32)),
        }
    }

    pub(super) fn fail<T>(&self, msg: impl Into<String>) -> Res<T> {
        let (l, c) = self.here();
        Err((l, c, msg.into()))
    }

    pub(super) fn skip_separators(&mut self) {
        while matches!(self.peek().map(|t| &t.tok), Some(Tok::Newline | Tok::Semi)) {
            self.pos += 1;
        }
    }

    pub(super) fn expect_word(&mut self, what: &str) -> Res<Token> {
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

    pub(super) fn expect(&mut self, tok: Tok, what: &str) -> Res<()> {
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
    pub(super) fn skip_block(&mut self) -> usize {
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
    pub(super) fn skip_line(&mut self) {
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
                break;
            };
            self.pos += 1;
            let r = match t.word() {
                Some("table") => self.table(),
                Some(cmd @ ("add" | "create" | "insert" | "flush" | "delete" | "destroy")) => {
                    self.command(cmd)
                }
                _ => Err((
                    t.line,
                    t.col,
                    format!(
                        "expected 'table FAMILY NAME {{' or a command (add, insert, flush, delete), found '{}'",
                        t.show()
                    ),
                )),
            };
            if let Err((l, c, m)) = r {
                self.errs.push(l, c, m);
                // Resynchronize at the next top-level statement.
                while let Some(t) = self.peek() {
                    if t.col == 1 && t.word().is_some() {
                        break;
                    }
                    self.pos += 1;
                }
            }
        }
        self.check_jumps();
        self.refuse_reject_after_routing();
        self.refuse_owner_before_output();
        self.leave_chains_to_kernel();
        self.note_kernel_statements();
        crate::mangle::refuse_matches_on_mangled_fields(&self.rs, &mut self.errs);
        let dormant = std::mem::take(&mut self.dormant);
        self.rs
            .tables
            .retain(|t| !dormant.contains(&(t.family, t.name.clone())));
    }

    /// `[FAMILY] NAME` after `table`: the family defaults to `ip`, as in nft.
    pub(super) fn table_ref(&mut self) -> Res<(TableFamily, String)> {
        let first = self.expect_word("a table family (inet, ip, ip6) or a table name")?;
        let next_is_name = matches!(
            self.peek().map(|t| &t.tok),
            Some(Tok::Word(_) | Tok::Str(_))
        );
        let is_family = matches!(
            first.word(),
            Some("inet" | "ip" | "ip6" | "arp" | "bridge" | "netdev")
        );
        if !(next_is_name && is_family) {
            return Ok((TableFamily::Ip, word_text(&first)));
        }
        let family = match first.word() {
            Some("inet") => TableFamily::Inet,
            Some("ip") => TableFamily::Ip,
            Some("ip6") => TableFamily::Ip6,
            _ => {
                return Err((
                    first.line,
                    first.col,
                    format!(
                        "table family '{}' is not supported (supported: inet, ip, ip6)",
                        first.show()
                    ),
                ))
            }
        };
        let name = self.expect_word("a table name")?;
        Ok((family, word_text(&name)))
    }

    /// The index of a table, declaring it if new (nft's `add table`).
    pub(super) fn table_index(&mut self, family: TableFamily, name: &str) -> usize {
        match self
            .rs
            .tables
            .iter()
            .position(|t| t.family == family && t.name == name)
        {
            Some(i) => i,
            None => {
                self.rs.tables.push(Table {
                    name: name.to_string(),
                    family,
                    chains: Vec::new(),
                });
                self.rs.tables.len() - 1
            }
        }
    }

    /// `table [FAMILY] NAME [{ … }]`: a declaration, or a body that adds to
    /// the table (a table can be written several times, as in nft).
    pub(super) fn table(&mut self) -> Res<()> {
        let start = self.pos - 1;
        if let (Some(f @ ("arp" | "bridge" | "netdev")), Some(Tok::Word(_) | Tok::Str(_))) = (
            self.peek()
                .and_then(|t| t.word())
                .map(str::to_string)
                .as_deref(),
            self.toks.get(self.pos + 1).map(|t| &t.tok),
        ) {
            let f = f.to_string();
            self.pos += 1;
            return self.other_family_table(&f, start);
        }
        let (family, name) = self.table_ref()?;
        let ti = self.table_index(family, &name);
        if !matches!(self.peek().map(|t| &t.tok), Some(Tok::Open)) {
            return Ok(());
        }
        self.pos += 1;
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
                    if let Err((l, c, m)) = self.chain(ti) {
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
                    let from = self.pos;
                    self.pos += 1;
                    let set_name = self.expect_word("a set name")?;
                    self.expect(Tok::Open, "'{' after the set name")?;
                    let open = self.pos - 1;
                    let close = self.skip_block();
                    let set_name = word_text(&set_name);
                    if self.written.contains(&set_name) {
                        let _ = open;
                        match super::dynset::declaration(&self.toks[from..=close], &name) {
                            Ok(d) => self.dynsets.push(((family, name.clone()), d)),
                            Err((l, c, m)) => self.errs.push(l, c, m),
                        }
                        continue;
                    }
                    let text = self.block_text(from, open, close);
                    self.sets.push(SetBlock {
                        table: name.clone(),
                        name: set_name,
                        text,
                        line: t.line & ((1 << crate::error::FILE_LINE_BITS) - 1),
                        col: t.col,
                    });
                }
                (_, Some("map")) => {
                    self.pos += 1;
                    self.map_block(ti)?;
                }
                (_, Some("flags")) => {
                    self.pos += 1;
                    while let Some(f) = self.peek().and_then(|t| t.word()).map(str::to_string) {
                        if f == "dormant" {
                            // A dormant table is not evaluated by the kernel.
                            self.dormant.push((family, name.clone()));
                        }
                        self.pos += 1;
                        if matches!(self.peek().map(|t| &t.tok), Some(Tok::Comma)) {
                            self.pos += 1;
                        }
                    }
                }
                (_, Some("comment")) => self.skip_line(),
                (_, Some("limit")) => {
                    self.pos += 1;
                    self.limit_object(family, &name)?;
                }
                (_, Some("flowtable" | "ct" | "secmark" | "synproxy")) => {
                    self.kernel_object(family, &name)?;
                }
                (_, Some("counter")) => {
                    // A named counter counts what rules naming it match: as
                    // an anonymous counter does, it decides nothing.
                    self.pos += 1;
                    self.expect_word("a counter name")?;
                    if matches!(self.peek().map(|t| &t.tok), Some(Tok::Open)) {
                        self.pos += 1;
                        self.skip_block();
                    }
                }
                (_, Some("quota")) => {
                    self.pos += 1;
                    self.quota_object(family)?;
                }
                _ => {
                    self.errs.push(
                        t.line,
                        t.col,
                        format!(
                            "expected 'chain NAME {{', 'set NAME {{', 'map NAME {{' or '}}', found '{}'",
                            t.show()
                        ),
                    );
                    self.skip_line();
                }
            }
        }
        Ok(())
    }

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

    /// Jump targets must exist in the jumping chain's table; loops are
    /// rejected. Checked once the whole file is read, since commands may
    /// add chains later.
    fn check_jumps(&mut self) {
        let jumps = std::mem::take(&mut self.jumps);
        for (ti, table) in self.rs.tables.iter().enumerate() {
            let chains = &table.chains;
            let mut edges: Vec<Vec<(usize, u32, u32)>> = vec![Vec::new(); chains.len()];
            for j in jumps
                .iter()
                .filter(|j| j.table == (table.family, table.name.clone()))
            {
                let Some(from) = chains.iter().position(|c| c.name == j.chain) else {
                    continue;
                };
                match chains.iter().position(|c| c.name == j.target) {
                    Some(t) if chains[t].base.is_some() => self.errs.push(
                        j.line,
                        j.col,
                        format!("cannot jump to base chain '{}'", j.target),
                    ),
                    Some(t) => edges[from].push((t, j.line, j.col)),
                    None => self.errs.push(
                        j.line,
                        j.col,
                        format!(
                            "jump to unknown chain '{}' (no 'chain {}' in table '{}')",
                            j.target, j.target, table.name
                        ),
                    ),
                }
            }
            let _ = ti;
            let names: Vec<&str> = chains.iter().map(|c| c.name.as_str()).collect();
            report_loops(&names, &edges, &mut self.errs);
        }
    }

    /// The index of chain `name` in table `ti`, declaring it if new.
    pub(super) fn chain_index(&mut self, ti: usize, name: &str) -> usize {
        let chains = &mut self.rs.tables[ti].chains;
        match chains.iter().position(|c| c.name == name) {
            Some(ci) => ci,
            None => {
                chains.push(Chain {
                    name: name.to_string(),
                    base: None,
                    rules: Vec::new(),
                });
                chains.len() - 1
            }
        }
    }

    /// `chain NAME [{ … }]` in table `ti`: a declaration, or a body whose
    /// rules are appended (a chain can be written several times, as in nft).
    pub(super) fn chain(&mut self, ti: usize) -> Res<()> {
        let name_tok = self.expect_word("a chain name")?;
        let name = word_text(&name_tok);
        let ci = self.chain_index(ti, &name);
        let _ = self.is_kernel_chain(ti, ci);
        if !matches!(self.peek().map(|t| &t.tok), Some(Tok::Open)) {
            return Ok(());
        }
        let open = self.pos;
        self.pos += 1;
        let mut bad_base = false;
        loop {
            self.skip_separators();
            let Some(t) = self.peek().cloned() else {
                return self.fail(format!("expected '}}' closing chain '{name}'"));
            };
            match (&t.tok, t.word()) {
                (Tok::Close, _) => {
                    self.note_chain_block(ti, ci, open, self.pos);
                    self.pos += 1;
                    return Ok(());
                }
                (_, Some("type"))
                    if matches!(
                        self.toks.get(self.pos + 1).and_then(|t| t.word()),
                        Some("nat" | "route")
                    ) =>
                {
                    // NAT and routing are the kernel's: the chain is read
                    // for structure and left where it is.
                    let kind = self.toks[self.pos + 1].clone();
                    self.mark_kernel_chain(ti, ci, &kind);
                    self.skip_line();
                }
                (_, Some("policy")) if self.is_kernel_chain(ti, ci) => self.skip_line(),
                (_, Some("type")) => {
                    self.pos += 1;
                    let r = self.base_chain();
                    match r {
                        Ok(b) => {
                            let old_policy = self.rs.tables[ti].chains[ci]
                                .base
                                .as_ref()
                                .map(|b| b.policy.clone());
                            let mut b = b;
                            if let Some(p) = old_policy {
                                b.policy = p;
                            }
                            self.rs.tables[ti].chains[ci].base = Some(b);
                        }
                        Err((l, c, m)) => {
                            self.errs.push(l, c, m);
                            self.skip_line();
                            bad_base = true;
                        }
                    }
                }
                // Its header was refused already: no second error for it.
                (_, Some("policy")) if bad_base => self.skip_line(),
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
                    match self.rs.tables[ti].chains[ci].base.as_mut() {
                        Some(b) => b.policy = v,
                        None => self.errs.push(
                            t.line,
                            t.col,
                            "a policy needs a base chain ('type filter hook … priority …;' first)",
                        ),
                    }
                }
                (_, Some("comment")) => self.skip_line(),
                _ => self.add_rule(ti, ci, false)?,
            }
        }
    }

    /// Parses the rule at the cursor and appends it to (or, for `insert
    /// rule`, puts it first in) chain `ci` of table `ti`. A verdict map
    /// gives several model rules, all with the rule's id.
    ///
    /// A rule that does not parse is noted, not yet an error: its chain may
    /// turn out to be the kernel's (see `kernel`).
    pub(super) fn add_rule(&mut self, ti: usize, ci: usize, insert: bool) -> Res<()> {
        if self.is_kernel_chain(ti, ci) {
            return self.kernel_rule(ti, ci);
        }
        let bodies = match self.lift_anonymous_chains(ti) {
            Ok(b) => b,
            Err((l, c, m)) => {
                self.errs.push(l, c, m);
                self.skip_line();
                return Ok(());
            }
        };
        let id = self.next_id;
        self.next_id += 1;
        let family = self.rs.tables[ti].family;
        let from = self.pos;
        let parsed = self.rule(family, ti, id);
        let (rules, jumps) = match parsed {
            Ok(r) => {
                self.note_rule(ti, ci, id, from, self.pos, None);
                r
            }
            Err(e) => {
                self.note_rule(ti, ci, id, from, self.pos, Some(e));
                self.skip_line();
                return Ok(());
            }
        };
        let table = (family, self.rs.tables[ti].name.clone());
        let chain_name = self.rs.tables[ti].chains[ci].name.clone();
        for (target, line, col) in jumps {
            self.jumps.push(Jump {
                table: table.clone(),
                chain: chain_name.clone(),
                target,
                line,
                col,
            });
        }
        let chain = &mut self.rs.tables[ti].chains[ci];
        if insert {
            chain.rules.splice(0..0, rules);
        } else {
            chain.rules.extend(rules);
        }
        for body in bodies {
            self.anonymous_chain(ti, body)?;
        }
        Ok(())
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
    pub(super) fn rule_tokens(&mut self) -> Vec<Token> {
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

    fn rule(&mut self, family: TableFamily, ti: usize, id: u32) -> Res<(Vec<Rule>, Vec<JumpAt>)> {
        let toks = self.rule_tokens();
        let first_line = toks.first().map_or(0, |t| t.line);
        let table_name = self.rs.tables[ti].name.clone();
        let maps: Vec<&NamedMap> = self
            .maps
            .iter()
            .filter(|m| m.table == (family, table_name.clone()))
            .collect();
        let limits: Vec<(String, Limit)> = self
            .limits
            .iter()
            .filter(|(t, _, _)| *t == (family, table_name.clone()))
            .map(|(_, n, l)| (n.clone(), l.clone()))
            .collect();
        let dynsets: Vec<DynsetDecl> = self
            .dynsets
            .iter()
            .filter(|(t, _)| *t == (family, table_name.clone()))
            .map(|(_, d)| d.clone())
            .collect();
        let mut rp = RuleParser {
            dynsets: &dynsets,
            table_name: &table_name,
            toks: &toks,
            i: 0,
            family,
            set_refs: &mut self.rs.set_refs,
            matches: Matches::any(),
            rule: Rule::new(id, Matches::any(), Action::Count),
            action: None,
            jump: None,
            maps: &maps,
            vmap: None,
            limits: &limits,
            th: None,
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
        rule.origin = Origin {
            line: first_line & ((1 << crate::error::FILE_LINE_BITS) - 1),
        };
        let th = rp.th;
        let Some(entries) = rp.vmap else {
            check_th(th, std::slice::from_ref(&rule))?;
            return Ok((vec![rule], rp.jump.into_iter().collect()));
        };
        // `KEY vmap { k : v, … }`: one rule per element, in order, each with
        // the rule's conditions and KEY in the element; no default.
        let mut rules = Vec::new();
        let mut jumps = Vec::new();
        jumps.extend(rp.jump);
        for e in entries {
            let mut r = rule.clone();
            for (f, v) in e.key {
                r.matches.constrain(f, v);
            }
            if let Some(a) = e.action {
                r.action = a;
            }
            if let Some(l) = e.limit {
                r.limit = Some(l);
            }
            if let Some(j) = e.jump {
                jumps.push(j);
            }
            rules.push(r);
        }
        check_th(th, &rules)?;
        // An element no packet can match (`meta protocol arp` in an inet
        // table) is no rule: it would decide nothing and cannot be listed.
        if rules.iter().any(|r| !r.matches.is_unsatisfiable()) {
            rules.retain(|r| !r.matches.is_unsatisfiable());
        }
        Ok((rules, jumps))
    }

    /// The text of tokens `from..=close`: the source slice when they are
    /// all from one file and none came from a variable, else the tokens
    /// written back (lines kept, so positions inside stay close).
    pub(super) fn block_text(&self, from: usize, _open: usize, close: usize) -> String {
        let toks = &self.toks[from..=close];
        let src = toks[0].src;
        if src != SUBSTITUTED && toks.iter().all(|t| t.src == src) {
            let text = &self.sources.texts[src as usize];
            return text[toks[0].start..toks[toks.len() - 1].end].to_string();
        }
        let mut out = String::new();
        for t in toks {
            match t.tok {
                Tok::Newline => out.push('\n'),
                _ => {
                    out.push_str(&t.show());
                    out.push(' ');
                }
            }
        }
        out
    }
}

/// What the parser learns about one chain on the way.
pub(super) struct ChainNote {
    pub(super) table: (TableFamily, String),
    pub(super) chain: String,
    /// `nat` or `route` for a base chain of that type.
    pub(super) kernel: Option<String>,
    pub(super) line: u32,
    /// Rule statements seen (parsed or not), and the first one's id.
    pub(super) rules: usize,
    pub(super) first_id: u32,
    /// Chains its rules name after `jump`/`goto`, read from the tokens.
    pub(super) jumps: Vec<String>,
    /// Rule errors, reported unless the chain is left to the kernel.
    pub(super) errors: Vec<(u32, u32, String)>,
    /// Whether every rule error is in a rule with a NAT statement (`snat`,
    /// `dnat`, `masquerade`, `redirect`, `tproxy`): such a chain that no
    /// filter chain reaches is the kernel's NAT, not a mistake.
    pub(super) nat_errors_only: bool,
    /// Whether every rule error is a payload or meta set statement (`ip
    /// dscp set 1`): a base chain with only such errors that decides
    /// nothing only mangles, and is the kernel's.
    pub(super) mangle_errors_only: bool,
    /// The chain's blocks as written.
    pub(super) text: String,
}
