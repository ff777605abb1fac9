//! `-m recent` (`xt_recent.c`): named tables of addresses with the times
//! they were last seen, shared by every rule that names the table, with the
//! kernel's semantics for every engine.
//!
//! A table holds at most [`IP_LIST_TOT`] addresses (the kernel's module
//! parameter `ip_list_tot`, default 200): adding one more evicts the least
//! recently used. Each address keeps its last [`STAMPS`] hit times in a
//! ring that grows as hits come (at most 8 bytes a hit, up to 512 KiB for an
//! address hit 65,536 times). (The kernel's ring is smaller — 32 stamps, or
//! the next power of two above the table's largest `--hitcount` — which
//! answers the same: stamps are recorded in time order, so "at least `h`
//! stamps younger than `--seconds`" is "the `h`-th newest stamp is", and
//! every ring holds the `h` newest for every `h` a rule asks.) Times are
//! jiffies, as the kernel's.
//!
//! `recent_mt`, step by step (`ret` starts as the rule's `!`):
//! - the address (source, or destination with `--rdest`) is masked with
//!   `--mask` and looked up; with `--rttl`, an entry whose recorded TTL is
//!   neither the packet's (as [`seen_ttl`] says) nor 0 is not found (a
//!   packet TTL of 0 finds any);
//! - not found: `--set` adds it (one time stamp) and the answer flips;
//!   every other command answers `ret` unchanged;
//! - found: `--set` flips the answer; `--remove` deletes the entry and
//!   flips; `--rcheck`/`--update` count the time stamps younger than
//!   `--seconds` (all of them without `--seconds`) and flip the answer when
//!   `--hitcount` of them (one, without `--hitcount`) are;
//!   `--reap` then removes the table's least recently used entry when its
//!   newest stamp is older than `--seconds` (not the entry about to be
//!   updated);
//! - `--set`, and `--update` when the final answer is true (so `!
//!   --update` refreshes on a miss, as the kernel's does), record a new
//!   time stamp and the packet's TTL, and make the entry the most recently
//!   used. A new entry records the packet's TTL too (`+ADDR` written by
//!   hand records 0, which any `--rttl` finds).

use crate::field::Family;
use crate::packet::Packet;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// The kernel's `ip_list_tot` default: addresses per table.
pub const IP_LIST_TOT: usize = 200;
/// Time stamps kept per address: the kernel's `XT_RECENT_MAX_NSTAMPS`
/// (65,536 since Linux 6.11; 256 before).
pub const STAMPS: usize = 65_536;
/// The largest `--hitcount` the kernel accepts (255 before Linux 6.11,
/// whose iptables-restore refuses more; the kernel dataplane keeps 256
/// stamps and refuses more: `parapet_compile::CompileError::RecentHitcount`).
pub const MAX_HITCOUNT: u32 = STAMPS as u32 - 1;
/// The table name iptables uses without `--name`.
pub const DEFAULT_NAME: &str = "DEFAULT";

/// What a `-m recent` rule does with its table.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RecentCommand {
    /// `--set`: add or refresh the address; always matches.
    Set,
    /// `--rcheck`: is the address in the table (recently enough)?
    Rcheck,
    /// `--update`: as `--rcheck`, refreshing the address when it matches.
    Update,
    /// `--remove`: delete the address; matches when it was there.
    Remove,
}

impl RecentCommand {
    /// The option that spells it.
    pub fn option(self) -> &'static str {
        match self {
            RecentCommand::Set => "--set",
            RecentCommand::Rcheck => "--rcheck",
            RecentCommand::Update => "--update",
            RecentCommand::Remove => "--remove",
        }
    }

    /// Its number in the image's stateful row (`parapet_image::stateful`).
    pub fn code(self) -> u32 {
        self as u32
    }

    /// The command with image code `c`.
    pub fn from_code(c: u32) -> Option<RecentCommand> {
        [
            RecentCommand::Set,
            RecentCommand::Rcheck,
            RecentCommand::Update,
            RecentCommand::Remove,
        ]
        .get(c as usize)
        .copied()
    }
}

