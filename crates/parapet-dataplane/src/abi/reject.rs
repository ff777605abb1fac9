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
