//! The expiry index of a set's mirror (`set_mirror.rs`): its elements that
//! expire, ordered by expiry, so a reaping round walks only what is due
//! instead of scanning every element of the set. It holds exactly one
//! entry per element with an expiry (permanent elements are not in it),
//! sharing the element's key with the mirror: bounded by the set's size.

use std::collections::BTreeSet;
use std::sync::Arc;

/// Elements with an expiry, by (expiry, element key).
#[derive(Default)]
pub(crate) struct ExpiryIndex {
    by_expiry: BTreeSet<(u64, Arc<[u8]>)>,
}

impl ExpiryIndex {
    /// Records that element `key` now expires at `new` (0 = permanent),
    /// having expired at `old` (`None`: it was not in the set).
    pub(crate) fn moved(&mut self, key: &Arc<[u8]>, old: Option<u64>, new: u64) {
        if let Some(o) = old {
            self.removed(key, o);
        }
        if new != 0 {
            self.by_expiry.insert((new, Arc::clone(key)));
        }
    }

    /// Records that element `key`, expiring at `exp`, left the set.
    pub(crate) fn removed(&mut self, key: &Arc<[u8]>, exp: u64) {
        if exp != 0 {
            self.by_expiry.remove(&(exp, Arc::clone(key)));
        }
    }

    /// The keys of up to `budget` elements whose expiry is at or before
    /// `now_ns`, earliest first.
    pub(crate) fn due(&self, now_ns: u64, budget: usize) -> impl Iterator<Item = &[u8]> {
        self.by_expiry
            .iter()
            .take_while(move |(exp, _)| *exp <= now_ns)
            .take(budget)
            .map(|(_, k)| &k[..])
    }

    /// Elements in the index.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.by_expiry.len()
    }

    pub(crate) fn clear(&mut self) {
        self.by_expiry.clear();
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    use crate::set_mirror::{SetDim, SetElement, SetState};

    type Ranges = Vec<(u128, u128)>;

    fn sorted(els: Vec<SetElement>) -> Vec<Ranges> {
        let mut v: Vec<Ranges> = els.into_iter().map(|e| e.ranges).collect();
        v.sort();
        v
    }

    /// A random element of a small key space (so adds refresh, deletes
    /// hit and ranges overlap), with a random expiry in 1..=20 or none.
    fn element(rng: &mut SmallRng, dims: usize) -> SetElement {
        let ranges: Ranges = (0..dims)
            .map(|d| {
                let lo = u128::from(rng.gen_range(0..24u64));
                let width = if d == 0 { rng.gen_range(0..3u64) } else { 0 };
                (lo, lo + u128::from(width))
            })
            .collect();
        let exp = match rng.gen_range(0..4) {
            0 => 0,
            _ => 1 + rng.gen_range(0..20u64),
        };
        SetElement::new(&ranges).expires(exp)
    }

    /// Checks one reaping round of `budget` at `now` against the model
    /// (what is in the set and when it expires): the index gives due
    /// elements only, as many as the budget allows, earliest first.
    fn check_round(s: &SetState, model: &HashMap<Ranges, u64>, now: u64, budget: usize) {
        let due: Vec<(&Ranges, u64)> = model
            .iter()
            .filter(|(_, &e)| e != 0 && e <= now)
            .map(|(r, &e)| (r, e))
            .collect();
        let got = sorted(s.expired(now, budget));
        assert_eq!(got.len(), budget.min(due.len()), "round size at {now}");
        let latest_got = got.iter().map(|r| model[r]).max().unwrap_or(0);
        for r in &got {
            assert!(
                model[r] != 0 && model[r] <= now,
                "{r:?} is not due at {now}"
            );
        }
        for (r, e) in &due {
            if !got.contains(r) {
                assert!(*e >= latest_got, "{r:?} (due {e}) skipped for a later one");
            }
        }
    }

    #[test]
    fn the_index_reaps_what_the_scan_reaps() {
        for (seed, dims) in [(1u64, 1usize), (2, 1), (3, 2), (4, 2), (5, 1)] {
            let mut rng = SmallRng::seed_from_u64(seed);
            let d = if dims == 1 {
                vec![SetDim::Port]
            } else {
                vec![SetDim::Port, SetDim::Proto]
            };
            let (mut by_index, mut by_scan) =
                (SetState::new(0, &d).unwrap(), SetState::new(0, &d).unwrap());
            let mut model: HashMap<Ranges, u64> = HashMap::new();
            let mut now = 0u64;
            for step in 0..600 {
                match rng.gen_range(0..10) {
                    0..=4 => {
                        let els: Vec<_> = (0..1 + rng.gen_range(0..4))
                            .map(|_| element(&mut rng, dims))
                            .collect();
                        by_index.add(0, &els, &mut [usize::MAX; 2]).unwrap();
                        by_scan.add(0, &els, &mut [usize::MAX; 2]).unwrap();
                        for e in els {
                            model.insert(e.ranges, e.expires_ns);
                        }
                    }
                    5 | 6 => {
                        let els = vec![element(&mut rng, dims)];
                        by_index.del(0, &els).unwrap();
                        by_scan.del(0, &els).unwrap();
                        model.remove(&els[0].ranges);
                    }
                    7 if step % 50 == 0 => {
                        by_index.flush();
                        by_scan.flush();
                        model.clear();
                    }
                    _ => {
                        // time passes, then a reaping round of a small budget
                        now += rng.gen_range(0..3);
                        let budget = 1 + rng.gen_range(0..5usize);
                        check_round(&by_index, &model, now, budget);
                        let a = by_index.expired(now, budget);
                        by_index.del(0, &a).unwrap();
                        for e in &a {
                            model.remove(&e.ranges);
                        }
                        // (a round of a smaller budget may pick other due
                        // elements by a scan: both states lose the same)
                        by_scan.del(0, &a).unwrap();
                    }
                }
                // the whole due set, the index against the scan
                assert_eq!(
                    sorted(by_index.expired(now, usize::MAX)),
                    sorted(by_scan.expired_by_scan(now, usize::MAX)),
                    "seed {seed} step {step}"
                );
                // bounded: one index entry per element with an expiry
                let with_expiry = model.values().filter(|&&e| e != 0).count();
                assert_eq!(by_index.expiring(), with_expiry, "seed {seed} step {step}");
                assert_eq!(by_index.len(), model.len());
            }
            // reaping to the end leaves the two sets equal
            now += 100;
            for (s, scan) in [(&mut by_index, false), (&mut by_scan, true)] {
                for _ in 0..1000 {
                    let gone = if scan {
                        s.expired_by_scan(now, 3)
                    } else {
                        s.expired(now, 3)
                    };
                    if gone.is_empty() {
                        break;
                    }
                    s.del(0, &gone).unwrap();
                }
            }
            assert_eq!(by_index.len(), by_scan.len(), "seed {seed}");
            assert_eq!(by_index.entries.len(), by_scan.entries.len(), "seed {seed}");
            assert_eq!(by_index.expiring(), 0);
            assert_eq!(by_scan.expired_by_scan(now, usize::MAX), vec![]);
        }
    }
}