/// One `-m recent` match: a stateful condition checked after the rule's
/// other matches.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Recent {
    /// `--name` (default `DEFAULT`): the table, shared by every rule and
    /// hook naming it.
    pub name: String,
    /// `--set`, `--rcheck`, `--update` or `--remove`.
    pub command: RecentCommand,
    /// `!` before the command: the answer is inverted.
    pub invert: bool,
    /// `--rdest`: the destination address (else `--rsource`, the source).
    pub rdest: bool,
    /// `--seconds` (0: any age).
    pub seconds: u32,
    /// `--hitcount` (0: one hit is enough).
    pub hitcount: u32,
    /// `--reap`.
    pub reap: bool,
    /// `--rttl`: the entry must have been recorded with the packet's TTL.
    #[serde(default)]
    pub rttl: bool,
    /// `--mask` of an IPv4 rule (all ones by default).
    pub mask_v4: u32,
    /// `--mask` of an IPv6 rule, as a prefix length (128 by default;
    /// parapet accepts contiguous IPv6 masks only).
    pub mask_v6: u8,
}

impl Recent {
    /// A `--set` on table `name` with the defaults.
    pub fn new(name: &str, command: RecentCommand) -> Recent {
        Recent {
            name: name.to_string(),
            command,
            invert: false,
            rdest: false,
            seconds: 0,
            hitcount: 0,
            reap: false,
            rttl: false,
            mask_v4: u32::MAX,
            mask_v6: 128,
        }
    }

    /// The table's number in images and BPF maps: FNV-1a of the name, so
    /// every image and the daemon agree without a registry.
    pub fn table_id(&self) -> u32 {
        table_id(&self.name)
    }

    /// The check this match makes, without the table name.
    pub fn check(&self) -> RecentCheck {
        RecentCheck {
            table: self.table_id(),
            command: self.command,
            invert: self.invert,
            seconds: self.seconds,
            hitcount: self.hitcount,
            reap: self.reap,
            rttl: self.rttl,
        }
    }

    /// The packet's address this match looks up, masked: (family, address).
    pub fn address(&self, pkt: &Packet) -> (u8, u128) {
        let a = if self.rdest { pkt.dst } else { pkt.src };
        masked(pkt.family, a, self.mask_v4, self.mask_v6)
    }
}

/// `addr` of `family` masked with an IPv4 mask or an IPv6 prefix length.
pub fn masked(family: Family, addr: u128, mask_v4: u32, mask_v6: u8) -> (u8, u128) {
    match family {
        Family::V4 => (4, addr & mask_v4 as u128),
        Family::V6 => {
            let m = match mask_v6 {
                0 => 0,
                n => u128::MAX << (128 - n.min(128) as u32),
            };
            (6, addr & m)
        }
    }
}

/// A table's number: FNV-1a (32 bits) of its name.
pub fn table_id(name: &str) -> u32 {
    name.bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ b as u32).wrapping_mul(0x0100_0193)
    })
}

/// What one `-m recent` match checks, as the image's row stores it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct RecentCheck {
    /// The table ([`table_id`]).
    pub table: u32,
    /// The command.
    pub command: RecentCommand,
    /// `!`.
    pub invert: bool,
    /// `--seconds`.
    pub seconds: u32,
    /// `--hitcount`.
    pub hitcount: u32,
    /// `--reap`.
    pub reap: bool,
    /// `--rttl`.
    pub rttl: bool,
}

/// The TTL `recent_mt` compares and records for `pkt`: the IPv4 TTL or
/// IPv6 hop limit, plus one (modulo 256) for a forwarded packet — one with
/// both an input and an output interface, which the kernel sees after the
/// router decremented it ("use TTL as seen before forwarding"). A packet
/// this host sends (no input interface) counts as having its socket, as
/// the kernel's does when `skb->sk` is set.
pub fn seen_ttl(ttl: u8, forwarded: bool) -> u8 {
    ttl.wrapping_add(u8::from(forwarded))
}

/// One address's entry: a ring of time stamps, as `struct recent_entry`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecentEntry {
    /// Jiffies of the hits, a ring of at most [`STAMPS`] that grows by
    /// one a hit until it is full; all are valid.
    pub stamps: Vec<u64>,
    /// Where the next stamp goes (1..=STAMPS after the first).
    pub index: u32,
    /// Valid stamps.
    pub nstamps: u32,
    /// The TTL recorded with the newest `--set`/`--update` (0 for an
    /// address added by hand: any `--rttl` finds it).
    pub ttl: u8,
    /// Least-recently-used order: larger is more recent.
    used: u64,
}

impl RecentEntry {
    /// The newest stamp.
    pub fn last_seen(&self) -> u64 {
        // `index` is 1..=STAMPS: where the next stamp goes, after the newest.
        self.stamps[self.index as usize - 1]
    }
}

/// One table: (family, masked address) → entry.
#[derive(Clone, Debug, Default)]
pub struct RecentTable {
    entries: HashMap<(u8, u128), RecentEntry>,
    seq: u64,
}

