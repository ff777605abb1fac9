//! Table objects: named `limit`s (enforced, shared by the rules that name
//! them), and what nft keeps for the kernel's other paths — flowtables,
//! conntrack helpers/timeouts/expectations, SYN proxies, SELinux labels —
//! and whole tables of other families, all left to the kernel with a note.

use super::lexer::{word_text, Res, Tok, Token};
use super::rule::RuleParser;
use super::table::Parser;
use parapet_model::*;

/// Table objects nft keeps for the kernel's other paths (offload, conntrack
/// helpers and timeouts, SYN proxy, SELinux labels): parapet leaves them
/// where they are and says so.
const KERNEL_OBJECTS: &str = "flowtable, ct helper, ct timeout, ct expectation, synproxy, secmark";

impl Parser {
    /// At a table object of table `family name` (`flowtable ft { … }`,
    /// `ct helper ftp { … }`): noted as left to the kernel, with its block.
    pub(super) fn kernel_object(&mut self, family: TableFamily, table: &str) -> Res<()> {
        let start = self.pos;
        let kind = self.expect_word(KERNEL_OBJECTS)?;
        let mut words = vec![kind.show()];
        if kind.word() == Some("ct") {
            let sub = self.expect_word("helper, timeout or expectation after 'ct'")?;
            if !matches!(sub.word(), Some("helper" | "timeout" | "expectation")) {
                return Err((
                    sub.line,
                    sub.col,
                    format!(
                        "expected helper, timeout or expectation after 'ct', found '{}'",
                        sub.show()
                    ),
                ));
            }
            words.push(sub.show());
        }
        let name = self.expect_word("an object name")?;
        words.push(word_text(&name));
        self.expect(Tok::Open, "'{' after the object's name")?;
        let open = self.pos - 1;
        let close = self.skip_block();
        let text = self.block_text(start, open, close);
        self.rs.left_to_kernel.push(LeftToKernel {
            family,
            table: table.to_string(),
            line: kind.line & ((1 << crate::error::FILE_LINE_BITS) - 1),
            chains: Vec::new(),
            text,
            nft: true,
            first_id: 0,
            object: Some(words.join(" ")),
        });
        Ok(())
    }

    /// After `table FAMILY` of another family (`arp`, `bridge`, `netdev`):
    /// the whole table is the kernel's. Its rules are counted, keep their
    /// ids, and the table's text is kept for `list`.
    pub(super) fn other_family_table(&mut self, family: &str, start: usize) -> Res<()> {
        let name = word_text(&self.expect_word("a table name")?);
        let line = self.toks[start].line & ((1 << crate::error::FILE_LINE_BITS) - 1);
        if !matches!(self.peek().map(|t| &t.tok), Some(Tok::Open)) {
            return Ok(());
        }
        let open = self.pos;
        self.pos += 1;
        let mut chains: Vec<(String, usize)> = Vec::new();
        let mut first_id = 0;
        let close = loop {
            self.skip_separators();
            let Some(t) = self.peek().cloned() else {
                return self.fail(format!("expected '}}' closing table '{name}'"));
            };
            self.pos += 1;
            match (&t.tok, t.word()) {
                (Tok::Close, _) => break self.pos - 1,
                (_, Some("chain")) => {
                    let chain = word_text(&self.expect_word("a chain name")?);
                    let mut n = 0;
                    if matches!(self.peek().map(|t| &t.tok), Some(Tok::Open)) {
                        self.pos += 1;
                        loop {
                            self.skip_separators();
                            match self
                                .peek()
                                .map(|t| (t.tok.clone(), t.word().map(str::to_string)))
                            {
                                None => {
                                    return self
                                        .fail(format!("expected '}}' closing chain '{chain}'"))
                                }
                                Some((Tok::Close, _)) => {
                                    self.pos += 1;
                                    break;
                                }
                                Some((_, Some(w)))
                                    if matches!(
                                        w.as_str(),
                                        "type" | "policy" | "comment" | "devices" | "device"
                                    ) =>
                                {
                                    self.skip_line()
                                }
                                _ => {
                                    self.rule_tokens();
                                    if first_id == 0 {
                                        first_id = self.next_id;
                                    }
                                    self.next_id += 1;
                                    n += 1;
                                }
                            }
                        }
                    }
                    chains.push((chain, n));
                }
                (Tok::Open, _) => {
                    self.skip_block();
                }
                _ => self.skip_line(),
            }
        };
        let text = self.block_text(start, open, close);
        self.rs.left_to_kernel.push(LeftToKernel {
            family: TableFamily::Inet,
            table: name.clone(),
            line,
            chains,
            text,
            nft: true,
            first_id,
            object: Some(format!("table {family} {name}")),
        });
        Ok(())
    }

