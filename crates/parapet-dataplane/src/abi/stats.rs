//! What the program counts: per-rule counters and dataplane-wide
//! statistics.

/// Number of entries of the `parapet_stats` map.
pub const STAT_MAX: u32 = 25;

/// Rows of the `parapet_hook_stats` map: one per hook (row = hook - 1), `PARAPET_HOOK_XDP`
/// (row 0) to `PARAPET_HOOK_NF_POSTROUTING` (row 6).
pub const HOOK_ROWS: u32 = 7;
/// Columns of a row: interface indices below this each have their own;
/// column 0 sums the interfaces with larger indices.
pub const HOOK_IFACES: u32 = 256;

/// `struct parapet_hook_stat`: what one hook saw on one interface, on one
/// CPU.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HookStat {
    /// Packets the hook's program ran on.
    pub packets: u64,
    /// Sum of their `pkt_len` (as the rule counters count).
    pub bytes: u64,
    /// Packets it did not accept (DROP, REJECT, fail-closed drops).
    pub dropped: u64,
}

/// `struct parapet_counter`: packets and L3 bytes of one rule on one CPU.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counter {
    /// Packets that this rule decided.
    pub packets: u64,
    /// Sum of their `pkt_len`.
    pub bytes: u64,
}

/// Indices of the `parapet_stats` per-CPU array (`enum parapet_stat`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Stat {
    /// Every packet seen.
    Packets = 0,
    /// Non-IP frames passed unclassified.
    NotIp = 1,
    /// Truncated packets dropped.
    Truncated = 2,
    /// Malformed packets dropped.
    Malformed = 3,
    /// Packets with too many VLAN tags / IPv6 extension headers dropped.
    ExtLimit = 4,
    /// Log events written to the ring buffer.
    LogEmitted = 5,
    /// Log events suppressed by the rate limit.
    LogRateLimited = 6,
    /// Log events lost because the ring buffer was full.
    LogRingFull = 7,
    /// Rule ids without an action entry (dropped).
    NoAction = 8,
    /// Packets classified by the image walker.
    Image = 9,
    /// Packets for which the walker refused the live image (the interim
    /// classifier decided instead).
    ImageError = 10,
    /// Packets with more than [`MAX_NONTERM`](super::MAX_NONTERM) non-terminal matches (the
    /// rest were neither counted nor logged).
    NontermTruncated = 11,
    /// REJECT verdicts answered with a TCP reset or an ICMP error.
    RejectSent = 12,
    /// REJECT verdicts over the global reply rate: dropped without answer.
    RejectLimited = 13,
    /// REJECT verdicts on packets that never get an answer (ICMP errors,
    /// resets, broadcast/multicast, later fragments, a type of the other
    /// family, `tcp-reset` on non-TCP): dropped.
    RejectNoReply = 14,
    /// REJECT verdicts whose answer could not be built: dropped.
    RejectFailed = 15,
    /// Conntrack lookups made.
    CtLookup = 16,
    /// Conntrack lookups that found an entry.
    CtFound = 17,
    /// Packets the netfilter program saw at INPUT.
    NfInput = 18,
    /// ... at FORWARD.
    NfForward = 19,
    /// ... at OUTPUT.
    NfOutput = 20,
    /// REJECT verdicts at a netfilter hook handed to parapetd to answer
    /// (the `parapet_nf_reject` ring; within the global reply rate).
    NfRejectQueued = 21,
    /// ... lost because that ring was full: dropped without answer.
    NfRejectRingFull = 22,
    /// Packets the netfilter program saw at PREROUTING.
    NfPrerouting = 23,
    /// ... at POSTROUTING.
    NfPostrouting = 24,
}
