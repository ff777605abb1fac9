//! Stateful matches: the conditions whose answer depends on the packets
//! seen before (`-m limit`, nft `limit rate`), defined here once with the
//! kernel's arithmetic, for every engine.
//!
//! A rule with a stateful condition is *conditional*: the packet must match
//! its fields first; then the condition is checked (and its state changes);
//! when the condition fails the rule does not match and evaluation goes on
//! with the next rule, exactly as netfilter does. The condition is checked
//! last among the rule's matches — the parsers refuse a match written after
//! a `limit`, whose state the kernel would change even when that later match
//! failed.
//!
//! State belongs to the rule (one bucket per rule, as the kernel keeps one
//! per rule instance), is created full when the ruleset is loaded, and does
//! not survive a reload (neither does the kernel's: `iptables-restore` and
//! `nft -f` build new rules).
//!
//! Two flavours, because the kernel has two implementations whose rounding
//! differs:
//!
//! - **xt** (`xt_limit.c`, iptables `-m limit`): credits per jiffy. The rule
//!   stores `avg = 10000 × unit_seconds / rate` (iptables' `XT_LIMIT_SCALE`)
//!   and the burst; `cost = user2credits(avg)`, the cap is
//!   `user2credits(avg × burst)` (a `u32` product, as in the kernel), a
//!   packet adds `(now − prev) × CREDITS_PER_JIFFY` credits to a `u32`
//!   (wrapping, as the kernel's), capped, and matches when at least `cost`
//!   credits are left.
//! - **nft** (`nft_limit.c`, `limit rate [over] R/unit burst B packets`):
//!   nanosecond tokens. `cost = unit_ns / rate`, the bucket holds `cost ×
//!   burst` (burst 0 means 5), a packet adds the nanoseconds since the last
//!   one, capped; it passes when at least `cost` tokens are left (which are
//!   then taken). `over` inverts the answer, not the bookkeeping.

use crate::dynset::{Dynset, DynsetTables};
use crate::hashlimit::{Hashlimit, HashlimitTables};
pub use crate::nft_bucket::NftBucket;
use crate::packet::Packet;
use crate::quota::Quota;
use crate::recent::{seen_ttl, Recent, RecentTables};
use crate::rule::{Limit, LimitFlavor};
use crate::statistic::{RandomWords, Statistic, StatisticMode};
use crate::time_window::TimeWindow;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// iptables' `XT_LIMIT_SCALE`: `avg` is seconds between packets × this.
pub const XT_LIMIT_SCALE: u32 = 10_000;
/// nft's default burst of a packet limit (`NFT_LIMIT_PKT_BURST_DEFAULT`).
pub const NFT_DEFAULT_BURST: u32 = 5;

/// `CREDITS_PER_JIFFY` of `xt_limit.c` for a kernel built with `hz`: the
/// largest power of two not above `0xFFFFFFFF / (hz × 86400)`.
pub fn xt_credits_per_jiffy(hz: u32) -> u32 {
    let max = u32::MAX / (hz.max(1) * 86_400);
    if max == 0 {
        return 1;
    }
    1 << (31 - max.leading_zeros())
}

/// `user2credits` of `xt_limit.c`: `u32` arithmetic, dividing first when the
/// product would overflow.
pub fn xt_user2credits(user: u32, hz: u32) -> u32 {
    let cpj = xt_credits_per_jiffy(hz);
    let hz_cpj = hz.wrapping_mul(cpj);
    if user > u32::MAX / hz_cpj {
        (user / XT_LIMIT_SCALE).wrapping_mul(hz_cpj)
    } else {
        user.wrapping_mul(hz_cpj) / XT_LIMIT_SCALE
    }
}

/// One xt bucket: the jiffy of the last packet and the credits left.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct XtBucket {
    /// Jiffies at the last packet (or at load).
    pub prev: u64,
    /// Credits left.
    pub credit: u32,
}

impl XtBucket {
    /// A full bucket at jiffy `now` (`limit_mt_check`).
    pub fn full(avg: u32, burst: u32, hz: u32, now: u64) -> XtBucket {
        XtBucket {
            prev: now,
            credit: xt_user2credits(avg.wrapping_mul(burst), hz),
        }
    }

