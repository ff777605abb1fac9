//! A compiled ruleset into the kernel: the one sequence `parapet run` and
//! `parapetd` share.
//!
//! [`Dataplane::install_ruleset`] takes the ruleset (for rule actions, log
//! rates and set references), the policy of the chain that was compiled,
//! the classifier image's bytes and the set store, and makes them live:
//! check that everything fits, load the referenced sets, write the
//! inactive image slot, swap, then write the rule actions and destroy the
//! sets nothing uses any more. Until the swap, packets see the old image;
//! a failure before it leaves the old ruleset live (the staged set
//! references and any sets created for the new one are dropped again).

use parapet_model::{Action, ChainId, Field, Ruleset};
use parapet_sets::SetStore;

use crate::counters::LogEvent;
use crate::error::{Error, Result};
use crate::{Dataplane, KernelVerdict};

/// The kernel's verdict for a model verdict (the reject type travels
/// separately, see [`Dataplane::install_actions`]).
pub fn kernel_verdict(v: &parapet_model::Verdict) -> KernelVerdict {
    match v {
        parapet_model::Verdict::Accept => KernelVerdict::Accept,
        parapet_model::Verdict::Drop => KernelVerdict::Drop,
        parapet_model::Verdict::Reject { .. } => KernelVerdict::Reject,
    }
}

/// The largest rule id of `rs` (0 for an empty ruleset): the kernel's
/// action, counter and log tables need `max_rule_id + 1` entries.
pub fn max_rule_id(rs: &Ruleset) -> u32 {
    rs.rules().map(|r| r.id).max().unwrap_or(0)
}

/// Whether chain `chain` of `rs`, or a chain it jumps or goes to, matches
/// `--ctstate` or the conntrack status (`ct status`): the kernel then
/// needs the conntrack lookup on
/// ([`Dataplane::set_conntrack`]), or every packet is UNTRACKED there.
pub fn needs_conntrack(rs: &Ruleset, chain: ChainId) -> bool {
    let mut seen = vec![chain];
    let mut todo = vec![chain];
    while let Some(id) = todo.pop() {
        let table = &rs.tables[id.table].name;
        for r in &rs.chain(id).rules {
            if r.all_matches().get(Field::CtState).is_some()
                || r.all_matches().get(Field::CtStatus).is_some()
            {
                return true;
            }
            if let Action::Jump(to) | Action::Goto(to) = &r.action {
                if let Some(next) = rs.find_chain(table, to) {
                    if !seen.contains(&next) {
                        seen.push(next);
                        todo.push(next);
                    }
                }
            }
        }
    }
    false
}

/// What [`Dataplane::install_ruleset`] makes live.
#[derive(Clone, Copy)]
pub struct Install<'a> {
    /// The ruleset (every rule's action and log settings, the set references).
    pub ruleset: &'a Ruleset,
    /// The compiled chain's policy (what the interim classifier falls back
    /// to when the walker refuses the image).
    pub policy: &'a parapet_model::Verdict,
    /// The classifier image (`parapet_image::Image::to_bytes`).
    pub image: &'a [u8],
    /// Where the referenced sets' elements come from; `None` when the
    /// ruleset references no sets (references then match nothing).
    pub sets: Option<&'a SetStore>,
    /// Log events per second for LOG rules without their own `-m limit`.
    pub log_rate: u32,
}

/// Why the kernel dataplane refuses `rs`, when a rule changes the packet
/// mark (`-j MARK`, nft `meta mark set`) and some rule reads the mark:
/// the programs do not write the mark, so later rules at the kernel's own
/// hooks, its NAT and `ip rule fwmark` would not see parapet's change (the
/// classifier itself decides as the kernel: later rules' mark matches are
/// rewritten, `mark_resolve.rs`). A change no rule of the ruleset reads is
/// not refused: see [`mark_note`].
pub fn mark_refusal(rs: &Ruleset) -> Option<String> {
    let r = rs.rules().find(|r| r.set_mark.is_some())?;
    let reader = rs
        .rules()
        .find(|r| parapet_model::reads_mark(r.all_matches()))?;
    Some(format!(
        "rule {} (line {}) changes the packet's mark (-j MARK / meta mark set) and rule {} (line {}) \
         matches the mark: the kernel dataplane does not write the mark yet, so the kernel's NAT, \
         'ip rule fwmark' and later hooks would not see it; keep the mark rules in iptables' \
         mangle table or nft (parapet check, trace and classify model them offline)",
        r.id, r.origin.line, reader.id, reader.origin.line
    ))
}

