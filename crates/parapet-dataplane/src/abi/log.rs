//! What the program reports about single packets: the ring-buffer log
//! record and the debug record of the last decision (test mode).

use super::PacketKey;

/// Non-terminal matches the BPF walker records per packet.
pub const MAX_NONTERM: usize = 16;

/// `PARAPET_HOOK_XDP`.
pub const HOOK_XDP: u8 = 1;
/// `PARAPET_HOOK_TC`.
pub const HOOK_TC: u8 = 2;
/// `PARAPET_HOOK_NF_PREROUTING`: the netfilter program at PREROUTING.
/// The five netfilter hooks are this plus the kernel's hook number.
pub const HOOK_NF_PREROUTING: u8 = 3;
/// `PARAPET_HOOK_NF_INPUT`.
pub const HOOK_NF_INPUT: u8 = 4;
/// `PARAPET_HOOK_NF_FORWARD`.
pub const HOOK_NF_FORWARD: u8 = 5;
/// `PARAPET_HOOK_NF_OUTPUT`.
pub const HOOK_NF_OUTPUT: u8 = 6;
/// `PARAPET_HOOK_NF_POSTROUTING`.
pub const HOOK_NF_POSTROUTING: u8 = 7;

/// `struct parapet_log_event`: one ring-buffer record.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RawLogEvent {
    /// CLOCK_MONOTONIC nanoseconds.
    pub ts_ns: u64,
    /// Rule that matched.
    pub rule_id: u32,
    /// `KernelVerdict as u8`.
    pub verdict: u8,
    /// [`HOOK_XDP`] or [`HOOK_TC`].
    pub hook: u8,
    /// Zero.
    pub _pad: u16,
    /// The packet.
    pub key: PacketKey,
}

/// `struct parapet_debug_rec`: the last packet's key and decision (test mode).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DebugRec {
    /// The parsed key.
    pub key: PacketKey,
    /// Raw [`ParseStatus`](super::ParseStatus).
    pub status: u32,
    /// Deciding rule id (0 = policy).
    pub rule_id: u32,
    /// Raw [`KernelVerdict`](super::KernelVerdict).
    pub verdict: u32,
    /// Incremented per packet.
    pub seq: u32,
    /// 1 when the image walker decided, 0 for the interim classifier.
    pub by_image: u32,
    /// Entries of `nonterm` in use.
    pub n_nonterm: u32,
    /// Rule ids of non-terminal matches, in evaluation order.
    pub nonterm: [u32; MAX_NONTERM],
    /// Why the image walker gave up on this packet (0: it did not).
    pub walk_err: u32,
    /// The image key's set bits: word 24 (references 0..31), word 25.
    pub sets: [u32; 2],
    /// `REJECT_*` type of a REJECT verdict.
    pub reject: u32,
    /// The ctstate the image saw (`CT_*`).
    pub ctstate: u32,
}
