//! nft dynamic sets (`nft_dynset.c`, `nft_lookup.c`): sets that rules fill
//! as packets pass (`add @s { ip saddr }`, `update @s { ip saddr timeout
//! 60s }`, `delete @s { ip saddr }`, the older `meter`), optionally with a
//! limit per element (`add @s { ip saddr limit rate over 3/minute }`), and
//! rules that test membership (`ip saddr @s`), with the kernel's semantics
//! for every engine.
//!
//! Each is a rule's *stateful condition* (see `stateful.rs`): checked after
//! the rule's other matches, and when it fails the rule does not match and
//! evaluation goes on with the next rule. What each answers, as the kernel:
//! - `add`/`update` (`nft_dynset_eval`): the key (the packet's source or
//!   destination address) is looked up; a live element is kept (`update`
//!   also moves its expiry to now + the timeout); an absent or expired one
//!   is created — unless the set already holds `size` elements, when the
//!   rule fails (`NFT_BREAK`) and nothing is added. The element's limit is
//!   then evaluated (a new element's bucket starts full, `nft_limit_clone`):
//!   the rule goes on when it passes (`over`: when it does not). Without a
//!   limit the statement always passes.
//! - `delete`: removes the element; always passes.
//! - lookup (`ip saddr @s`, `!= @s`): a live element is there.
//!
//! A key is one address, or an address and a service (`type ipv4_addr .
//! inet_service`: `add @s { ip saddr . tcp dport }`, `{ ip saddr . 10002
//! }`, `ip saddr . tcp dport @s`): the port is the packet's source or
//! destination port, or a number the rule writes.
//!
//! Timeouts are in jiffies, as the kernel's (`nsecs_to_jiffies64` of the
//! milliseconds nft sends; an element expires when `jiffies >= expiry`).
//! Expired elements are dropped when a rule next touches their key;
//! until then they count toward `size` (the kernel's garbage collector
//! runs on its own schedule, which no engine can replay: a set close to
//! its size may refuse a key a little earlier here or in the kernel).

use crate::field::Family;
use crate::nft_bucket::NftBucket;
use crate::packet::Packet;
use crate::recent::{masked, table_id};
use crate::time_unit::TimeUnit;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// nft's size of a dynamic set declared without `size` (and of a meter).
pub const DEFAULT_SIZE: u32 = 65535;
/// The largest per-element limit rate the image row holds (20 bits).
pub const MAX_LIMIT_RATE: u32 = (1 << 20) - 1;
/// The largest per-element limit burst the image row holds (8 bits).
pub const MAX_LIMIT_BURST: u32 = 255;

/// What a rule does with a dynamic set.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DynsetOp {
    /// `add @s { … }`: insert when absent.
    Add,
    /// `update @s { … }` (and `meter`): insert, or refresh the timeout.
    Update,
    /// `delete @s { … }`.
    Delete,
    /// `ip saddr @s`: membership.
    Lookup,
}

impl DynsetOp {
    /// Its number in the image's stateful row.
    pub fn code(self) -> u32 {
        self as u32
    }

    /// The op with image code `c`.
    pub fn from_code(c: u32) -> Option<DynsetOp> {
        [
            DynsetOp::Add,
            DynsetOp::Update,
            DynsetOp::Delete,
            DynsetOp::Lookup,
        ]
        .get(c as usize)
        .copied()
    }
}

/// A dynamic set as declared (`set NAME { type …; size N; flags dynamic,
/// timeout; timeout T; }`, or a meter's implicit set).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DynsetDecl {
    /// The set's name.
    pub name: String,
    /// The table's name: sets of two tables are two sets.
    pub table: String,
    /// The element family: `ipv4_addr` (V4) or `ipv6_addr` (V6).
    pub family: Family,
    /// `size` (default [`DEFAULT_SIZE`]).
    pub size: u32,
    /// The set's `timeout` in milliseconds (0: elements do not expire
    /// unless the rule gives a timeout).
    pub timeout_ms: u64,
    /// Declared with `flags timeout` (or a timeout): elements may expire.
    pub has_timeout: bool,
    /// Written as `meter NAME { … }` (listed back the same way).
    pub meter: bool,
    /// The key is an address and a service (`type ipv4_addr .
    /// inet_service`), not an address alone.
    #[serde(default)]
    pub service: bool,
    /// The elements the declaration gives (`elements = { … }`): the set
    /// holds them from the moment the ruleset is loaded.
    #[serde(default)]
    pub elements: Vec<DynsetInitial>,
}

