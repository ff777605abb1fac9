//! The types of the set API of [`crate::Dataplane`]: key dimensions, packet
//! parts, elements, sizing and errors (the parent, `set_mirror.rs`, turns
//! elements into map entries).

use crate::abi::SET_MAX_SHAPES;

/// The type of one key dimension of a set.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SetDim {
    /// IPv4 address (the value's low 32 bits).
    Ipv4Addr,
    /// IPv6 address.
    Ipv6Addr,
    /// Transport port.
    Port,
    /// L4 protocol number.
    Proto,
    /// Interface name: 16 bytes, NUL padded, as a big-endian `u128`.
    IfName,
}

impl SetDim {
    /// Bytes the dimension takes in the concatenated key.
    pub const fn bytes(self) -> usize {
        match self {
            SetDim::Ipv4Addr => 4,
            SetDim::Ipv6Addr | SetDim::IfName => 16,
            SetDim::Port => 2,
            SetDim::Proto => 1,
        }
    }
    /// Width in bits.
    pub const fn bits(self) -> u32 {
        self.bytes() as u32 * 8
    }
    pub(super) fn max(self) -> u128 {
        if self.bits() >= 128 {
            u128::MAX
        } else {
            (1u128 << self.bits()) - 1
        }
    }
}

/// The packet part a dimension of a reference's key takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PacketPart {
    /// Source address.
    SrcAddr = 0,
    /// Destination address.
    DstAddr = 1,
    /// Source port (0 for protocols without ports).
    SrcPort = 2,
    /// Destination port.
    DstPort = 3,
    /// L4 protocol.
    Proto = 4,
    /// Input interface name.
    InIface = 5,
    /// Output interface name (none at the ingress hooks: all zero).
    OutIface = 6,
}

/// One element: a closed range per dimension and an expiry.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SetElement {
    /// `[lo, hi]` per dimension, in the set's dimension order; `lo == hi`
    /// for an exact value. IPv4 addresses are 32-bit numbers, interface
    /// names big-endian numbers of their 16 NUL-padded bytes.
    pub ranges: Vec<(u128, u128)>,
    /// `CLOCK_MONOTONIC` nanoseconds (see [`monotonic_ns`]) after which the
    /// element no longer matches; 0 = permanent.
    pub expires_ns: u64,
}

impl SetElement {
    /// A permanent element.
    pub fn new(ranges: &[(u128, u128)]) -> Self {
        SetElement {
            ranges: ranges.to_vec(),
            expires_ns: 0,
        }
    }
    /// A permanent element of exact values.
    pub fn exact(values: &[u128]) -> Self {
        SetElement {
            ranges: values.iter().map(|&v| (v, v)).collect(),
            expires_ns: 0,
        }
    }
    /// With an expiry (`CLOCK_MONOTONIC` ns, 0 = permanent).
    pub fn expires(mut self, ns: u64) -> Self {
        self.expires_ns = ns;
        self
    }
}

/// Sizes of the element maps, fixed at load time. Every map allocates per
/// entry (`BPF_F_NO_PREALLOC`); the hashes (tuple, exact) also allocate
/// 16 bytes per entry of their size for their buckets up front.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SetSizing {
    /// Most prefixes in the LPM trie (one-dimension sets), over all sets.
    pub lpm_entries: u32,
    /// Most entries in the tuple hash (other sets), over all sets.
    pub tuple_entries: u32,
    /// Most single IPv4 addresses in the exact hash, over all sets; the
    /// ones beyond go to the LPM trie as /32 prefixes.
    pub exact4_entries: u32,
    /// Most single IPv6 addresses in the exact hash, over all sets; the
    /// ones beyond go to the LPM trie as /128 prefixes.
    pub exact6_entries: u32,
}

impl Default for SetSizing {
    fn default() -> Self {
        SetSizing {
            lpm_entries: 16 << 20,
            tuple_entries: 1 << 18,
            // 16 MiB and 4 MiB of buckets: a million IPv4 bans fit
            exact4_entries: 1 << 20,
            exact6_entries: 1 << 18,
        }
    }
}

/// Errors of the set API.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SetError {
    /// Set id out of range.
    #[error("set id {0} out of range (max {max})", max = crate::abi::MAX_SETS - 1)]
    BadId(u32),
    /// No set with this id.
    #[error("no set {0}")]
    NoSuchSet(u32),
    /// A set with this id exists.
    #[error("set {0} already exists")]
    Exists(u32),
    /// Reference index out of range.
    #[error("set reference {0} out of range (max 63)")]
    BadRef(u32),
    /// A key the kernel cannot build.
    #[error("bad set key: {0}")]
    BadKey(String),
    /// An element that does not fit the set.
    #[error("bad element: {0}")]
    BadElement(String),
    /// The element needs more prefix-length combinations than a tuple set holds.
    #[error("set {set}: more than {max} shapes (prefix-length combinations)", max = SET_MAX_SHAPES)]
    TooManyShapes {
        /// Set id.
        set: u32,
    },
    /// One element splits into too many map entries.
    #[error("element splits into more than {0} map entries")]
    TooManyEntries(usize),
}

/// Port and protocol ranges of a concatenation with fewer values than
/// this are stored as points.
pub const SMALL_RANGE_POINTS: u128 = 256;

/// Most map entries one element may split into.
pub const MAX_ENTRIES_PER_ELEMENT: usize = 65_536;

/// `CLOCK_MONOTONIC` now, in ns: the clock of [`SetElement::expires_ns`]
/// (the BPF program compares with `bpf_ktime_get_ns()`).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec to write.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
