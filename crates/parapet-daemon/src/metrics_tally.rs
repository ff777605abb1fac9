//! The counts the metrics report that the daemon keeps as it works:
//! [`Tally`] (in the state, changed under its lock by the code that holds
//! it) and [`Histogram`] (atomics, for the journal's fsyncs). A leaf: it
//! imports nothing of the daemon, so the state and the journal can hold
//! these without depending on the metrics' collection ([`crate::metrics`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Per-set change counts since the daemon started.
#[derive(Clone, Copy, Debug, Default)]
pub struct SetTally {
    /// Elements added by clients.
    pub inserts: u64,
    /// Elements deleted by clients.
    pub deletes: u64,
    /// Elements removed because their timeout passed.
    pub expiries: u64,
}

/// What the state counts for metrics. Lives in [`crate::state::State`],
/// so it is only changed under the state lock, by the code that already
/// holds it: plain integers, no extra synchronisation on the ban path.
#[derive(Clone, Debug, Default)]
pub struct Tally {
    /// Addresses newly banned (`ban`).
    pub bans: u64,
    /// Addresses unbanned (`unban`).
    pub unbans: u64,
    /// Successful applies.
    pub applies: u64,
    /// Refused applies (parse, compile, set or kernel errors).
    pub apply_failures: u64,
    /// Wall time of the last successful apply, compile included.
    pub last_apply: Duration,
    /// Per set, by name (removed with the set).
    pub sets: HashMap<String, SetTally>,
}

impl Tally {
    /// The counts of set `name`, created on first use.
    pub fn set(&mut self, name: &str) -> &mut SetTally {
        if !self.sets.contains_key(name) {
            self.sets.insert(name.to_string(), SetTally::default());
        }
        self.sets.get_mut(name).expect("inserted")
    }
}

/// Upper bounds, in seconds, of the journal fsync histogram's buckets.
pub const FSYNC_BUCKETS: [f64; 12] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
];

/// A fixed-bucket latency histogram of atomics, written by the journal's
/// sync and read by scrapes without a lock.
#[derive(Debug, Default)]
pub struct Histogram {
    buckets: [AtomicU64; FSYNC_BUCKETS.len()],
    count: AtomicU64,
    sum_ns: AtomicU64,
}

impl Histogram {
    /// Records one observation.
    pub fn observe(&self, d: Duration) {
        let s = d.as_secs_f64();
        if let Some(i) = FSYNC_BUCKETS.iter().position(|b| s <= *b) {
            self.buckets[i].fetch_add(1, Ordering::Relaxed);
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_ns
            .fetch_add(d.as_nanos().min(u64::MAX as u128) as u64, Ordering::Relaxed);
    }

    /// Cumulative bucket counts, the total count and the sum in seconds.
    pub fn read(&self) -> (Vec<u64>, u64, f64) {
        let mut acc = 0;
        let cum = self
            .buckets
            .iter()
            .map(|b| {
                acc += b.load(Ordering::Relaxed);
                acc
            })
            .collect();
        let count = self.count.load(Ordering::Relaxed);
        (cum, count, self.sum_ns.load(Ordering::Relaxed) as f64 / 1e9)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_is_cumulative() {
        let h = Histogram::default();
        h.observe(Duration::from_micros(50));
        h.observe(Duration::from_millis(3));
        h.observe(Duration::from_secs(5));
        let (cum, count, sum) = h.read();
        assert_eq!(cum[0], 1);
        assert_eq!(cum[5], 2); // le 0.005
        assert_eq!(*cum.last().unwrap(), 2); // le 1: the 5 s one is only in +Inf
        assert_eq!(count, 3);
        assert!((sum - 5.00305).abs() < 1e-6);
    }
}
