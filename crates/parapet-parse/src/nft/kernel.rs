//! nft chains parapet leaves to the kernel's netfilter, as iptables `*nat`
//! is: `type nat` and `type route` base chains, and the regular chains only
//! they jump to (fw4's `dstnat_lan`); `type filter` base chains that only
//! mangle (their rules set fields, `ip dscp set 1`, and decide nothing; the
//! guard against parapet rules matching such a field is `mangle.rs`). Their rules are read for structure
//! only (one rule per statement list, its jumps), keep their ids, and go
//! into [`Ruleset::left_to_kernel`], one entry per chain with its block, so
//! `check`/`apply` report them and `list` writes them back.
//!
//! A regular chain's rule errors wait until the file is read: NAT
//! statements (`dnat to …`) are errors only in a chain a filter chain
//! reaches, which is known only at the end.

use super::lexer::{Res, Tok, Token};
use super::table::{ChainNote, Parser};
use parapet_model::*;

impl Parser {
    /// Once the file is read: the rules' statements left to the kernel
    /// (`ct helper set`, `flow add`, `notrack`), one note per table and
    /// statement with the number of rules, for `check` and `apply`.
    pub(super) fn note_kernel_statements(&mut self) {
        let notes = crate::common::kernel_statement_notes(&self.rs, true);
        self.rs.left_to_kernel.extend(notes);
    }

    fn note_index(&mut self, ti: usize, ci: usize) -> usize {
        let t = &self.rs.tables[ti];
        let key = (t.family, t.name.clone());
        let chain = &t.chains[ci].name;
        if let Some(i) = self
            .notes
            .iter()
            .position(|n| n.table == key && n.chain == *chain)
        {
            return i;
        }
        self.notes.push(ChainNote {
            table: key,
            chain: chain.clone(),
            kernel: None,
            line: 0,
            rules: 0,
            first_id: 0,
            jumps: Vec::new(),
            errors: Vec::new(),
            nat_errors_only: true,
            mangle_errors_only: true,
            text: String::new(),
        });
        self.notes.len() - 1
    }

    /// Chain `ci` of table `ti` is a `type nat`/`type route` base chain.
    pub(super) fn mark_kernel_chain(&mut self, ti: usize, ci: usize, kind: &Token) {
        let i = self.note_index(ti, ci);
        self.notes[i].kernel = kind.word().map(str::to_string);
        self.notes[i].line = kind.line;
    }

    pub(super) fn is_kernel_chain(&mut self, ti: usize, ci: usize) -> bool {
        let i = self.note_index(ti, ci);
        self.notes[i].kernel.is_some()
    }

    /// Keeps the text of a chain's `{ … }` block (tokens `open..=close`).
    pub(super) fn note_chain_block(&mut self, ti: usize, ci: usize, open: usize, close: usize) {
        let body = self.block_text(open, open, close);
        let i = self.note_index(ti, ci);
        let n = &mut self.notes[i];
        if n.line == 0 {
            n.line = self.toks[open].line & ((1 << crate::error::FILE_LINE_BITS) - 1);
        }
        n.text.push_str(&format!("chain {} {body}\n", n.chain));
    }

    /// `flush ruleset`: what was noted goes; errors already made stay.
    pub(super) fn flush_notes(&mut self) {
        for n in std::mem::take(&mut self.notes) {
            for (l, c, m) in n.errors {
                self.errs.push(l, c, m);
            }
        }
    }

    /// A rule of a kernel chain added by a command: its text goes into the
    /// chain's block, so the listing keeps it.
    pub(super) fn note_command_rule(&mut self, ti: usize, ci: usize, from: usize, to: usize) {
        let line: Vec<String> = self.toks[from..to].iter().map(Token::show).collect();
        let i = self.note_index(ti, ci);
        let n = &mut self.notes[i];
        let line = line.join(" ");
        match n.text.rfind('}') {
            Some(end) => n.text.insert_str(end, &format!("\t{line}\n")),
            None => n.text = format!("chain {} {{\n\t{line}\n}}\n", n.chain),
        }
    }

    /// One rule statement of chain `ci` seen (tokens `from..to`), with
    /// its id and, when it did not parse, its error.
    pub(super) fn note_rule(
        &mut self,
        ti: usize,
        ci: usize,
        id: u32,
        from: usize,
        to: usize,
        err: Option<(u32, u32, String)>,
    ) {
        let toks = &self.toks[from..to.min(self.toks.len())];
        let jumps: Vec<String> = toks
            .windows(2)
            .filter(|w| matches!(w[0].word(), Some("jump" | "goto")))
            .filter_map(|w| match &w[1].tok {
                Tok::Word(s) | Tok::Str(s) => Some(s.clone()),
                _ => None,
            })
            .collect();
        // A NAT statement, not a value (`ct status dnat`, `{ snat, dnat }`).
        let nat = toks.iter().enumerate().any(|(k, t)| {
            let value = k > 0
                && (matches!(
                    toks[k - 1].tok,
                    Tok::Comma | Tok::Open | Tok::Amp | Tok::Pipe | Tok::LParen
                ) || matches!(toks[k - 1].word(), Some("status" | "!=" | "==")));
            !value
                && matches!(
                    t.word(),
                    Some("snat" | "dnat" | "masquerade" | "redirect" | "tproxy")
                )
        });
        // A verdict after a set statement: the rule filters too.
        let verdict = toks.iter().any(|t| {
            matches!(
                t.word(),
                Some("accept" | "drop" | "reject" | "queue" | "return")
            ) && matches!(t.tok, Tok::Word(_))
        });
        let i = self.note_index(ti, ci);
        let n = &mut self.notes[i];
        n.rules += 1;
        if n.first_id == 0 {
            n.first_id = id;
        }
        n.jumps.extend(jumps);
        if err.is_some() && !nat {
            n.nat_errors_only = false;
        }
        if err
            .as_ref()
            .is_some_and(|e| verdict || !e.2.starts_with(super::matches::PAYLOAD_SET))
        {
            n.mangle_errors_only = false;
        }
        n.errors.extend(err);
    }

