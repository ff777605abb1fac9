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
//!
//! And one recovery: a node whose next log message is gone (the log's
//! horizon passed it) re-bootstraps from a snapshot while it keeps
//! running. What it held then is "stale" until the snapshot or the tail
//! after it says otherwise (an add or del of the element, or a local
//! change); once the tail is caught up, what is still stale was removed
//! in the lost part of the log and is removed here too. The snapshot's
//! adds of elements already held with the same expiry are not applied
//! again: no reban storm, and no unban before the tail is read.

use crate::wire::{FleetMsg, Kind};
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, DefaultHasher, Hash, Hasher};
use std::sync::Arc;

/// The hasher of maps keyed by [`element_key`]s: the key is already a
/// SipHash of the element, so the map uses it as it is instead of hashing
/// it a second time.
#[derive(Default)]
pub struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only u64 keys are hashed; fold anything else all the same.
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// A map keyed by [`element_key`].
pub type KeyMap<V> = HashMap<u64, V, BuildHasherDefault<KeyHasher>>;
/// A set of [`element_key`]s.
pub type KeySet = HashSet<u64, BuildHasherDefault<KeyHasher>>;

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
    origins: HashMap<Arc<str>, u64>,
    /// Element subject hash → (own sequence in flight, overridden by a
    /// remote change since).
    pending: KeyMap<(u64, bool)>,
    /// While re-bootstrapping: element key → absolute expiry (0:
    /// permanent) of what the node held and no one has touched since.
    stale: Option<KeyMap<u64>>,
}

/// Expiries closer than this are the same ban (the snapshot writer
/// computed its expiries from its own clock's "now + remaining").
const SAME_EXPIRY_MS: u64 = 2_000;

fn key(m: &FleetMsg) -> u64 {
    if m.kind == Kind::Flush {
        let mut h = DefaultHasher::new();
        true.hash(&mut h);
        m.set.hash(&mut h);
        m.elem.hash(&mut h);
        return h.finish();
    }
    element_key(&m.set, &m.elem)
}

/// The key of element `elem` (its canonical text) of set `set`.
pub fn element_key(set: &str, elem: &str) -> u64 {
    let mut h = DefaultHasher::new();
    false.hash(&mut h);
    set.hash(&mut h);
    elem.hash(&mut h);
    h.finish()
}

impl Replica {
    /// For node `node`.
    pub fn new(node: &str) -> Replica {
        Replica {
            node: node.to_string(),
            origins: HashMap::new(),
            pending: KeyMap::default(),
            stale: None,
        }
    }

    /// Starts a re-bootstrap: `held` is every live element of the shared
    /// sets ([`element_key`] → absolute expiry, 0 = permanent).
    pub fn begin_resync(&mut self, held: KeyMap<u64>) {
        self.stale = Some(held);
    }

    /// A snapshot's add during a re-bootstrap: whether the node already
    /// holds the element with this expiry (then it is not applied again).
    /// Either way the element is no longer stale.
    pub fn snapshot_holds(&mut self, m: &FleetMsg) -> bool {
        let Some(stale) = &mut self.stale else {
            return false;
        };
        stale.remove(&key(m)).is_some_and(|e| {
            (e == 0) == (m.expires == 0) && e.abs_diff(m.expires) <= SAME_EXPIRY_MS
        })
    }

    /// Whether a re-bootstrap is under way.
    pub fn resyncing(&self) -> bool {
        self.stale.is_some()
    }

    /// Ends a re-bootstrap (the tail is caught up): the keys of the
    /// elements still stale, to remove, except own changes in flight.
    pub fn end_resync(&mut self) -> KeySet {
        let stale = self.stale.take().unwrap_or_default();
        stale
            .into_keys()
            .filter(|k| !self.pending.contains_key(k))
            .collect()
    }

    /// A local change was queued for publishing.
    pub fn local(&mut self, m: &FleetMsg) {
        if let Some(stale) = &mut self.stale {
            stale.remove(&key(m));
        }
        if self.pending.len() >= MAX_PENDING {
            self.pending.clear();
        }
        self.pending.insert(key(m), (m.seq, false));
    }

    /// Decides about a consumed message (in stream order).
    pub fn decide(&mut self, m: &FleetMsg) -> Decision {
        let mut mark = self.origins.get(&*m.origin).copied();
        let d = self.decide_with_mark(m, &mut mark);
        self.set_mark(&m.origin, mark);
        d
    }

    /// Decides about consumed messages in stream order and keeps those to
    /// apply; returns how many were skipped. The same decisions as
    /// [`Replica::decide`] one by one, with one origin lookup per run of
    /// one origin's changes (a batch is one run) instead of two per change.
    pub fn decide_all(&mut self, msgs: &mut Vec<FleetMsg>) -> usize {
        let before = msgs.len();
        let mut run: Option<(Arc<str>, Option<u64>)> = None;
        msgs.retain(|m| {
            let same = run
                .as_ref()
                .is_some_and(|(o, _)| Arc::ptr_eq(o, &m.origin) || **o == *m.origin);
            if !same {
                if let Some((o, mark)) = run.take() {
                    self.set_mark(&o, mark);
                }
                run = Some((m.origin.clone(), self.origins.get(&*m.origin).copied()));
            }
            let mark = &mut run.as_mut().expect("set above").1;
            self.decide_with_mark(m, mark) == Decision::Apply
        });
        if let Some((o, mark)) = run {
            self.set_mark(&o, mark);
        }
        before - msgs.len()
    }

