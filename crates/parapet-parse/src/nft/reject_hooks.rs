//! Where the kernel lets nft `reject` run: `nft_reject_validate` allows it
//! in chains reached from the input, forward, output and prerouting hooks
//! (and netdev ingress), and refuses a ruleset that reaches it from
//! postrouting ("Could not process rule: Operation not supported"). parapet
//! refuses the same files, at the `reject` statement.

use super::table::Parser;
use parapet_model::*;

impl Parser {
    /// Once the file is read: an error at every `reject` in a chain that a
    /// postrouting base chain reaches (directly or by jump/goto).
    pub(super) fn refuse_reject_after_routing(&mut self) {
        let mut found: Vec<(u32, String)> = Vec::new();
        for t in &self.rs.tables {
            let by_name = |n: &str| t.chains.iter().position(|c| c.name == n);
            let mut seen = vec![false; t.chains.len()];
            let mut stack: Vec<(usize, String)> = t
                .chains
                .iter()
                .enumerate()
                .filter(|(_, c)| c.base.as_ref().is_some_and(|b| b.hook == Hook::Postrouting))
                .map(|(i, c)| (i, c.name.clone()))
                .collect();
            while let Some((ci, base)) = stack.pop() {
                if std::mem::replace(&mut seen[ci], true) {
                    continue;
                }
                for r in &t.chains[ci].rules {
                    match &r.action {
                        Action::Verdict(Verdict::Reject { .. }) => {
                            found.push((r.origin.line, base.clone()));
                        }
                        Action::Jump(n) | Action::Goto(n) => {
                            if let Some(j) = by_name(n) {
                                stack.push((j, base.clone()));
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
        for (line, base) in found {
            let col = self
                .toks
                .iter()
                .find(|t| t.line == line && t.word() == Some("reject"))
                .map_or(1, |t| t.col);
            self.errs.push(
                line,
                col,
                format!(
                    "reject is not valid after routing: the postrouting chain {base} reaches \
                     it, and the kernel refuses reject there (Operation not supported); \
                     drop instead, or reject in input, forward, output or prerouting"
                ),
            );
        }
    }
}
