//! Which consumed messages to apply: the replication state machine's
//! receive side. The stream's order is the fleet's order: every node
//! applies every message in stream order, so all end equal (the last
//! change of an element in the stream wins everywhere). Two refinements:
//!
//! - per-origin high-water marks: a message whose origin sequence is not
//!   above the last one applied from that origin is a duplicate (a
//!   re-publish after a crash) and is skipped;
//! - own messages: the node applied its own change when it made it, so
//!   its own message coming back is skipped, unless another node's
//!   change of the same element was applied in between (then the stream
//!   says ours is later, and it is applied again to converge); an own
//!   message older than a newer own change of the same element still in
//!   flight is skipped too (no flapping of a ban then unban).

use crate::wire::{FleetMsg, Kind};
use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

/// Most origins tracked (a fleet is far smaller; a hostile publisher
/// inventing ids cannot grow this).
pub const MAX_ORIGINS: usize = 4096;
/// Most own changes in flight tracked; beyond, own messages are simply
/// applied again (still convergent, at worst a brief flap).
pub const MAX_PENDING: usize = 1 << 20;

/// What to do with a consumed message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Apply it.
    Apply,
    /// Our own change, already applied locally.
    SkipOwn,
    /// A duplicate or stale message of its origin.
    SkipStale,
}

/// The receive-side state.
pub struct Replica {
    node: String,
    origins: HashMap<String, u64>,
    /// Element subject hash → (own sequence in flight, overridden by a
    /// remote change since).
    pending: HashMap<u64, (u64, bool)>,
}

fn key(m: &FleetMsg) -> u64 {
    let mut h = DefaultHasher::new();
    (m.kind == Kind::Flush).hash(&mut h);
    m.set.hash(&mut h);
    m.elem.hash(&mut h);
    h.finish()
}

impl Replica {
    /// For node `node`.
    pub fn new(node: &str) -> Replica {
        Replica {
            node: node.to_string(),
            origins: HashMap::new(),
            pending: HashMap::new(),
        }
    }

    /// A local change was queued for publishing.
    pub fn local(&mut self, m: &FleetMsg) {
        if self.pending.len() >= MAX_PENDING {
            self.pending.clear();
        }
        self.pending.insert(key(m), (m.seq, false));
    }

    /// Decides about a consumed message (in stream order).
    pub fn decide(&mut self, m: &FleetMsg) -> Decision {
        if let Some(&hwm) = self.origins.get(&m.origin) {
            if m.seq <= hwm {
                return Decision::SkipStale;
            }
        }
        let room = self.origins.len() < MAX_ORIGINS;
        match self.origins.get_mut(&m.origin) {
            Some(hwm) => *hwm = m.seq,
            None if room => {
                self.origins.insert(m.origin.clone(), m.seq);
            }
            None => {}
        }
        let k = key(m);
        if m.origin == self.node {
            return match self.pending.get(&k).copied() {
                Some((s, _)) if m.seq < s => Decision::SkipOwn,
                Some((s, overridden)) if m.seq == s => {
                    self.pending.remove(&k);
                    if overridden {
                        Decision::Apply
                    } else {
                        Decision::SkipOwn
                    }
                }
                _ => Decision::Apply,
            };
        }
        if let Some(p) = self.pending.get_mut(&k) {
            p.1 = true;
        }
        Decision::Apply
    }

    /// Forgets the high-water marks (a batch was not applied and comes
    /// again from the broker, in stream order).
    pub fn forget_origins(&mut self) {
        self.origins.clear();
    }

    /// Own changes in flight.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(origin: &str, seq: u64, kind: Kind) -> FleetMsg {
        FleetMsg {
            kind,
            origin: origin.into(),
            seq,
            expires: 0,
            set: "s".into(),
            elem: "10.0.0.1".into(),
        }
    }

    #[test]
    fn own_echo_skipped_unless_overridden() {
        let mut r = Replica::new("a");
        r.local(&m("a", 1, Kind::Add));
        assert_eq!(r.decide(&m("a", 1, Kind::Add)), Decision::SkipOwn);
        // Ban here, unban there, stream order: unban(b), ban(a): ours wins
        // in the stream, and we must re-apply it after applying theirs.
        r.local(&m("a", 2, Kind::Add));
        assert_eq!(r.decide(&m("b", 1, Kind::Del)), Decision::Apply);
        assert_eq!(r.decide(&m("a", 2, Kind::Add)), Decision::Apply);
    }

    #[test]
    fn stale_own_and_duplicates() {
        let mut r = Replica::new("a");
        r.local(&m("a", 1, Kind::Add));
        r.local(&m("a", 2, Kind::Del));
        assert_eq!(r.decide(&m("a", 1, Kind::Add)), Decision::SkipOwn);
        assert_eq!(r.decide(&m("a", 2, Kind::Del)), Decision::SkipOwn);
        assert_eq!(r.decide(&m("b", 5, Kind::Add)), Decision::Apply);
        assert_eq!(r.decide(&m("b", 5, Kind::Add)), Decision::SkipStale);
        assert_eq!(r.decide(&m("b", 4, Kind::Del)), Decision::SkipStale);
        // After a restart nothing is pending: own messages apply (in order).
        let mut r = Replica::new("a");
        assert_eq!(r.decide(&m("a", 3, Kind::Add)), Decision::Apply);
    }
}