/// An element a dynamic set's declaration gives: `10.0.0.1`, `10.0.0.1 .
/// 22`, with nft's `timeout T` and `expires T`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DynsetInitial {
    /// The address (IPv4 in the low 32 bits).
    pub addr: u128,
    /// The service of an `address . service` key, else 0.
    pub port: u16,
    /// The element's own `timeout` in ms (0: the set's).
    pub timeout_ms: u64,
    /// `expires`: ms left at load time (`None`: the whole timeout).
    pub expires_ms: Option<u64>,
}

impl DynsetInitial {
    /// Its key in a set of `family`.
    pub fn key(&self, family: Family) -> DynsetKey {
        let (family, addr) = masked(family, self.addr, u32::MAX, 128);
        (family, self.port, addr)
    }

    /// The ms from load to its expiry in set `decl` (`None`: never), as
    /// `nft_add_set_elem`: `expires`, else the element's timeout, else
    /// the set's; neither: no timeout at all.
    pub fn lifetime_ms(&self, decl: &DynsetDecl) -> Option<u64> {
        let timeout = if self.timeout_ms != 0 {
            self.timeout_ms
        } else {
            decl.timeout_ms
        };
        (timeout != 0).then_some(self.expires_ms.unwrap_or(timeout))
    }
}

impl DynsetDecl {
    /// The set's number in images and BPF maps: FNV-1a of `table/name`.
    pub fn id(&self) -> u32 {
        table_id(&format!("{}/{}", self.table, self.name))
    }

    /// The dynamic sets of `rs` that declare elements, each once, in
    /// first-use order.
    pub fn with_elements(rs: &crate::Ruleset) -> Vec<&DynsetDecl> {
        let mut out: Vec<&DynsetDecl> = Vec::new();
        let uses = rs
            .tables
            .iter()
            .flat_map(|t| &t.chains)
            .flat_map(|c| &c.rules)
            .flat_map(|r| r.dynset_lookup.iter().chain(&r.dynset));
        for d in uses {
            if !d.set.elements.is_empty() && !out.iter().any(|o| o.id() == d.set.id()) {
                out.push(&d.set);
            }
        }
        out
    }
}

/// One rule's use of a dynamic set: a stateful condition.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Dynset {
    /// The set.
    pub set: DynsetDecl,
    /// What the rule does with it.
    pub op: DynsetOp,
    /// The key is the destination address (else the source).
    pub daddr: bool,
    /// Lookup with `!=`: the answer is inverted.
    pub invert: bool,
    /// The rule's own `timeout` for new or refreshed elements (ms; 0: the
    /// set's).
    pub timeout_ms: u64,
    /// A limit per element (nft arithmetic).
    pub limit: Option<ElementRate>,
    /// The key's service, when the set's key has one.
    #[serde(default)]
    pub port: Option<DynsetPort>,
}

/// Where the service of an `address . service` key comes from.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DynsetPort {
    /// The packet's source port (`tcp sport`, `udp sport`, …).
    Src,
    /// The packet's destination port.
    Dst,
    /// A number the rule writes (`add @s { ip saddr . 10002 }`).
    Const(u16),
}

impl DynsetPort {
    /// The port for a packet.
    pub fn of(self, pkt: &Packet) -> u16 {
        match self {
            DynsetPort::Src => pkt.sport,
            DynsetPort::Dst => pkt.dport,
            DynsetPort::Const(p) => p,
        }
    }
}

/// An element's key: (family, port (0 without a service), address).
pub type DynsetKey = (u8, u16, u128);

/// A limit inside a set element: `limit rate [over] R/UNIT [burst B
/// packets]`, with `nft_limit.c`'s arithmetic (as a rule's nft `limit`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ElementRate {
    /// Packets per `per`.
    pub rate: u32,
    /// The time unit of the rate.
    pub per: TimeUnit,
    /// The bucket in packets (nft's default 5 already applied).
    pub burst: u32,
    /// `over`: the statement passes when the rate is exceeded.
    pub over: bool,
}

impl ElementRate {
    /// Nanoseconds of tokens a packet costs.
    pub fn cost(&self) -> u64 {
        self.per.seconds() as u64 * 1_000_000_000 / self.rate.max(1) as u64
    }