    /// Records `origin`'s high-water mark (when there is room for it).
    fn set_mark(&mut self, origin: &Arc<str>, mark: Option<u64>) {
        let Some(seq) = mark else { return };
        let room = self.origins.len() < MAX_ORIGINS;
        match self.origins.get_mut(&**origin) {
            Some(hwm) => *hwm = seq,
            None if room => {
                self.origins.insert(origin.clone(), seq);
            }
            None => {}
        }
    }

    /// The decision, given (and advancing) the origin's high-water mark.
    fn decide_with_mark(&mut self, m: &FleetMsg, mark: &mut Option<u64>) -> Decision {
        // The element's key only when a map may hold it: remote changes
        // on a node with nothing in flight and no re-bootstrap (the common
        // case) need no hashing at all.
        let k = (self.stale.is_some() || !self.pending.is_empty()).then(|| key(m));
        // The tail touched it: its state is the log's from here on.
        if let (Some(stale), Some(k)) = (&mut self.stale, k) {
            stale.remove(&k);
        }
        if mark.is_some_and(|hwm| m.seq <= hwm) {
            return Decision::SkipStale;
        }
        *mark = Some(m.seq);
        let Some(k) = k else {
            return Decision::Apply;
        };
        if *m.origin == *self.node {
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

    #[test]
    fn resync_keeps_what_the_snapshot_the_tail_or_the_node_touched() {
        let k = |e: &str| element_key("s", e);
        let mut r = Replica::new("a");
        let el = |e: &str, kind, expires| FleetMsg {
            expires,
            elem: e.into(),
            ..m("b", 9, kind)
        };
        r.local(&el("10.0.0.9", Kind::Add, 0)); // own, in flight
        r.begin_resync(KeyMap::from_iter([
            (k("10.0.0.1"), 5_000), // in the snapshot, same expiry
            (k("10.0.0.2"), 5_000), // in the snapshot, other expiry
            (k("10.0.0.3"), 0),     // touched by the tail
            (k("10.0.0.4"), 0),     // changed here meanwhile
            (k("10.0.0.5"), 0),     // removed in the lost part
            (k("10.0.0.9"), 0),     // own, in flight
        ]));
        assert!(r.resyncing());
        assert!(r.snapshot_holds(&el("10.0.0.1", Kind::Add, 6_000)));
        assert!(!r.snapshot_holds(&el("10.0.0.2", Kind::Add, 60_000)));
        assert!(!r.snapshot_holds(&el("10.0.0.7", Kind::Add, 0)));
        assert_eq!(r.decide(&el("10.0.0.3", Kind::Del, 0)), Decision::Apply);
        let mut own = el("10.0.0.4", Kind::Add, 0);
        own.origin = "a".into();
        own.seq = 20;
        r.local(&own);
        assert_eq!(r.end_resync(), KeySet::from_iter([k("10.0.0.5")]));
        assert!(!r.resyncing());
        // Not resyncing: a snapshot add is always applied.
        assert!(!r.snapshot_holds(&el("10.0.0.1", Kind::Add, 5_000)));
    }

    proptest::proptest! {
        /// `decide_all` over a round decides as `decide` one by one:
        /// random rounds of three origins (one our own, some changes in
        /// flight), duplicates and replays included.
        #[test]
        fn decide_all_equals_one_by_one(
            own in proptest::collection::vec((0u64..12, 0usize..3), 0..8),
            rounds in proptest::collection::vec(
                proptest::collection::vec((0usize..3, 1u64..12, 0usize..3, proptest::bool::ANY), 0..12),
                1..5,
            ),
            resync in proptest::bool::ANY,
        ) {
            let origins: [Arc<str>; 3] = ["a".into(), "b".into(), "c".into()];
            let msg = |o: usize, seq: u64, e: usize, add: bool| FleetMsg {
                kind: if add { Kind::Add } else { Kind::Del },
                origin: origins[o].clone(),
                seq,
                expires: 0,
                set: "s".into(),
                elem: format!("10.0.0.{e}"),
            };
            let (mut one, mut all) = (Replica::new("a"), Replica::new("a"));
            for r in [&mut one, &mut all] {
                for &(seq, e) in &own {
                    r.local(&msg(0, seq + 1, e, true));
                }
                if resync {
                    r.begin_resync(KeyMap::from_iter([(element_key("s", "10.0.0.1"), 0)]));
                }
            }
            for round in rounds {
                let msgs: Vec<FleetMsg> = round.iter().map(|&(o, s, e, a)| msg(o, s, e, a)).collect();
                let want: Vec<FleetMsg> = msgs
                    .iter()
                    .filter(|m| one.decide(m) == Decision::Apply)
                    .cloned()
                    .collect();
                let mut got = msgs.clone();
                let skipped = all.decide_all(&mut got);
                proptest::prop_assert_eq!(&got, &want);
                proptest::prop_assert_eq!(skipped, msgs.len() - want.len());
            }
            proptest::prop_assert_eq!(one.end_resync(), all.end_resync());
            proptest::prop_assert_eq!(one.pending(), all.pending());
        }
    }
}
