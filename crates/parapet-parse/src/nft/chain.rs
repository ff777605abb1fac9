//! nft chains: `chain NAME { … }` bodies, base chain headers (`type filter
//! hook … priority …; policy …;`), and each rule's tokens parsed and added
//! to its chain.

use super::lexer::{word_text, JumpAt, Res, Tok, Token};
use super::matches::check_th;
use super::rule::RuleParser;
use super::table::{Jump, Parser};
use super::vmap::NamedMap;
use parapet_model::*;

impl Parser {
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
    pub(super) fn base_chain(&mut self) -> Res<BaseChain> {
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

    pub(super) fn rule(
        &mut self,
        family: TableFamily,
        ti: usize,
        id: u32,
    ) -> Res<(Vec<Rule>, Vec<JumpAt>)> {
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
}
