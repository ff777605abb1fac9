//! iptables `-m statistic` (`xt_statistic.c`): every n-th packet or a
//! random share of them, a stateful condition with the kernel's semantics
//! for every engine.
//!
//! - `--mode nth --every N --packet P`: the rule keeps one counter, shared
//!   by every CPU, that each packet reaching the match moves on by one
//!   (modulo N); the match holds when it wraps. iptables stores `every =
//!   N - 1` and starts the counter at `N - 1 - P`, so with packets numbered
//!   from 0 as they reach the match, packet `i` matches when `i mod N ==
//!   P`. Here the counter is the number of packets seen, and the match is
//!   that remainder: the same answers for the first 2^64 packets.
//! - `--mode random --probability p`: iptables stores `lround(p × 2^31)`
//!   and the kernel matches when `get_random_u32() & 0x7FFFFFFF` is below
//!   it: `p = 0` never matches, `p = 1` (2^31) always does.
//!
//! `!` (before `--every` or `--probability`) inverts the answer, not the
//! counting. The counter belongs to the rule and starts again when the
//! ruleset is loaded again, as a reloaded kernel rule's does.

use serde::{Deserialize, Serialize};

/// The kernel's random threshold for `--probability 1` (2^31).
pub const RANDOM_ONE: u32 = 1 << 31;

/// One `-m statistic` match.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Statistic {
    /// Which packets it picks.
    pub mode: StatisticMode,
    /// `!`: the rule goes on for the packets not picked.
    pub invert: bool,
}

/// `--mode nth` or `--mode random`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum StatisticMode {
    /// `--every N --packet P` (`1 <= N`, `P < N`).
    Nth {
        /// `--every`.
        every: u32,
        /// `--packet`.
        packet: u32,
    },
    /// `--probability`, as the kernel stores it: `p × 2^31` rounded,
    /// `0..=`[`RANDOM_ONE`].
    Random {
        /// The threshold `get_random_u32() & 0x7FFFFFFF` is compared with.
        threshold: u32,
    },
}

impl Statistic {
    /// `--mode nth`: the answer for the packet that finds `seen` packets
    /// counted before it (`seen` is moved on).
    pub fn nth_admit(every: u32, packet: u32, invert: bool, seen: &mut u64) -> bool {
        let index = *seen;
        *seen = seen.wrapping_add(1);
        (index % every.max(1) as u64 == packet as u64) != invert
    }

    /// `--mode random`: the answer for the random word `random`.
    pub fn random_admit(threshold: u32, invert: bool, random: u32) -> bool {
        ((random & 0x7FFF_FFFF) < threshold) != invert
    }

    /// iptables' stored threshold for `--probability p` (`lround(p ×
    /// 2^31)`); `None` outside `[0, 1]`.
    pub fn threshold_of(p: f64) -> Option<u32> {
        (0.0..=1.0)
            .contains(&p)
            .then(|| (p * RANDOM_ONE as f64).round() as u32)
    }

    /// The probability iptables-save prints for a threshold (`%.11f` of
    /// `threshold / 2^31`).
    pub fn probability_text(threshold: u32) -> String {
        format!("{:.11}", threshold as f64 / RANDOM_ONE as f64)
    }
}

/// A small deterministic generator for the engines that have no kernel
/// random source (the linear engine, the Rust walker): splitmix64. Any
/// stream is the kernel's as far as a rule can tell, since the kernel's
/// numbers are not predictable either; tests use probabilities 0 and 1,
/// or bounds on a share.
#[derive(Clone, Debug)]
pub struct RandomWords(u64);

impl RandomWords {
    /// A generator started from `seed`.
    pub fn new(seed: u64) -> RandomWords {
        RandomWords(seed)
    }

    /// The next 32-bit word.
    pub fn next_u32(&mut self) -> u32 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 32) as u32
    }
}

impl Default for RandomWords {
    fn default() -> RandomWords {
        RandomWords::new(0x0070_6172_6170_6574)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nth_matches_packet_p_of_every_n_as_the_kernels_counter() {
        // xt_statistic: every-1 = 2, the counter starts at 2 - 1 = 1 and
        // matches when `counter == every-1` wraps it to 0.
        let (every, packet) = (3u32, 1u32);
        let mut kernel = every - 1 - packet;
        let mut seen = 0;
        for _ in 0..20 {
            let next = if kernel == every - 1 { 0 } else { kernel + 1 };
            kernel = next;
            assert_eq!(
                Statistic::nth_admit(every, packet, false, &mut seen),
                next == 0
            );
        }
        let mut seen = 0;
        let got: Vec<bool> = (0..6)
            .map(|_| Statistic::nth_admit(3, 1, true, &mut seen))
            .collect();
        assert_eq!(got, [true, false, true, true, false, true]);
    }

    #[test]
    fn random_thresholds_are_iptables_rounding() {
        assert_eq!(Statistic::threshold_of(0.0), Some(0));
        assert_eq!(Statistic::threshold_of(1.0), Some(RANDOM_ONE));
        assert_eq!(Statistic::threshold_of(0.5), Some(1 << 30));
        assert_eq!(Statistic::threshold_of(1.5), None);
        assert_eq!(Statistic::threshold_of(-0.1), None);
        assert!(!Statistic::random_admit(0, false, 0));
        assert!(Statistic::random_admit(RANDOM_ONE, false, u32::MAX));
        assert_eq!(Statistic::probability_text(1 << 30), "0.50000000000");
    }
}
