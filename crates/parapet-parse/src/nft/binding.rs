//! nft's anonymous chains (`jump { … }`, `goto { … }`, "chain bindings"):
//! nft makes each body a chain of its own, bound to the rule, and jumps
//! to it; parapet does the same, naming the chain `__chainN` (the first
//! N free in the table), so every engine sees an ordinary jump.

use super::lexer::Res;
use super::lexer::{Tok, Token, SUBSTITUTED};
use super::table::Parser;

impl Parser {
    /// Replaces each `jump { … }` / `goto { … }` of the rule at the cursor
    /// with `jump __chainN`, and returns each new chain's name and tokens
    /// (`__chainN { … }`) to parse once the rule is read.
    /// nft refuses a binding inside another ("too many levels of
    /// nesting"), and so does parapet.
    pub(super) fn lift_anonymous_chains(&mut self, ti: usize) -> Res<Vec<Vec<Token>>> {
        let mut bodies = Vec::new();
        let (mut k, mut depth) = (self.pos, 0usize);
        while let Some(t) = self.toks.get(k) {
            match t.tok {
                Tok::Newline | Tok::Semi | Tok::Close if depth == 0 => break,
                Tok::Open => depth += 1,
                Tok::Close => depth -= 1,
                _ => {}
            }
            let binds = depth == 0
                && matches!(t.word(), Some("jump" | "goto"))
                && matches!(self.toks.get(k + 1).map(|t| &t.tok), Some(Tok::Open));
            k += 1;
            if !binds {
                continue;
            }
            let Some(close) = self.matching_close(k) else {
                // Unclosed: the rule's parser says so.
                break;
            };
            if let Some(inner) = self.toks[k + 1..close]
                .windows(2)
                .find(|w| matches!(w[0].word(), Some("jump" | "goto")) && w[1].tok == Tok::Open)
            {
                return Err((
                    inner[1].line,
                    inner[1].col,
                    "an anonymous chain inside another is not supported: nft refuses it (\"too many levels of nesting\"); give the inner chain a name".into(),
                ));
            }
            let name = self.free_chain_name(ti);
            self.chain_index(ti, &name);
            let name_tok = Token {
                tok: Tok::Word(name),
                // Not the text at its span (which is the '{').
                src: SUBSTITUTED,
                ..self.toks[k].clone()
            };
            let mut body = vec![name_tok.clone()];
            body.extend(self.toks.splice(k..=close, [name_tok]));
            bodies.push(body);
        }
        Ok(bodies)
    }

    /// The index of the `}` closing the `{` at `open`.
    fn matching_close(&self, open: usize) -> Option<usize> {
        let mut depth = 0usize;
        for (k, t) in self.toks.iter().enumerate().skip(open) {
            match t.tok {
                Tok::Open => depth += 1,
                Tok::Close => {
                    depth -= 1;
                    if depth == 0 {
                        return Some(k);
                    }
                }
                _ => {}
            }
        }
        None
    }

    /// `__chainN` for the first N that names no chain of the table yet.
    fn free_chain_name(&self, ti: usize) -> String {
        let chains = &self.rs.tables[ti].chains;
        (0..)
            .map(|n| format!("__chain{n}"))
            .find(|name| !chains.iter().any(|c| &c.name == name))
            .expect("an unused name")
    }

    /// Parses a lifted body as `chain __chainN { … }` in table `ti`.
    pub(super) fn anonymous_chain(&mut self, ti: usize, body: Vec<Token>) -> Res<()> {
        let toks = std::mem::replace(&mut self.toks, body);
        let pos = std::mem::replace(&mut self.pos, 0);
        let parsed = self.chain(ti);
        self.toks = toks;
        self.pos = pos;
        parsed
    }
}
