//! What the kernel hands back from a `BPF_PROG_TEST_RUN`: the run's return
//! code and time, and the program's debug record of its last decision,
//! decoded.

use std::time::Duration;

use super::{KernelVerdict, PacketKey, ParseStatus};

/// Outcome of one `BPF_PROG_TEST_RUN`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TestRunOutcome {
    /// Raw program return code (XDP_* or TC_ACT_*).
    pub retval: u32,
    /// `true` when the code lets the packet through (XDP_PASS / TC_ACT_OK).
    pub passed: bool,
    /// Kernel-measured time per run (averaged over `repeat`).
    pub duration: Duration,
}

/// The kernel's decision on the last packet: the debug record decoded
/// (test mode, see [`LoadOptions::debug`](crate::LoadOptions::debug)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelDecision {
    /// Parsed key.
    pub key: PacketKey,
    /// Parser outcome.
    pub status: ParseStatus,
    /// Deciding rule (0 = policy, also for unparsed packets).
    pub rule_id: u32,
    /// Applied verdict.
    pub verdict: KernelVerdict,
    /// Packets recorded so far.
    pub seq: u32,
    /// True when the classifier image decided (false: interim classifier).
    pub by_image: bool,
    /// Rule ids of the image's non-terminal matches (LOG, counters,
    /// jumps, counted RETURNs), in evaluation order, at most 16.
    pub nonterminal: Vec<u32>,
    /// Why the image walker gave up on this packet, 0 when it did not (the
    /// codes are the `w->err` assignments in `bpf/lib/walk.h` and the headers it includes).
    pub walk_err: u32,
    /// The REJECT type (`abi::reject::*`) when the verdict is REJECT.
    pub reject: u8,
    /// The ctstate the classifier saw (`parapet_image::ct`).
    pub ctstate: u32,
    /// The set bits of the image key (bit n = member of set reference n),
    /// as the kernel computed them; 0 when the image did not decide.
    pub set_bits: u64,
}