/// The kernel's `time_after(a, b)` on jiffies: `a` is later than `b`.
fn time_after(a: u64, b: u64) -> bool {
    (b.wrapping_sub(a) as i64) < 0
}

impl RecentTable {
    /// Entries, for listing.
    pub fn entries(&self) -> impl Iterator<Item = (&(u8, u128), &RecentEntry)> {
        self.entries.iter()
    }

    fn oldest(&self) -> Option<(u8, u128)> {
        self.entries
            .iter()
            .min_by_key(|(_, e)| e.used)
            .map(|(k, _)| *k)
    }

    /// `recent_entry_init`: a new entry seen `now`, evicting the least
    /// recently used one when the table is full.
    pub fn add(&mut self, key: (u8, u128), now: u64, ttl: u8) {
        if self.entries.len() >= IP_LIST_TOT {
            if let Some(old) = self.oldest() {
                self.entries.remove(&old);
            }
        }
        self.seq += 1;
        self.entries.insert(
            key,
            RecentEntry {
                stamps: vec![now],
                index: 1,
                nstamps: 1,
                ttl,
                used: self.seq,
            },
        );
    }

    /// `recent_entry_update`: one more stamp, and most recently used.
    pub fn touch(&mut self, key: (u8, u128), now: u64) {
        self.seq += 1;
        if let Some(e) = self.entries.get_mut(&key) {
            e.index &= STAMPS as u32 - 1;
            match e.stamps.get_mut(e.index as usize) {
                Some(s) => *s = now,
                None => e.stamps.push(now),
            }
            e.index += 1;
            e.nstamps = e.nstamps.max(e.index);
            e.used = self.seq;
        }
    }

    /// `/proc/net/xt_recent/NAME`'s `+addr`: add, or refresh.
    pub fn write_add(&mut self, key: (u8, u128), now: u64) {
        if self.entries.contains_key(&key) {
            self.touch(key, now);
        } else {
            self.add(key, now, 0);
        }
    }

    /// Removes an address; true when it was there.
    pub fn remove(&mut self, key: (u8, u128)) -> bool {
        self.entries.remove(&key).is_some()
    }

    /// Removes every address.
    pub fn flush(&mut self) {
        self.entries.clear();
    }

    /// `recent_mt` for a packet whose masked address is `key` and whose
    /// TTL is `ttl` ([`seen_ttl`]), at jiffy `now` on a kernel of `hz`.
    pub fn check(&mut self, c: &RecentCheck, key: (u8, u128), ttl: u8, now: u64, hz: u32) -> bool {
        let mut ret = c.invert;
        let found = self
            .entries
            .get(&key)
            .filter(|e| !c.rttl || ttl == 0 || e.ttl == 0 || e.ttl == ttl);
        let Some(e) = found else {
            if c.command != RecentCommand::Set {
                return ret;
            }
            self.add(key, now, ttl);
            return !ret;
        };
        match c.command {
            RecentCommand::Set => ret = !ret,
            RecentCommand::Remove => {
                self.entries.remove(&key);
                return !ret;
            }
            RecentCommand::Rcheck | RecentCommand::Update => {
                let time = now.wrapping_sub(c.seconds as u64 * hz as u64);
                let mut hits = 0;
                for &s in &e.stamps[..e.nstamps as usize] {
                    if c.seconds != 0 && time_after(time, s) {
                        continue;
                    }
                    hits += 1;
                    if c.hitcount == 0 || hits >= c.hitcount {
                        ret = !ret;
                        break;
                    }
                }
                if c.reap {
                    let updating = c.command == RecentCommand::Update && ret;
                    if let Some(old) = self.oldest() {
                        let skip = old == key && updating;
                        if !skip && time_after(time, self.entries[&old].last_seen()) {
                            self.entries.remove(&old);
                        }
                    }
                }
            }
        }
        if c.command == RecentCommand::Set || (c.command == RecentCommand::Update && ret) {
            self.touch(key, now);
            if let Some(e) = self.entries.get_mut(&key) {
                e.ttl = ttl;
            }
        }
        ret
    }
}

/// Every table, by [`table_id`].
#[derive(Clone, Debug, Default)]
pub struct RecentTables {
    tables: HashMap<u32, RecentTable>,
}

impl RecentTables {
    /// The table with id `table`, created empty on first use.
    pub fn table(&mut self, table: u32) -> &mut RecentTable {
        self.tables.entry(table).or_default()
    }

    /// The table, if one was used.
    pub fn get(&self, table: u32) -> Option<&RecentTable> {
        self.tables.get(&table)
    }

