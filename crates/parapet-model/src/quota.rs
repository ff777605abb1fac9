//! nft `quota [over] N bytes` (`nft_quota.c`): a byte count per rule, a
//! stateful condition with the kernel's semantics for every engine.
//!
//! Each packet that reaches the statement adds its length (`skb->len`: the
//! IP packet's, as [`Packet::len`]) to the rule's count; the quota is
//! *over* once the count, this packet included, is at least `N`. A plain
//! `quota` lets the rule go on while it is not over, `quota over` once it
//! is (`nft_quota_do_eval`: `NFT_BREAK` when `over ^ invert`). The count
//! starts at `used` (0 unless the file says `used U bytes`), belongs to
//! the rule, and starts again when the ruleset is loaded again.

use crate::packet::Packet;
use serde::{Deserialize, Serialize};

/// One `quota` statement.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Quota {
    /// The quota in bytes.
    pub bytes: u64,
    /// `quota over`: the rule goes on once the quota is used up.
    pub over: bool,
    /// `used U bytes`: the count when the ruleset is loaded.
    pub used: u64,
}

impl Quota {
    /// `nft_quota`'s answer for a packet of `len` bytes, given the count
    /// so far (`consumed`, updated). True: the rule goes on.
    pub fn admit(&self, consumed: &mut u64, len: u32) -> bool {
        *consumed = consumed.wrapping_add(len as u64);
        let over_quota = *consumed >= self.bytes;
        over_quota == self.over
    }

    /// The packet's length as the statement counts it.
    pub fn length(pkt: &Packet) -> u32 {
        pkt.len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quota_passes_until_the_count_reaches_it() {
        let q = Quota {
            bytes: 500,
            over: false,
            used: 0,
        };
        let mut c = q.used;
        let got: Vec<bool> = (0..5).map(|_| q.admit(&mut c, 128)).collect();
        // 128, 256, 384 < 500; 512 >= 500.
        assert_eq!(got, [true, true, true, false, false]);
        let over = Quota { over: true, ..q };
        let mut c = 300;
        assert!(!over.admit(&mut c, 100));
        assert!(over.admit(&mut c, 100), "500 >= 500: over");
    }
}