/// The warning `apply` gives for mark changes no rule of `rs` reads (fw4's
/// and routing marks): parapet enforces every other part of those rules
/// and leaves the mark to the host's own iptables/nft rules, as it leaves
/// other statements that decide nothing (docs/syntax.md, "Mark changes").
pub fn mark_note(rs: &Ruleset) -> Option<String> {
    if mark_refusal(rs).is_some() {
        return None;
    }
    let ids: Vec<String> = rs
        .rules()
        .filter(|r| r.set_mark.is_some())
        .map(|r| r.id.to_string())
        .collect();
    (!ids.is_empty()).then(|| {
        format!(
            "rule{} {} change{} the packet's mark, which no rule of the ruleset reads: the kernel \
             dataplane enforces the rest of {} and does not write the mark (the host's own \
             iptables/nft rules keep doing that)",
            if ids.len() == 1 { "" } else { "s" },
            ids.join(", "),
            if ids.len() == 1 { "s" } else { "" },
            if ids.len() == 1 { "it" } else { "them" },
        )
    })
}

impl Dataplane {
    /// Whether a ruleset with these rule ids and this image fits the
    /// loaded program: the error names what is too small.
    pub fn check_fits(&self, rs: &Ruleset, image_len: usize) -> Result<()> {
        let max = max_rule_id(rs);
        if max > self.max_rules() {
            return Err(Error::RuleOutOfRange {
                rule: max,
                max: self.max_rules(),
            });
        }
        if image_len > self.slot_capacity() {
            return Err(Error::ImageTooLarge {
                len: image_len,
                cap: self.slot_capacity(),
            });
        }
        Ok(())
    }

    /// Whether `chain` of `rs` matches ctstate; an error when it does and
    /// this program cannot look connections up (the kernel would see every
    /// packet as UNTRACKED: never silently wrong). `subject` names the
    /// chain in the message; `why` stands in when the program has no note
    /// on the lookup.
    pub fn needs_conntrack(
        &self,
        rs: &Ruleset,
        chain: ChainId,
        subject: &str,
        why: &str,
    ) -> std::result::Result<bool, String> {
        let needs = needs_conntrack(rs, chain);
        if needs && !self.conntrack_available() {
            return Err(format!(
                "{subject} matches ctstate, but the kernel dataplane cannot look packets up in \
                 conntrack ({}); every packet would be UNTRACKED there",
                self.conntrack_note().unwrap_or(why)
            ));
        }
        Ok(needs)
    }

    /// Every rule that can decide or log gets its action entry; entry 0 is
    /// the policy. A LOG rule's bucket comes from its `-m limit`, else
    /// `log_rate` per second with a burst of as many.
    pub fn install_actions(
        &mut self,
        rs: &Ruleset,
        policy: &parapet_model::Verdict,
        log_rate: u32,
    ) -> Result<()> {
        self.set_policy(kernel_verdict(policy))?;
        for r in rs.rules() {
            let (verdict, log) = match &r.action {
                Action::Verdict(v) => (v.clone(), r.log.is_some()),
                Action::Log(_) => (parapet_model::Verdict::Accept, true),
                _ => (parapet_model::Verdict::Accept, r.log.is_some()),
            };
            match &verdict {
                // the same type the image's verdict table carries
                parapet_model::Verdict::Reject { with } => {
                    let code = parapet_image::reject::reject_code(with.as_deref());
                    self.set_action_reject(r.id, code as u8, log)?;
                }
                v => self.set_action(r.id, kernel_verdict(v), log)?,
            }
            let (rate, burst) = match (&r.limit, log) {
                (_, false) => (0, 0),
                (Some(l), true) => ((l.rate / l.per.seconds()).max(1), l.burst.max(1)),
                (None, true) => (log_rate, log_rate.max(1)),
            };
            self.set_log_rate(r.id, rate, burst)?;
        }
        Ok(())
    }

    /// Makes `i` the live ruleset (see the module documentation). Returns
    /// the new image generation. All or nothing up to the swap; after it,
    /// only the action table and the clean-up of unused sets remain, which
    /// touch nothing the new image reads.
    ///
    /// When the ruleset [`needs_conntrack`] (`needs_ct`), the lookup is
    /// switched on before the swap; when it does not, off after it, so no
    /// image ever runs without the state it reads. A ruleset that needs it
    /// in a program without it is [`Error::ConntrackUnavailable`] before
    /// anything changes.
    pub fn install_ruleset_ct(&mut self, i: &Install, needs_ct: bool) -> Result<u32> {
        self.install_ruleset_hooks_ct(i, &[], needs_ct)
    }

