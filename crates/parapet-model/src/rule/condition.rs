//! A rule's stateful conditions (`limit`, `recent`, `hashlimit`, a
//! dynamic set, `quota`, `-m statistic`) one by one, in the order the kernel checks them.
//!
//! The kernel runs a rule's matches as written and stops at the first
//! that fails, so a stateful match runs (and changes its state) only when
//! every match before it matched: in `-m recent --update … -m limit …` the
//! limit spends a token only for the packets the recent table admitted,
//! and in `-m limit … -m recent --set` the table records only the packets
//! the limit admitted. A rule with more than one keeps their order
//! ([`Rule::stateful_order`]); the linear engine checks them in it, and
//! flattening chains them as guards, one condition per entry
//! (`flatten.rs`). A time window is not one of them: it keeps no state and
//! is checked first (the parsers refuse one written after a stateful
//! match).

use super::{Limit, Rule};
use crate::dynset::Dynset;
use crate::hashlimit::Hashlimit;
use crate::packet::Packet;
use crate::quota::Quota;
use crate::recent::Recent;
use crate::stateful::Stateful;
use crate::statistic::Statistic;
use serde::{Deserialize, Serialize};

/// Which stateful condition.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum StatefulKind {
    /// `-m limit`, nft `limit rate`.
    Limit,
    /// `-m recent`.
    Recent,
    /// `-m hashlimit`.
    Hashlimit,
    /// An nft dynamic set.
    Dynset,
    /// A dynamic set's membership test before the rule's dynamic-set
    /// statement ([`Rule::dynset_lookup`]).
    DynsetLookup,
    /// `-m quota`, nft `quota`.
    Quota,
    /// `-m statistic`, nft `numgen inc`.
    Statistic,
}

impl StatefulKind {
    /// The order of a rule's conditions when it does not say (it has at
    /// most one, or a dynamic set's lookup and then its statement).
    pub const DEFAULT_ORDER: [StatefulKind; 7] = [
        StatefulKind::Limit,
        StatefulKind::Recent,
        StatefulKind::Hashlimit,
        StatefulKind::DynsetLookup,
        StatefulKind::Dynset,
        StatefulKind::Quota,
        StatefulKind::Statistic,
    ];
}

/// One of a rule's stateful conditions, borrowed from it.
#[derive(Copy, Clone, Debug)]
pub enum Condition<'a> {
    /// Its limit.
    Limit(&'a Limit),
    /// Its recent table check.
    Recent(&'a Recent),
    /// Its hashlimit.
    Hashlimit(&'a Hashlimit),
    /// Its dynamic set.
    Dynset(&'a Dynset),
    /// Its quota.
    Quota(&'a Quota),
    /// Its `-m statistic`.
    Statistic(&'a Statistic),
}

impl Condition<'_> {
    /// Asks `stateful` whether rule `rule_id`'s condition admits `pkt`
    /// now (its state changes as the kernel's would).
    pub fn admit(&self, stateful: &mut dyn Stateful, rule_id: u32, pkt: &Packet) -> bool {
        match self {
            Condition::Limit(l) => stateful.check(rule_id, l),
            Condition::Recent(r) => stateful.recent(rule_id, r, pkt),
            Condition::Hashlimit(h) => stateful.hashlimit(rule_id, h, pkt),
            Condition::Dynset(d) => stateful.dynset(rule_id, d, pkt),
            Condition::Quota(q) => stateful.quota(rule_id, q, pkt),
            Condition::Statistic(s) => stateful.statistic(rule_id, s),
        }
    }
}

impl Rule {
    /// The rule's stateful conditions in the order the kernel checks
    /// them: [`Rule::stateful_order`] when it is set, else its one
    /// condition (if any).
    pub fn conditions(&self) -> Vec<Condition<'_>> {
        let of = |k: &StatefulKind| match k {
            StatefulKind::Limit => self.limit.as_ref().map(Condition::Limit),
            StatefulKind::Recent => self.recent.as_ref().map(Condition::Recent),
            StatefulKind::Hashlimit => self.hashlimit.as_ref().map(Condition::Hashlimit),
            StatefulKind::Dynset => self.dynset.as_ref().map(Condition::Dynset),
            StatefulKind::DynsetLookup => self.dynset_lookup.as_ref().map(Condition::Dynset),
            StatefulKind::Quota => self.quota.as_ref().map(Condition::Quota),
            StatefulKind::Statistic => self.statistic.as_ref().map(Condition::Statistic),
        };
        if self.stateful_order.is_empty() {
            StatefulKind::DEFAULT_ORDER.iter().filter_map(of).collect()
        } else {
            self.stateful_order.iter().filter_map(of).collect()
        }
    }
}
