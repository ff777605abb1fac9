//! nft structure: `table FAMILY NAME { … }`, chains, base chain headers
//! (`type filter hook … priority …; policy …;`), raw `set` blocks, and the
//! jump check once a table is complete.

use super::lexer::SUBSTITUTED;
use super::lexer::{word_text, Res, Tok, Token};
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
    pub(super) table: (TableFamily, String),
    pub(super) chain: String,
    pub(super) target: String,
    pub(super) line: u32,
    pub(super) col: u32,
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
        self.refuse_rev_path_after_output();
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