    /// [`Dataplane::install_ruleset_ct`] that also makes `hooks`' images
    /// (each netfilter hook's chain, compiled from the same ruleset) live
    /// with the same swap. Hooks not named keep their image.
    pub fn install_ruleset_hooks_ct(
        &mut self,
        i: &Install,
        hooks: &[(crate::NfHook, &[u8])],
        needs_ct: bool,
    ) -> Result<u32> {
        if needs_ct && !self.conntrack_available() {
            // the same error set_conntrack gives, before anything changes
            self.set_conntrack(true)?;
        }
        let was = self.conntrack();
        if needs_ct {
            self.set_conntrack(true)?;
        }
        match self.install_ruleset_hooks(i, hooks) {
            Ok(generation) => {
                if !needs_ct {
                    self.set_conntrack(false)?;
                }
                Ok(generation)
            }
            Err(e) => {
                // the old image stays live, with the state it had
                let _ = self.set_conntrack(was);
                Err(e)
            }
        }
    }

    /// [`Dataplane::install_ruleset_ct`] without touching the conntrack
    /// switch.
    pub fn install_ruleset(&mut self, i: &Install) -> Result<u32> {
        self.install_ruleset_hooks(i, &[])
    }

    /// [`Dataplane::install_ruleset`] with the netfilter hooks' images
    /// ([`Dataplane::install_ruleset_hooks_ct`]).
    pub fn install_ruleset_hooks(
        &mut self,
        i: &Install,
        hooks: &[(crate::NfHook, &[u8])],
    ) -> Result<u32> {
        self.check_fits(i.ruleset, i.image.len())?;
        for (_, image) in hooks {
            self.check_fits(i.ruleset, image.len())?;
        }
        // The owner and TCP option switches go on before an image that
        // reads them goes live and off only after the last one is gone,
        // as the conntrack switch does: no image runs with owner words it
        // expects filled and finds 0 ("no socket"), nor without the
        // option area it walks (the walk is then abandoned).
        let switches = [
            (crate::load::CFG_OWNER, reads_owner(i.ruleset)),
            (crate::load::CFG_TCP_OPTIONS, reads_tcp_options(i.ruleset)),
            (crate::load::CFG_PATTERNS, reads_patterns(i.ruleset)),
            (crate::load::CFG_REV_PATH, reads_rev_path(i.ruleset)),
        ];
        // the lookups from lo want forwarding on there (src/rev_path.rs)
        if reads_rev_path(i.ruleset) {
            crate::rev_path::lo_forwarding()?;
        }
        let mut was = [false; 4];
        for ((word, on), was) in switches.iter().zip(&mut was) {
            *was = self.config.get(word, 0)? != 0;
            if *on {
                self.config.set(*word, 1, 0)?;
            }
        }
        let restore = |dp: &mut Self| {
            for ((word, _), was) in switches.iter().zip(was) {
                let _ = dp.config.set(*word, u32::from(was), 0);
            }
        };
        let staged = (|| -> Result<()> {
            // Elements go into the maps before the image that reads them.
            match i.sets {
                Some(store) => {
                    self.install_sets(&i.ruleset.set_refs, store)?;
                }
                None => {
                    for n in 0..crate::abi::MAX_SET_REFS {
                        self.undefine_set_ref(n)?;
                    }
                }
            }
            // A dynamic set's declared elements too (`dynset_seed.rs`).
            self.seed_dynsets(i.ruleset)?;
            for (hook, image) in hooks {
                self.write_hook_image(*hook, image)?;
            }
            self.write_image(i.image)
        })();
        if let Err(e) = staged {
            self.unstage();
            let _ = self.destroy_unused_sets();
            restore(self);
            return Err(e);
        }
        let generation = match self.swap() {
            Ok(g) => g,
            Err(e) => {
                restore(self);
                return Err(e);
            }
        };
        for (word, on) in switches {
            if !on {
                self.config.set(word, 0, 0)?;
            }
        }
        self.install_actions(i.ruleset, i.policy, i.log_rate)?;
        self.destroy_unused_sets()?;
        Ok(generation)
    }
}

/// Whether any rule of `rs` constrains the socket owner (`-m owner`, nft
/// `meta skuid|skgid`): the netfilter program reads it only then.
pub fn reads_owner(rs: &Ruleset) -> bool {
    use parapet_model::Field;
    rs.rules().any(|r| {
        [Field::SkUid, Field::SkGid]
            .iter()
            .any(|&f| r.all_matches().get(f).is_some())
    })
}

/// Whether any rule of `rs` tests a TCP option kind (`-m tcp
/// --tcp-option`): the entries copy the option area only then.
pub fn reads_tcp_options(rs: &Ruleset) -> bool {
    use parapet_model::Field;
    rs.rules().any(|r| {
        r.all_matches()
            .iter()
            .any(|(f, _)| matches!(f, Field::TcpOption(_)))
    })
}