    /// The bucket's size in nanoseconds.
    pub fn tokens_max(&self) -> u64 {
        self.cost().saturating_mul(self.burst as u64)
    }
}

impl Dynset {
    /// The timeout a new or refreshed element gets, in milliseconds (0:
    /// none).
    pub fn effective_timeout_ms(&self) -> u64 {
        if self.timeout_ms != 0 {
            self.timeout_ms
        } else {
            self.set.timeout_ms
        }
    }

    /// The check as the image's row stores it.
    pub fn check(&self) -> DynsetCheck {
        DynsetCheck {
            set: self.set.id(),
            op: self.op,
            invert: self.invert,
            timeout_ms: self.effective_timeout_ms().min(u32::MAX as u64) as u32,
            size: self.set.size,
            limit: self.limit.as_ref().map(|l| ElementLimit {
                cost: l.cost(),
                tokens_max: l.tokens_max(),
                over: l.over,
            }),
        }
    }

    /// The packet's key; `None` when the packet is not of the set's
    /// family (such a packet never reaches the statement: the rule matches
    /// the family first).
    pub fn key(&self, pkt: &Packet) -> Option<DynsetKey> {
        if pkt.family != self.set.family {
            return None;
        }
        let a = if self.daddr { pkt.dst } else { pkt.src };
        let (family, addr) = masked(pkt.family, a, u32::MAX, 128);
        Some((family, self.port.map_or(0, |p| p.of(pkt)), addr))
    }
}

/// An element's limit as the row stores it: nanoseconds per packet, the
/// bucket's size and `over`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ElementLimit {
    /// Nanoseconds of tokens a packet costs.
    pub cost: u64,
    /// The bucket's size in nanoseconds.
    pub tokens_max: u64,
    /// `limit rate over`.
    pub over: bool,
}

/// What one rule's dynamic-set condition checks, as the image's row holds
/// it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct DynsetCheck {
    /// The set ([`DynsetDecl::id`]).
    pub set: u32,
    /// The op.
    pub op: DynsetOp,
    /// Lookup with `!=`.
    pub invert: bool,
    /// Timeout of new or refreshed elements in ms (0: none).
    pub timeout_ms: u32,
    /// The set's size.
    pub size: u32,
    /// The per-element limit.
    pub limit: Option<ElementLimit>,
}

/// One element: its expiry (jiffies; `None`: never) and its bucket.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct DynsetElement {
    /// Jiffies at which it expires.
    pub expires: Option<u64>,
    /// The per-element limit's bucket.
    pub bucket: Option<NftBucket>,
}

/// `nsecs_to_jiffies64(ms × 1e6)` on a kernel of `hz`: truncating.
pub fn timeout_jiffies(ms: u32, hz: u32) -> u64 {
    ms as u64 * 1_000_000 / (1_000_000_000 / hz.clamp(1, 1_000_000_000) as u64)
}

/// Every dynamic set, by id: key → element.
#[derive(Clone, Debug, Default)]
pub struct DynsetTables {
    sets: HashMap<u32, HashMap<DynsetKey, DynsetElement>>,
}

impl DynsetTables {
    /// Puts `decl`'s declared elements in its set, as loaded at jiffy
    /// `loaded` on a kernel of `hz` — once: a set a rule touched already
    /// (or seeded before) is left as it is.
    pub fn seed(&mut self, decl: &DynsetDecl, loaded: u64, hz: u32) {
        if !self.sets.contains_key(&decl.id()) {
            self.reapply(decl, loaded, hz);
        }
    }

    /// Puts `decl`'s declared elements in its set again at jiffy `now`, as
    /// `nft -f` of the same file does to an existing table (and parapetd's
    /// re-apply to `parapet_dynset`): one still there keeps its place with
    /// its expiry moved to its declared lifetime (if it has one), an absent
    /// one is added while the set has room; the others stay.
    pub fn reapply(&mut self, decl: &DynsetDecl, now: u64, hz: u32) {
        let set = self.sets.entry(decl.id()).or_default();
        for e in &decl.elements {
            let expires = e
                .lifetime_ms(decl)
                .map(|ms| now + timeout_jiffies(ms.min(u32::MAX as u64) as u32, hz));
            let room = set.len() < decl.size as usize;
            match set.get_mut(&e.key(decl.family)) {
                Some(old) if expires.is_some() => old.expires = expires,
                Some(_) => {}
                None if room => {
                    let fresh = DynsetElement {
                        expires,
                        bucket: None,
                    };
                    set.insert(e.key(decl.family), fresh);
                }
                None => {}
            }
        }
    }