    /// `limit_mt`: does a packet at jiffy `now` match?
    pub fn admit(&mut self, avg: u32, burst: u32, hz: u32, now: u64) -> bool {
        let cap = xt_user2credits(avg.wrapping_mul(burst), hz);
        let cost = xt_user2credits(avg, hz);
        let gained = now
            .wrapping_sub(self.prev)
            .wrapping_mul(xt_credits_per_jiffy(hz) as u64);
        self.prev = now;
        // The kernel adds an unsigned long to a u32: the sum wraps.
        self.credit = (self.credit as u64).wrapping_add(gained) as u32;
        if self.credit > cap {
            self.credit = cap;
        }
        if self.credit >= cost {
            self.credit -= cost;
            return true;
        }
        false
    }
}

impl Limit {
    /// xt: `avg`, seconds between packets × [`XT_LIMIT_SCALE`] (iptables'
    /// `parse_rate`).
    pub fn xt_avg(&self) -> u32 {
        (XT_LIMIT_SCALE as u64 * self.per.seconds() as u64 / self.rate.max(1) as u64) as u32
    }

    /// nft: the burst the kernel uses (0 means [`NFT_DEFAULT_BURST`]).
    pub fn nft_burst(&self) -> u32 {
        if self.burst == 0 {
            NFT_DEFAULT_BURST
        } else {
            self.burst
        }
    }

    /// nft: nanoseconds of tokens one packet costs.
    pub fn nft_cost(&self) -> u64 {
        self.per.seconds() as u64 * 1_000_000_000 / self.rate.max(1) as u64
    }

    /// nft: the bucket's size in nanoseconds.
    pub fn nft_tokens_max(&self) -> u64 {
        self.nft_cost().saturating_mul(self.nft_burst() as u64)
    }
}

/// The time a stateful check sees: nanoseconds (nft's `ktime_get_ns`) and
/// the jiffies derived from them for a kernel of `hz` ticks per second
/// (`xt_limit`'s `jiffies`). The BPF walker's test clock derives jiffies
/// the same way (`bpf/lib/stateful.h`); live, it reads the kernel's own.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Clock {
    /// Nanoseconds since an arbitrary start.
    pub ns: u64,
    /// The kernel's `HZ`.
    pub hz: u32,
}

impl Clock {
    /// Jiffies at this time: whole ticks of `1e9 / hz` nanoseconds.
    pub fn jiffies(&self) -> u64 {
        self.ns / (1_000_000_000 / self.hz.clamp(1, 1_000_000_000) as u64)
    }
}

/// A bucket of either flavour.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Bucket {
    /// xt_limit's.
    Xt(XtBucket),
    /// nft_limit's.
    Nft(NftBucket),
    /// nft_quota's: the bytes counted.
    Quota(u64),
    /// `-m statistic --mode nth`'s: the packets counted.
    Nth(u64),
}

/// Answers a rule's stateful condition when evaluation reaches it.
pub trait Stateful {
    /// Called once the packet matched every other constraint of rule
    /// `rule_id`, whose condition is `limit`. True: the rule matches.
    fn check(&mut self, rule_id: u32, limit: &Limit) -> bool;

    /// As [`Stateful::check`] for a rule whose condition is `-m recent`
    /// (its tables are shared by every rule naming them; see `recent.rs`).
    fn recent(&mut self, rule_id: u32, recent: &Recent, pkt: &Packet) -> bool;

    /// As [`Stateful::check`] for a rule whose condition is `-m hashlimit`
    /// (its tables are shared by every rule naming them; see
    /// `hashlimit.rs`).
    fn hashlimit(&mut self, rule_id: u32, hashlimit: &Hashlimit, pkt: &Packet) -> bool;

    /// Whether rule `rule_id`'s time window is open now (`-m time`, nft
    /// `meta time|hour|day`; see `time_window.rs`).
    fn time(&mut self, rule_id: u32, window: &TimeWindow) -> bool;

    /// As [`Stateful::check`] for a rule whose condition is an nft dynamic
    /// set (`add`/`update`/`delete @s`, `ip saddr @s`; see `dynset.rs`).
    fn dynset(&mut self, rule_id: u32, dynset: &Dynset, pkt: &Packet) -> bool;

    /// As [`Stateful::check`] for a rule whose condition is an nft `quota`
    /// (a count per rule; see `quota.rs`).
    fn quota(&mut self, rule_id: u32, quota: &Quota, pkt: &Packet) -> bool;

    /// As [`Stateful::check`] for a rule whose condition is `-m statistic`
    /// (a counter per rule, or a random word; see `statistic.rs`).
    fn statistic(&mut self, rule_id: u32, statistic: &Statistic) -> bool;
}

/// An offline assumption instead of state: every stateful condition
/// matches (`true`) or fails (`false`). `parapet classify` states which.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Assume(pub bool);