/// Whether any rule of `rs` has a `-m string` match: the entries copy
/// the datagram only then.
pub fn reads_patterns(rs: &Ruleset) -> bool {
    rs.rules().any(|r| r.all_matches().has_payload())
}

/// Whether any rule of `rs` has a reverse-path check (`fib saddr [. iif]
/// oif`): the XDP and tc ingress entries look sources up only then.
pub fn reads_rev_path(rs: &Ruleset) -> bool {
    rs.rules()
        .any(|r| r.all_matches().get(parapet_model::Field::RevPath).is_some())
}

impl Dataplane {
    /// Whether the XDP and tc ingress entries look each packet's source
    /// up now (`parapet_config[CFG_REV_PATH]`, set by the installs).
    pub fn reads_rev_path(&self) -> Result<bool> {
        Ok(self.config.get(&crate::load::CFG_REV_PATH, 0)? != 0)
    }

    /// Whether the entries copy datagrams for `-m string` now
    /// (`parapet_config[CFG_PATTERNS]`, set by the installs).
    pub fn reads_patterns(&self) -> Result<bool> {
        Ok(self.config.get(&crate::load::CFG_PATTERNS, 0)? != 0)
    }

    /// Whether the netfilter program reads the socket owner now
    /// (`parapet_config[CFG_OWNER]`, set by the installs).
    pub fn reads_owner(&self) -> Result<bool> {
        Ok(self.config.get(&crate::load::CFG_OWNER, 0)? != 0)
    }

    /// Whether the entries copy TCP option areas now
    /// (`parapet_config[CFG_TCP_OPTIONS]`, set by the installs).
    pub fn reads_tcp_options(&self) -> Result<bool> {
        Ok(self.config.get(&crate::load::CFG_TCP_OPTIONS, 0)? != 0)
    }
}

/// One line for a LOG event:
/// `parapet log: PREFIX rule 2 Accept udp 10.0.0.1:5000 > 10.0.0.2:53 len 48`.
/// The prefix is the rule's `--log-prefix` in `rs` (the ruleset the event's
/// rule id belongs to).
pub fn log_line(rs: &Ruleset, ev: &LogEvent) -> String {
    let k = &ev.key;
    let addr = |b: &[u8; 16]| -> String {
        if k.family == 4 {
            std::net::Ipv4Addr::new(b[12], b[13], b[14], b[15]).to_string()
        } else {
            format!("[{}]", std::net::Ipv6Addr::from(*b))
        }
    };
    let proto = parapet_model::protocol_name(k.proto)
        .map(str::to_string)
        .unwrap_or_else(|| k.proto.to_string());
    let prefix = rs
        .rules()
        .find(|r| r.id == ev.rule_id)
        .and_then(|r| match &r.action {
            Action::Log(spec) => spec.prefix.clone(),
            _ => r.log.as_ref().and_then(|l| l.prefix.clone()),
        })
        .unwrap_or_default();
    format!(
        "parapet log: {prefix}rule {} {:?} {proto} {}:{} > {}:{} len {}",
        ev.rule_id,
        ev.verdict,
        addr(&k.src),
        k.sport,
        addr(&k.dst),
        k.dport,
        k.pkt_len
    )
}

#[cfg(test)]
mod tests {
    use super::{mark_note, mark_refusal};
    use parapet_parse::{parse, Format};

    fn rules(body: &str) -> parapet_model::Ruleset {
        let text = format!("*filter\n:FORWARD ACCEPT [0:0]\n{body}COMMIT\n");
        parse(&text, "m.rules", Format::IptablesSave)
            .unwrap()
            .ruleset
    }

    #[test]
    fn a_mark_change_is_refused_only_when_a_rule_reads_the_mark() {
        let set = "-A FORWARD -i ts0 -j MARK --set-mark 7\n";
        let read = "-A FORWARD -m mark --mark 7 -j ACCEPT\n";
        let rs = rules(&format!("{set}{read}"));
        let why = mark_refusal(&rs).unwrap();
        assert!(
            why.contains("rule 1 (line 3)") && why.contains("rule 2 (line 4)"),
            "{why}"
        );
        assert_eq!(mark_note(&rs), None);
        // a reader before the change reads the host's mark, still refused:
        // parapet cannot tell where the host's NAT or routing reads it
        let rs = rules(&format!("{read}{set}"));
        assert!(mark_refusal(&rs).is_some());
        let rs = rules(&format!("{set}-A FORWARD -j ACCEPT\n"));
        assert_eq!(mark_refusal(&rs), None);
        let note = mark_note(&rs).unwrap();
        assert!(
            note.starts_with("rule 1 changes the packet's mark"),
            "{note}"
        );
        let rs = rules(read);
        assert_eq!((mark_refusal(&rs), mark_note(&rs)), (None, None));
    }
}