    /// Reads the rule at the cursor of a kernel chain: its tokens, no more.
    pub(super) fn kernel_rule(&mut self, ti: usize, ci: usize) -> Res<()> {
        let from = self.pos;
        let toks = self.rule_tokens();
        if toks.is_empty() {
            return self.fail("expected a rule");
        }
        let id = self.next_id;
        self.next_id += 1;
        self.note_rule(ti, ci, id, from, self.pos, None);
        Ok(())
    }

    /// Once the file is read: chains left to the kernel leave the tables
    /// for [`Ruleset::left_to_kernel`]; every other chain's rule errors are
    /// reported.
    pub(super) fn leave_chains_to_kernel(&mut self) {
        let notes = std::mem::take(&mut self.notes);
        let mut kernel_only: Vec<(usize, String)> = Vec::new();
        for (ti, t) in self.rs.tables.iter().enumerate() {
            let key = (t.family, t.name.clone());
            let of = |name: &str| notes.iter().find(|n| n.table == key && n.chain == name);
            let reach = |roots: Vec<&str>| {
                let mut seen: Vec<String> = Vec::new();
                let mut todo: Vec<String> = roots.into_iter().map(str::to_string).collect();
                // Bounded: each chain enters `seen` once.
                while let Some(c) = todo.pop() {
                    if seen.contains(&c) || !t.chains.iter().any(|x| x.name == c) {
                        continue;
                    }
                    if let Some(n) = of(&c) {
                        todo.extend(n.jumps.iter().cloned());
                    }
                    seen.push(c);
                }
                seen
            };
            let kernel_roots: Vec<&str> = t
                .chains
                .iter()
                .filter(|c| of(&c.name).is_some_and(|n| n.kernel.is_some()))
                .map(|c| c.name.as_str())
                .collect();
            let filter_roots = t
                .chains
                .iter()
                .filter(|c| c.base.is_some())
                .map(|c| c.name.as_str())
                .collect();
            let from_filter = reach(filter_roots);
            // Regular chains no filter chain reaches whose only errors are
            // NAT statements: the kernel's NAT (nft checks a NAT statement
            // against the hook when a NAT chain jumps there); or set
            // statements: the kernel's mangling.
            let nat_roots: Vec<&str> = t
                .chains
                .iter()
                .filter(|c| c.base.is_none() && !from_filter.contains(&c.name))
                .filter(|c| {
                    of(&c.name).is_some_and(|n| {
                        !n.errors.is_empty() && (n.nat_errors_only || n.mangle_errors_only)
                    })
                })
                .map(|c| c.name.as_str())
                .collect();
            let mut roots: Vec<&str> = kernel_roots;
            roots.extend(nat_roots);
            for c in reach(roots) {
                if !from_filter.contains(&c) {
                    kernel_only.push((ti, c));
                }
            }
            // Base chains that only mangle: every rule that did not parse
            // sets a field (`ip dscp set 1`), none decides (no verdict, no
            // jump) and the policy accepts. They change packets and never
            // drop one: the kernel's business, as NAT is.
            for c in &t.chains {
                let only_mangles = c.base.as_ref().is_some_and(|b| b.policy == Verdict::Accept)
                    && c.rules.iter().all(|r| r.action == Action::Count)
                    && of(&c.name).is_some_and(|n| {
                        !n.errors.is_empty() && n.mangle_errors_only && n.jumps.is_empty()
                    });
                if only_mangles {
                    kernel_only.push((ti, c.name.clone()));
                }
            }
        }
        for n in notes {
            let ti = self
                .rs
                .tables
                .iter()
                .position(|t| (t.family, t.name.clone()) == n.table);
            let left = ti.is_some_and(|ti| kernel_only.contains(&(ti, n.chain.clone())));
            if !left {
                for (l, c, m) in n.errors {
                    self.errs.push(l, c, m);
                }
                continue;
            }
            let text = if n.text.is_empty() {
                format!("chain {} {{\n}}\n", n.chain)
            } else {
                n.text
            };
            self.rs.left_to_kernel.push(LeftToKernel {
                family: n.table.0,
                table: n.table.1,
                line: n.line,
                chains: vec![(n.chain, n.rules)],
                text,
                nft: true,
                first_id: n.first_id,
                object: None,
            });
        }
        for (ti, name) in &kernel_only {
            self.rs.tables[*ti].chains.retain(|c| c.name != *name);
        }
    }
}
