//! Where the kernel lets nft `reject` run: `nft_reject_validate` allows it
//! in chains reached from the input, forward, output and prerouting hooks
//! (and netdev ingress), and refuses a ruleset that reaches it from
//! postrouting ("Could not process rule: Operation not supported"). parapet
//! refuses the same files, at the `reject` statement. And where parapet
//! reads the socket owner (`meta skuid`/`skgid`): output and postrouting.
//! And where nft's reverse-path lookup may run (`fib saddr … oif`:
//! nft_fib_validate allows the oif result at prerouting, input and
//! forward only).

use super::table::Parser;
use parapet_model::*;

impl Parser {
    /// The rules that a base chain at one of `hooks` reaches (directly or
    /// by jump/goto) and that `pick` selects: (line, the base chain's
    /// name).
    fn reached_from(&self, hooks: &[Hook], pick: impl Fn(&Rule) -> bool) -> Vec<(u32, String)> {
        let mut found: Vec<(u32, String)> = Vec::new();
        for t in &self.rs.tables {
            let by_name = |n: &str| t.chains.iter().position(|c| c.name == n);
            let mut seen = vec![false; t.chains.len()];
            let mut stack: Vec<(usize, String)> = t
                .chains
                .iter()
                .enumerate()
                .filter(|(_, c)| c.base.as_ref().is_some_and(|b| hooks.contains(&b.hook)))
                .map(|(i, c)| (i, c.name.clone()))
                .collect();
            while let Some((ci, base)) = stack.pop() {
                if std::mem::replace(&mut seen[ci], true) {
                    continue;
                }
                for r in &t.chains[ci].rules {
                    if pick(r) {
                        found.push((r.origin.line, base.clone()));
                    }
                    if let Action::Jump(n) | Action::Goto(n) = &r.action {
                        if let Some(j) = by_name(n) {
                            stack.push((j, base.clone()));
                        }
                    }
                }
            }
        }
        found
    }

    /// The column of the first word `w` on `line` (1 if none).
    fn col_of(&self, line: u32, w: &str) -> u32 {
        self.toks
            .iter()
            .find(|t| t.line == line && t.word() == Some(w))
            .map_or(1, |t| t.col)
    }

    /// Once the file is read: an error at every `reject` in a chain that a
    /// postrouting base chain reaches (directly or by jump/goto).
    pub(super) fn refuse_reject_after_routing(&mut self) {
        let found = self.reached_from(&[Hook::Postrouting], |r| {
            matches!(r.action, Action::Verdict(Verdict::Reject { .. }))
        });
        for (line, base) in found {
            let col = self.col_of(line, "reject");
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

    /// Once the file is read: an error at every `meta skuid`/`skgid` in a
    /// chain that a prerouting, input or forward base chain reaches. The
    /// kernel evaluates them there (on the socket early demux attached to
    /// a received packet), which parapet cannot see: it reads the owner of
    /// packets this host sends only.
    pub(super) fn refuse_owner_before_output(&mut self) {
        let found = self.reached_from(
            &[Hook::Prerouting, Hook::Input, Hook::Forward, Hook::Ingress],
            |r| {
                [Field::SkUid, Field::SkGid]
                    .iter()
                    .any(|f| r.all_matches().get(*f).is_some())
            },
        );
        for (line, base) in found {
            let col = self.col_of(line, "meta");
            self.errs.push(
                line,
                col,
                format!(
                    "meta skuid/skgid is supported in output and postrouting chains only: the \
                     chain {base} reaches it, where a received packet's socket (attached by \
                     early demux) is one parapet cannot read"
                ),
            );
        }
    }

    /// Once the file is read: an error at every `fib saddr … oif` in a
    /// chain that an output or postrouting base chain reaches, which the
    /// kernel refuses ("Operation not supported").
    pub(super) fn refuse_rev_path_after_output(&mut self) {
        let found = self.reached_from(&[Hook::Output, Hook::Postrouting], |r| {
            r.all_matches().get(Field::RevPath).is_some()
        });
        for (line, base) in found {
            let col = self.col_of(line, "fib");
            self.errs.push(
                line,
                col,
                format!(
                    "fib saddr … oif (reverse path) is valid in prerouting, input and forward \
                     chains only: the chain {base} reaches it, and the kernel refuses it there \
                     (Operation not supported)"
                ),
            );
        }
    }
}