impl Stateful for Assume {
    fn check(&mut self, _: u32, _: &Limit) -> bool {
        self.0
    }

    fn recent(&mut self, _: u32, _: &Recent, _: &Packet) -> bool {
        self.0
    }

    fn hashlimit(&mut self, _: u32, _: &Hashlimit, _: &Packet) -> bool {
        self.0
    }

    fn time(&mut self, _: u32, _: &TimeWindow) -> bool {
        self.0
    }

    fn dynset(&mut self, _: u32, _: &Dynset, _: &Packet) -> bool {
        self.0
    }

    fn quota(&mut self, _: u32, _: &Quota, _: &Packet) -> bool {
        self.0
    }

    fn statistic(&mut self, _: u32, _: &Statistic) -> bool {
        self.0
    }
}

/// Per-rule buckets and a clock the caller moves: the reference state of
/// the stateful conditions (tests drive the clock explicitly).
#[derive(Clone, Debug)]
pub struct StatefulState {
    /// The current time.
    pub clock: Clock,
    /// When the ruleset was loaded: buckets start full then.
    pub loaded: Clock,
    buckets: HashMap<BucketKey, Bucket>,
    /// The `-m recent` tables (they outlive a reload in the kernel; here
    /// they live as long as this state).
    pub recent: RecentTables,
    /// The `-m hashlimit` tables (likewise).
    pub hashlimit: HashlimitTables,
    /// The wall clock time windows read: UTC seconds since the epoch when
    /// `clock.ns` was 0 (0 unless the caller sets it: a replay sets the
    /// trace's start).
    pub wall_start_secs: i64,
    /// The kernel's `sys_tz` for `--kerneltz` windows: minutes west of
    /// UTC.
    pub minutes_west: i32,
    /// The nft dynamic sets (likewise).
    pub dynset: DynsetTables,
    /// Each quota rule's byte count, by rule id.
    pub quotas: HashMap<u32, u64>,
    /// Each `-m statistic --mode nth` rule's packets seen, by rule id.
    pub nth_seen: HashMap<u32, u64>,
    /// The random words `-m statistic --mode random` reads.
    pub random: RandomWords,
}

/// Whose bucket: a rule's own, or a named limit object's (shared).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum BucketKey {
    /// The rule with this id.
    Rule(u32),
    /// The nft limit object with this name.
    Object(String),
}

impl BucketKey {
    /// The bucket rule `rule_id`'s limit `limit` uses.
    pub fn of(rule_id: u32, limit: &Limit) -> BucketKey {
        match &limit.object {
            Some(name) => BucketKey::Object(name.clone()),
            None => BucketKey::Rule(rule_id),
        }
    }
}

impl StatefulState {
    /// State for a ruleset loaded at `clock`.
    pub fn new(clock: Clock) -> StatefulState {
        StatefulState {
            clock,
            loaded: clock,
            buckets: HashMap::new(),
            recent: RecentTables::default(),
            hashlimit: HashlimitTables::default(),
            wall_start_secs: 0,
            minutes_west: 0,
            dynset: DynsetTables::default(),
            quotas: HashMap::new(),
            nth_seen: HashMap::new(),
            random: RandomWords::default(),
        }
    }

    /// The wall-clock time now, in UTC seconds since the epoch.
    pub fn wall_secs(&self) -> i64 {
        self.wall_start_secs + (self.clock.ns / 1_000_000_000) as i64
    }

    /// Moves the clock to `ns` (never backwards: the kernel's clocks are
    /// monotonic).
    pub fn set_ns(&mut self, ns: u64) {
        self.clock.ns = self.clock.ns.max(ns);
    }

    /// A bucket, if a packet reached it.
    pub fn bucket(&self, key: &BucketKey) -> Option<&Bucket> {
        self.buckets.get(key)
    }
}

impl Stateful for StatefulState {
    fn check(&mut self, rule_id: u32, limit: &Limit) -> bool {
        let (now, loaded) = (self.clock, self.loaded);
        let b = self
            .buckets
            .entry(BucketKey::of(rule_id, limit))
            .or_insert_with(|| match limit.flavor {
                LimitFlavor::Xt => Bucket::Xt(XtBucket::full(
                    limit.xt_avg(),
                    limit.burst,
                    loaded.hz,
                    loaded.jiffies(),
                )),
                LimitFlavor::Nft => Bucket::Nft(NftBucket::full(limit.nft_tokens_max(), loaded.ns)),
            });
        match b {
            Bucket::Xt(x) => x.admit(limit.xt_avg(), limit.burst, now.hz, now.jiffies()),
            Bucket::Nft(n) => n.admit(limit.nft_cost(), limit.nft_tokens_max(), limit.over, now.ns),
            Bucket::Quota(_) | Bucket::Nth(_) => false,
        }
    }

