//! What user space writes for the program to read: each rule's action and
//! verdict, the interim classifier's key, GCRA rate limits, interface names
//! and the image map's page size.

/// `parapet_action.flags` bit: emit a log event (rate-limited) on match.
pub const ACTION_F_LOG: u8 = 0x01;

/// Bytes per page of the classifier-image map.
pub const IMAGE_PAGE_BYTES: usize = 4096;
/// Default pages per image slot (1 MiB).
pub const IMAGE_DEFAULT_SLOT_PAGES: u32 = 256;
/// Classifier images, two slots each: 0 for XDP and tc, 1..5 for the
/// netfilter hooks PREROUTING, INPUT, FORWARD, OUTPUT, POSTROUTING
/// (`PARAPET_IMAGES`).
pub const IMAGES: u32 = 6;

/// A rule's verdict as the kernel program applies it
/// (`PARAPET_VERDICT_*`): what a `parapet_model::Verdict` becomes in the
/// action map, the debug record and log events.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum KernelVerdict {
    /// XDP_PASS / TC_ACT_OK.
    #[default]
    Accept = 0,
    /// XDP_DROP / TC_ACT_SHOT.
    Drop = 1,
    /// Dropped too: neither hook can send the ICMP/RST answer.
    Reject = 2,
}

impl KernelVerdict {
    /// From the raw value; unknown values map to `None`.
    pub fn from_raw(v: u32) -> Option<Self> {
        Some(match v {
            0 => Self::Accept,
            1 => Self::Drop,
            2 => Self::Reject,
            _ => return None,
        })
    }
}

/// `struct parapet_action`: one per rule id, entry 0 is the policy.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RawAction {
    /// `KernelVerdict as u8`.
    pub verdict: u8,
    /// [`ACTION_F_LOG`] bit.
    pub flags: u8,
    /// `REJECT_*` type when `verdict` is REJECT.
    pub reject: u8,
    /// Zero.
    pub _pad: u8,
}

/// `struct parapet_lite_key`: key of the interim (proto, dport) classifier.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct LiteKey {
    /// Protocol; 0 with `dport` 0 matches anything.
    pub proto: u8,
    /// Zero.
    pub _pad: u8,
    /// Destination port; 0 matches any port of `proto`.
    pub dport: u16,
}

/// `struct parapet_log_limit`: GCRA state of one rule's log rate limit.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogLimit {
    /// 1e9 / rate; 0 disables logging for the rule.
    pub interval_ns: u64,
    /// interval_ns * (burst - 1).
    pub tolerance_ns: u64,
    /// Theoretical arrival time, owned by the BPF side.
    pub tat_ns: u64,
}

/// `struct parapet_ifname`: NUL-padded interface name, the image key's iif.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IfName {
    /// The name's bytes, NUL padded.
    pub name: [u8; 16],
}
