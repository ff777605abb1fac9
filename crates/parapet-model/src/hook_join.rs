//! Several base chains at one hook, as the kernel runs them: nft lets many
//! base chains (in one table or several, `inet filter input` beside `ip
//! filter input`) hook the same place with different priorities. The
//! kernel runs them one after the other in priority order; a packet goes on
//! only while each accepts it, and a drop (or reject) in any of them is
//! final.
//!
//! [`join_at_hook`] turns their decision lists (each already flattened,
//! `flatten.rs`) into one, with [`DecisionList`]'s own semantics:
//!
//! - an ACCEPT of every chain but the last becomes a counted `Return` that
//!   resumes at the next chain (the rule is counted, as the kernel counts
//!   it, and the scan goes on);
//! - a chain's policy that does not accept becomes a terminal entry of rule
//!   id 0 (the policy's counter) at the end of its block; an accepting one
//!   falls through to the next chain;
//! - a chain whose table covers one family only (`ip`, `ip6`) among chains
//!   of several gets that family conjoined to each of its entries, so the
//!   other family's packets pass it untouched, as in the kernel, where it
//!   is not registered for them.

use crate::field::{Family, Field};
use crate::flatten::{DecisionList, Entry, EntryKind};
use crate::interval::IntervalSet;
use crate::rule::{Matches, Verdict};