    /// The elements of set `id`, if a rule touched it.
    pub fn set(&self, id: u32) -> Option<&HashMap<DynsetKey, DynsetElement>> {
        self.sets.get(&id)
    }

    /// The condition for a packet whose key is `key`, at jiffy `jiffies`
    /// and nanosecond `ns` on a kernel of `hz`. True: the rule goes on.
    pub fn check(
        &mut self,
        c: &DynsetCheck,
        key: DynsetKey,
        jiffies: u64,
        ns: u64,
        hz: u32,
    ) -> bool {
        let set = self.sets.entry(c.set).or_default();
        let live = |e: &DynsetElement| e.expires.is_none_or(|x| jiffies < x);
        match c.op {
            DynsetOp::Lookup => set.get(&key).is_some_and(live) != c.invert,
            DynsetOp::Delete => {
                set.remove(&key);
                true
            }
            DynsetOp::Add | DynsetOp::Update => {
                let expiry =
                    (c.timeout_ms != 0).then(|| jiffies + timeout_jiffies(c.timeout_ms, hz));
                let e = match set.get_mut(&key) {
                    Some(e) if live(e) => {
                        if c.op == DynsetOp::Update && e.expires.is_some() {
                            // The kernel's `priv->timeout ?: set->timeout`,
                            // even when that is 0.
                            e.expires = Some(jiffies + timeout_jiffies(c.timeout_ms, hz));
                        }
                        e
                    }
                    found => {
                        // Absent, or expired (replaced in place: it was
                        // counted already).
                        if found.is_none() && set.len() >= c.size as usize {
                            return false;
                        }
                        let e = DynsetElement {
                            expires: expiry,
                            bucket: c.limit.map(|l| NftBucket::full(l.tokens_max, ns)),
                        };
                        set.insert(key, e);
                        set.get_mut(&key).expect("just inserted")
                    }
                };
                match (c.limit, e.bucket.as_mut()) {
                    (Some(l), Some(b)) => b.admit(l.cost, l.tokens_max, l.over, ns),
                    _ => true,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decl(size: u32, timeout_ms: u64) -> DynsetDecl {
        DynsetDecl {
            name: "s".into(),
            table: "t".into(),
            family: Family::V4,
            size,
            timeout_ms,
            has_timeout: timeout_ms != 0,
            meter: false,
            service: false,
            elements: Vec::new(),
        }
    }

    fn dynset(op: DynsetOp, size: u32, timeout_ms: u64, limit: Option<ElementRate>) -> Dynset {
        Dynset {
            set: decl(size, timeout_ms),
            op,
            daddr: false,
            invert: false,
            timeout_ms: 0,
            limit,
            port: None,
        }
    }

    fn run(d: &Dynset, t: &mut DynsetTables, src: u32, secs: u64) -> bool {
        let p = Packet::v4(src, 1, 6, 1000, 22);
        // HZ 250: 4 ms a jiffy.
        t.check(
            &d.check(),
            d.key(&p).unwrap(),
            secs * 250,
            secs * 1_000_000_000,
            250,
        )
    }

    #[test]
    fn ssh_meter_drops_above_the_rate_per_address() {
        let l = ElementRate {
            rate: 1,
            per: TimeUnit::Hour,
            burst: 3,
            over: true,
        };
        let add = dynset(DynsetOp::Add, 16, 0, Some(l));
        let mut t = DynsetTables::default();
        let a: Vec<bool> = (0..5).map(|i| run(&add, &mut t, 7, i)).collect();
        assert_eq!(a, [false, false, false, true, true]);
        assert!(
            !run(&add, &mut t, 8, 6),
            "another address has its own bucket"
        );
    }

    #[test]
    fn lookup_sees_adds_until_the_timeout() {
        let add = dynset(DynsetOp::Add, 16, 10_000, None);
        let look = dynset(DynsetOp::Lookup, 16, 10_000, None);
        let upd = dynset(DynsetOp::Update, 16, 10_000, None);
        let mut t = DynsetTables::default();
        assert!(!run(&look, &mut t, 7, 0));
        assert!(run(&add, &mut t, 7, 0));
        assert!(run(&look, &mut t, 7, 9));
        assert!(run(&add, &mut t, 7, 9), "add does not refresh");
        assert!(!run(&look, &mut t, 7, 10), "expired at exactly 10 s");
        assert!(run(&upd, &mut t, 7, 11));
        assert!(run(&upd, &mut t, 7, 20), "update refreshes");
        assert!(run(&look, &mut t, 7, 29));
        assert!(!run(&look, &mut t, 7, 30));
    }

    #[test]
    fn a_service_key_holds_the_port() {
        let mut add = dynset(DynsetOp::Add, 16, 0, None);
        add.set.service = true;
        add.port = Some(DynsetPort::Const(22));
        let mut look = add.clone();
        look.op = DynsetOp::Lookup;
        look.port = Some(DynsetPort::Dst);
        let mut t = DynsetTables::default();
        // `run` sends to port 22.
        assert!(!run(&look, &mut t, 7, 0));
        assert!(run(&add, &mut t, 7, 0));
        assert!(run(&look, &mut t, 7, 1));
        look.port = Some(DynsetPort::Src);
        assert!(!run(&look, &mut t, 7, 1), "port 1000 is another key");
    }

    #[test]
    fn declared_elements_live_from_the_load() {
        let mut look = dynset(DynsetOp::Lookup, 2, 10_000, None);
        look.set.elements = vec![
            // The set's 10 s.
            DynsetInitial {
                addr: 7,
                port: 0,
                timeout_ms: 0,
                expires_ms: None,
            },
            // Its own 30 s, 5 s of them left.
            DynsetInitial {
                addr: 8,
                port: 0,
                timeout_ms: 30_000,
                expires_ms: Some(5_000),
            },
        ];
        let add = Dynset {
            op: DynsetOp::Add,
            ..look.clone()
        };
        let mut t = DynsetTables::default();
        t.seed(&look.set, 0, 250);
        assert!(run(&look, &mut t, 7, 9));
        assert!(run(&look, &mut t, 8, 4));
        assert!(!run(&look, &mut t, 8, 5), "expires 5s");
        assert!(!run(&add, &mut t, 9, 6), "two elements fill size 2");
        t.seed(&look.set, 100 * 250, 250);
        assert!(!run(&look, &mut t, 7, 10), "seeded once");
        // A re-apply at 20 s: 7's expiry moved; 8, deleted, finds no room
        // (9 took it: `nft -f` would refuse the file); what rules added
        // stays.
        let del = Dynset {
            op: DynsetOp::Delete,
            ..look.clone()
        };
        assert!(run(&del, &mut t, 8, 11));
        let mut add_never = add.clone();
        add_never.set.timeout_ms = 0;
        assert!(run(&add_never, &mut t, 9, 12), "room after the delete");
        t.reapply(&look.set, 20 * 250, 250);
        assert!(run(&look, &mut t, 7, 29));
        assert!(!run(&look, &mut t, 8, 21), "no room: left out");
        assert!(run(&look, &mut t, 9, 30), "added by a rule: stays");
        assert!(run(&del, &mut t, 9, 31));
        t.reapply(&look.set, 32 * 250, 250);
        assert!(run(&look, &mut t, 8, 36), "room again: back, 5 s");
        assert!(!run(&look, &mut t, 8, 37));
        let mut never = look.set.clone();
        never.timeout_ms = 0;
        assert_eq!(never.elements[0].lifetime_ms(&never), None);
        assert_eq!(never.elements[1].lifetime_ms(&never), Some(5_000));
    }

    #[test]
    fn a_full_set_refuses_new_keys() {
        let add = dynset(DynsetOp::Add, 2, 0, None);
        let del = dynset(DynsetOp::Delete, 2, 0, None);
        let mut t = DynsetTables::default();
        assert!(run(&add, &mut t, 1, 0));
        assert!(run(&add, &mut t, 2, 0));
        assert!(!run(&add, &mut t, 3, 0), "full");
        assert!(run(&add, &mut t, 2, 0), "present: fine");
        assert!(run(&del, &mut t, 1, 0));
        assert!(run(&add, &mut t, 3, 0), "room again");
    }
}