    fn recent(&mut self, _: u32, recent: &Recent, pkt: &Packet) -> bool {
        let now = self.clock;
        let forwarded = pkt.iif.0 != 0 && pkt.oif.0 != 0;
        self.recent.check(
            &recent.check(),
            recent.address(pkt),
            seen_ttl(pkt.ttl, forwarded),
            now.jiffies(),
            now.hz,
        )
    }

    fn hashlimit(&mut self, _: u32, hashlimit: &Hashlimit, pkt: &Packet) -> bool {
        let now = self.clock;
        self.hashlimit.check(hashlimit, pkt, now.jiffies(), now.hz)
    }

    fn time(&mut self, _: u32, window: &TimeWindow) -> bool {
        window.admits(self.wall_secs(), self.minutes_west)
    }

    fn dynset(&mut self, _: u32, dynset: &Dynset, pkt: &Packet) -> bool {
        let (now, loaded) = (self.clock, self.loaded);
        let Some(key) = dynset.key(pkt) else {
            return false;
        };
        // The declared elements were there from the load on.
        self.dynset.seed(&dynset.set, loaded.jiffies(), loaded.hz);
        self.dynset
            .check(&dynset.check(), key, now.jiffies(), now.ns, now.hz)
    }

    fn quota(&mut self, rule_id: u32, quota: &Quota, pkt: &Packet) -> bool {
        let consumed = self.quotas.entry(rule_id).or_insert(quota.used);
        quota.admit(consumed, Quota::length(pkt))
    }

    fn statistic(&mut self, rule_id: u32, statistic: &Statistic) -> bool {
        match statistic.mode {
            StatisticMode::Nth { every, packet } => {
                let seen = self.nth_seen.entry(rule_id).or_insert(0);
                Statistic::nth_admit(every, packet, statistic.invert, seen)
            }
            StatisticMode::Random { threshold } => {
                Statistic::random_admit(threshold, statistic.invert, self.random.next_u32())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rule::TimeUnit;

    fn limit(rate: u32, per: TimeUnit, burst: u32, flavor: LimitFlavor) -> Limit {
        Limit {
            rate,
            per,
            burst,
            flavor,
            over: false,
            object: None,
        }
    }

    #[test]
    fn credits_per_jiffy_matches_the_kernel_for_common_hz() {
        // POW2_BELOW32(0xFFFFFFFF / (HZ*86400))
        assert_eq!(xt_credits_per_jiffy(100), 256);
        assert_eq!(xt_credits_per_jiffy(250), 128);
        assert_eq!(xt_credits_per_jiffy(300), 128);
        assert_eq!(xt_credits_per_jiffy(1000), 32);
    }

    #[test]
    fn burst_then_nothing_within_the_hour() {
        for flavor in [LimitFlavor::Xt, LimitFlavor::Nft] {
            let l = limit(1, TimeUnit::Hour, 5, flavor);
            let mut s = StatefulState::new(Clock { ns: 0, hz: 250 });
            let hits = (0..20)
                .filter(|i| {
                    s.set_ns(i * 1_000_000);
                    s.check(1, &l)
                })
                .count();
            assert_eq!(hits, 5, "{flavor:?}");
        }
    }

    #[test]
    fn refills_at_the_rate() {
        // 1/second, burst 1: one packet per second gets through.
        for flavor in [LimitFlavor::Xt, LimitFlavor::Nft] {
            let l = limit(1, TimeUnit::Second, 1, flavor);
            let mut s = StatefulState::new(Clock { ns: 0, hz: 250 });
            let mut hits = 0;
            // 10 packets a second for 5 seconds
            for i in 0..50u64 {
                s.set_ns(i * 100_000_000);
                hits += s.check(1, &l) as u32;
            }
            assert_eq!(hits, 5, "{flavor:?}");
        }
    }

    #[test]
    fn over_inverts_the_answer() {
        let mut l = limit(1, TimeUnit::Hour, 2, LimitFlavor::Nft);
        l.over = true;
        let mut s = StatefulState::new(Clock { ns: 0, hz: 250 });
        let got: Vec<bool> = (0..4).map(|_| s.check(1, &l)).collect();
        assert_eq!(got, [false, false, true, true]);
    }
}