/// One decision list per chain, in the order the kernel runs them, each
/// with the one family its table covers (`None`: every family the hook is
/// registered for). Returns one list that decides as the chain of them.
pub fn join_at_hook(chains: Vec<(DecisionList, Option<Family>)>) -> DecisionList {
    let n = chains.len();
    let mut entries: Vec<Entry> = Vec::new();
    let mut set_ref_count = 0;
    let mut policy = Verdict::Accept;
    for (k, (list, family)) in chains.into_iter().enumerate() {
        let last = k + 1 == n;
        let only = family.map(|f| {
            let mut m = Matches::any();
            m.constrain(Field::Family, IntervalSet::point(f.value()));
            m
        });
        set_ref_count = set_ref_count.max(list.set_ref_count);
        let base = entries.len() as u32;
        // the last chain's policy is the list's, unless it covers one
        // family only (the other family's packets then pass)
        let policy_entry = !list.policy.passes() && (!last || only.is_some());
        let end = base + list.entries.len() as u32 + u32::from(policy_entry);
        for mut e in list.entries {
            e.kind = match e.kind {
                EntryKind::Decide(Verdict::Accept) if !last => EntryKind::Return {
                    resume: end,
                    counted: true,
                },
                EntryKind::Return { resume, counted } => EntryKind::Return {
                    resume: resume + base,
                    counted,
                },
                other => other,
            };
            if let Some(m) = &only {
                e.matches = e.matches.and(m);
            }
            entries.push(e);
        }
        if policy_entry {
            entries.push(Entry {
                rule_id: 0,
                matches: only.clone().unwrap_or_else(Matches::any),
                kind: EntryKind::Decide(list.policy.clone()),
                limit: None,
                recent: None,
                hashlimit: None,
                time: None,
                dynset: None,
                quota: None,
                statistic: None,
                set_mark: None,
            });
        } else if last {
            policy = list.policy;
        }
    }
    DecisionList {
        entries,
        policy,
        set_ref_count,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flatten::flatten;
    use crate::packet::Packet;
    use crate::rule::{Action, BaseChain, Chain, ChainId, Hook, Rule, Ruleset, Table, TableFamily};

    fn port(p: u128) -> Matches {
        let mut m = Matches::any();
        m.constrain(Field::DstPort, IntervalSet::point(p));
        m
    }

    fn chain(name: &str, policy: Verdict, rules: Vec<Rule>) -> Chain {
        Chain {
            name: name.into(),
            base: Some(BaseChain {
                hook: Hook::Input,
                priority: 0,
                policy,
                counters: Default::default(),
            }),
            rules,
        }
    }

    /// The scan of `DecisionList`'s documentation: the deciding rule id and
    /// verdict, and the counted non-terminal rules before it.
    fn scan(list: &DecisionList, pkt: &Packet) -> (u32, Verdict, Vec<u32>) {
        let mut i = 0;
        let mut seen = Vec::new();
        while i < list.entries.len() {
            let e = &list.entries[i];
            if e.matches.matches(pkt, &mut |_| false) {
                match &e.kind {
                    EntryKind::Decide(v) => return (e.rule_id, v.clone(), seen),
                    EntryKind::Return { resume, counted } => {
                        if *counted {
                            seen.push(e.rule_id);
                        }
                        i = *resume as usize;
                        continue;
                    }
                    _ => seen.push(e.rule_id),
                }
            }
            i += 1;
        }
        (0, list.policy.clone(), seen)
    }

    #[test]
    fn a_packet_must_pass_every_chain_and_a_drop_is_final() {
        // chain a (ip, first): 22 accept, 23 drop, policy accept
        // chain b (inet, second): 22 drop, 80 accept, policy drop
        let a = chain(
            "a",
            Verdict::Accept,
            vec![
                Rule::new(1, port(22), Action::Verdict(Verdict::Accept)),
                Rule::new(2, port(23), Action::Verdict(Verdict::Drop)),
            ],
        );
        let b = chain(
            "b",
            Verdict::Drop,
            vec![
                Rule::new(3, port(22), Action::Verdict(Verdict::Drop)),
                Rule::new(4, port(80), Action::Verdict(Verdict::Accept)),
            ],
        );
        let mut rs = Ruleset::default();
        for (name, fam, c) in [("x", TableFamily::Ip, a), ("y", TableFamily::Inet, b)] {
            rs.tables.push(Table {
                name: name.into(),
                family: fam,
                chains: vec![c],
            });
        }
        let la = flatten(&rs, ChainId { table: 0, chain: 0 }).unwrap();
        let lb = flatten(&rs, ChainId { table: 1, chain: 0 }).unwrap();
        let j = join_at_hook(vec![(la, Some(Family::V4)), (lb, None)]);
        let v4 = |p: u16| Packet::v4(0x0a00_0001, 0x0a00_0002, 6, 1000, p);
        let v6 = |p: u16| {
            let mut k = v4(p);
            k.family = Family::V6;
            k
        };
        // accepted by a's rule 1 (counted), then dropped by b's rule 3
        assert_eq!(scan(&j, &v4(22)), (3, Verdict::Drop, vec![1]));
        // dropped by a: final
        assert_eq!(scan(&j, &v4(23)), (2, Verdict::Drop, vec![]));
        // a's accepting policy passes it on to b
        assert_eq!(scan(&j, &v4(80)), (4, Verdict::Accept, vec![]));
        assert_eq!(scan(&j, &v4(81)), (0, Verdict::Drop, vec![]));
        // IPv6: a is not there
        assert_eq!(scan(&j, &v6(23)), (0, Verdict::Drop, vec![]));
        assert_eq!(scan(&j, &v6(80)), (4, Verdict::Accept, vec![]));
        // b first, a second (ip, last): b's drop policy is an entry; a's
        // accepting policy leaves IPv6 packets accepted
        let la = flatten(&rs, ChainId { table: 0, chain: 0 }).unwrap();
        let lb = flatten(&rs, ChainId { table: 1, chain: 0 }).unwrap();
        let j = join_at_hook(vec![(lb, None), (la, Some(Family::V4))]);
        assert_eq!(scan(&j, &v4(80)), (0, Verdict::Accept, vec![4]));
        assert_eq!(scan(&j, &v4(22)), (3, Verdict::Drop, vec![]));
        assert_eq!(scan(&j, &v4(81)), (0, Verdict::Drop, vec![]));
    }
}
