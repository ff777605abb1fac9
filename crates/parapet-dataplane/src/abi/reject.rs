//! REJECT types (`PARAPET_REJECT_*`, owned by [`parapet_image::reject`]:
//! the 4th word of an image verdict row and [`RawAction::reject`](super::RawAction::reject)) and the
//! kernel's limits on the answers it sends.

pub use parapet_image::reject::*;
/// Largest reply (L3 bytes): the IPv6 minimum MTU.
pub const MAX_L3: usize = 1280;
/// Default global reply rate, per second.
pub const DEFAULT_RATE: u32 = 1000;
/// Default burst of the reply rate.
pub const DEFAULT_BURST: u32 = 50;

/// Bytes of a rejected packet a netfilter hook hands over
/// (`PARAPET_NF_REJECT_BYTES`).
pub const NF_REJECT_BYTES: usize = 128;

/// `struct parapet_nf_reject`: one REJECT at a netfilter hook, for parapetd
/// to answer (`parapet_nf_reject` ring buffer, `src/reject_queue.rs`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawNfReject {
    /// `PARAPET_REJECT_*`.
    pub rtype: u32,
    /// `PARAPET_HOOK_NF_*`.
    pub hook: u8,
    /// `PARAPET_FAMILY_*`.
    pub family: u8,
    /// Valid bytes of `pkt`.
    pub len: u16,
    /// Input interface (0 at OUTPUT).
    pub ifindex: u32,
    /// Output interface (0 at INPUT).
    pub oifindex: u32,
    /// CLOCK_MONOTONIC nanoseconds of the drop.
    pub ts_ns: u64,
    /// The packet from its network header.
    pub pkt: [u8; NF_REJECT_BYTES],
}