    /// `recent_mt` on table `c.table`.
    pub fn check(&mut self, c: &RecentCheck, key: (u8, u128), ttl: u8, now: u64, hz: u32) -> bool {
        self.table(c.table).check(c, key, ttl, now, hz)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(r: &Recent, t: &mut RecentTables, src: u32, now: u64) -> bool {
        let p = Packet::v4(src, 1, 6, 1000, 22);
        t.check(&r.check(), r.address(&p), 64, now, 100)
    }

    #[test]
    fn ssh_brute_force_pair() {
        let set = Recent::new("SSH", RecentCommand::Set);
        let mut upd = Recent::new("SSH", RecentCommand::Update);
        upd.seconds = 60;
        upd.hitcount = 4;
        let mut t = RecentTables::default();
        // Each new connection: --set, then --update decides the drop.
        let fates: Vec<bool> = (0..6u64)
            .map(|i| {
                assert!(run(&set, &mut t, 7, i * 100));
                run(&upd, &mut t, 7, i * 100)
            })
            .collect();
        // --set adds one stamp, --update adds another when it matches; with
        // 4 hits needed: stamps 1, 2, 3, then 4 → match (and 5), …
        assert_eq!(fates, [false, false, false, true, true, true]);
        // Another address is untouched.
        assert!(!run(&upd, &mut t, 8, 600));
        // 61 s later (6100 jiffies at HZ 100), the old hits have expired.
        assert!(run(&set, &mut t, 7, 600 + 6100 + 500));
        assert!(!run(&upd, &mut t, 7, 600 + 6100 + 500));
    }

    #[test]
    fn capacity_evicts_the_least_recently_used() {
        let set = Recent::new("T", RecentCommand::Set);
        let chk = Recent::new("T", RecentCommand::Rcheck);
        let mut t = RecentTables::default();
        for a in 0..IP_LIST_TOT as u32 {
            run(&set, &mut t, a, a as u64);
        }
        run(&set, &mut t, 0, 1000); // refresh 0: 1 is now the oldest
        run(&set, &mut t, 9999, 1001);
        assert!(run(&chk, &mut t, 0, 1002));
        assert!(!run(&chk, &mut t, 1, 1002));
        assert!(run(&chk, &mut t, 9999, 1002));
    }

    #[test]
    fn inverted_update_refreshes_on_a_miss() {
        let mut upd = Recent::new("X", RecentCommand::Update);
        upd.invert = true;
        let set = Recent::new("X", RecentCommand::Set);
        let mut t = RecentTables::default();
        assert!(run(&upd, &mut t, 1, 0), "absent: ! gives true");
        run(&set, &mut t, 1, 0);
        assert!(!run(&upd, &mut t, 1, 1), "present: ! gives false");
        let rm = Recent::new("X", RecentCommand::Remove);
        assert!(run(&rm, &mut t, 1, 2));
        assert!(!run(&rm, &mut t, 1, 3));
    }

    #[test]
    fn rttl_finds_only_the_recorded_ttl() {
        let set = Recent::new("R", RecentCommand::Set);
        let mut chk = Recent::new("R", RecentCommand::Update);
        chk.rttl = true;
        let mut t = RecentTables::default();
        let key = (4, 7u128);
        assert!(t.check(&set.check(), key, 64, 0, 100));
        assert!(!t.check(&chk.check(), key, 63, 1, 100), "another TTL");
        assert!(t.check(&chk.check(), key, 64, 2, 100), "the recorded one");
        assert!(
            t.check(&chk.check(), key, 0, 3, 100),
            "a TTL of 0 finds any"
        );
        // the update at TTL 0 recorded 0: now any TTL finds it
        assert!(t.check(&chk.check(), key, 9, 4, 100));
        // without --rttl the TTL does not matter
        let plain = Recent::new("R", RecentCommand::Rcheck);
        assert!(t.check(&plain.check(), key, 200, 5, 100));
        // +ADDR by hand records 0
        t.table(set.table_id()).write_add((4, 8), 6);
        assert!(t.check(&chk.check(), (4, 8), 33, 7, 100));
        assert_eq!(seen_ttl(255, true), 0);
        assert_eq!(seen_ttl(63, true), 64);
        assert_eq!(seen_ttl(63, false), 63);
    }

    #[test]
    fn table_ids_are_fnv1a() {
        assert_eq!(table_id(""), 0x811c_9dc5);
        assert_eq!(table_id("a"), 0xe40c_292c);
    }
}