    /// After `limit` in a table: `NAME { rate [over] R/UNIT [burst B
    /// packets]; [comment "C"] }`, a limit object rules share by `limit
    /// name "NAME"`.
    pub(super) fn limit_object(&mut self, family: TableFamily, table: &str) -> Res<()> {
        let name = word_text(&self.expect_word("a limit object's name")?);
        self.expect(Tok::Open, "'{' after the limit object's name")?;
        let (body, line, col) = self.object_body();
        let rule = object_statement(&body, family, "limit", &name, |rp| rp.limit())?;
        let Some(limit) = rule.limit else {
            return Err((line, col, format!("limit object '{name}' has no rate")));
        };
        let key = (family, table.to_string());
        self.limits.retain(|(t, n, _)| !(*t == key && *n == name));
        self.limits.push((key, name, limit));
        Ok(())
    }

    /// `quota NAME { [over] N UNIT [used M UNIT] }` in a table: read and
    /// checked as a rule's `quota` is. An object decides nothing by itself
    /// (only the rules naming it count against it, and such a rule is
    /// refused); like a named counter, it is not kept in the model.
    pub(super) fn quota_object(&mut self, family: TableFamily) -> Res<()> {
        let name = word_text(&self.expect_word("a quota object's name")?);
        self.expect(Tok::Open, "'{' after the quota object's name")?;
        let (body, line, col) = self.object_body();
        if body.is_empty() {
            return Err((
                line,
                col,
                format!("quota object '{name}' has no byte count"),
            ));
        }
        object_statement(&body, family, "quota", &name, |rp| rp.quota())?;
        Ok(())
    }

    /// The `{ … }` body of a table object after its name, without
    /// separators and comments, and where it opens (for errors about it).
    fn object_body(&mut self) -> (Vec<Token>, u32, u32) {
        let open = self.pos;
        let close = self.skip_block();
        let mut body: Vec<Token> = Vec::new();
        let mut toks = self.toks[open..close].iter();
        while let Some(t) = toks.next() {
            match (&t.tok, t.word()) {
                (Tok::Newline | Tok::Semi, _) => {}
                (_, Some("comment")) => {
                    toks.next();
                }
                _ => body.push(t.clone()),
            }
        }
        (body, self.toks[open].line, self.toks[open].col)
    }
}

/// Reads an object's body as the one rule statement it spells (`parse`:
/// `limit`'s or `quota`'s), which must take every token; returns the rule
/// the statement was read into.
fn object_statement(
    body: &[Token],
    family: TableFamily,
    kind: &str,
    name: &str,
    parse: impl FnOnce(&mut RuleParser) -> Res<()>,
) -> Res<Rule> {
    let mut none = Vec::new();
    let mut rp = RuleParser {
        toks: body,
        i: 0,
        family,
        set_refs: &mut none,
        matches: Matches::any(),
        rule: Rule::new(0, Matches::any(), Action::Count),
        action: None,
        jump: None,
        maps: &[],
        vmap: None,
        limits: &[],
        th: None,
        dynsets: &[],
        table_name: "",
    };
    parse(&mut rp)?;
    if let Some(t) = body.get(rp.i) {
        return Err((
            t.line,
            t.col,
            format!(
                "expected the end of {kind} object '{name}', found '{}'",
                t.show()
            ),
        ));
    }
    Ok(rp.rule)
}
