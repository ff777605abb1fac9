//! nft_limit's bucket (`nft_limit.c`), shared by the per-rule `limit
//! rate` (`stateful.rs`) and the limits inside dynamic-set elements
//! (`dynset.rs`).

use serde::{Deserialize, Serialize};

/// One nft bucket: the time of the last packet and the tokens left (ns).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NftBucket {
    /// Nanoseconds at the last packet (or at load).
    pub last: u64,
    /// Tokens left, in nanoseconds.
    pub tokens: u64,
}

impl NftBucket {
    /// A full bucket at `now` ns (`nft_limit_init`).
    pub fn full(tokens_max: u64, now: u64) -> NftBucket {
        NftBucket {
            last: now,
            tokens: tokens_max,
        }
    }

    /// `nft_limit_eval` and the `over` inversion: does a packet at `now` ns
    /// match?
    pub fn admit(&mut self, cost: u64, tokens_max: u64, over: bool, now: u64) -> bool {
        let tokens = self
            .tokens
            .wrapping_add(now.wrapping_sub(self.last))
            .min(tokens_max);
        self.last = now;
        if tokens >= cost {
            self.tokens = tokens - cost;
            return !over;
        }
        self.tokens = tokens;
        over
    }
}
