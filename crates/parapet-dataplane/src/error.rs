//! Errors of the dataplane API.

use aya::maps::MapError;
use aya::programs::ProgramError;

use crate::set_mirror::SetError;

/// Errors of the dataplane API.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Loading the object or creating its maps failed.
    #[error("loading the BPF object: {0}")]
    Load(#[from] aya::EbpfError),
    /// Verifying, attaching, detaching or test-running a program failed.
    #[error("BPF program: {0}")]
    Program(#[from] ProgramError),
    /// A map operation failed.
    #[error("BPF map: {0}")]
    Map(#[from] MapError),
    /// The object lacks a map or program this code expects (build mismatch).
    #[error("BPF object has no {0}")]
    Missing(&'static str),
    /// A rule id beyond `LoadOptions::max_rules`.
    #[error("rule id {rule} out of range (max {max})")]
    RuleOutOfRange {
        /// The id.
        rule: u32,
        /// The largest valid id.
        max: u32,
    },
    /// An image larger than a slot.
    #[error("image of {len} bytes exceeds the slot size of {cap} bytes")]
    ImageTooLarge {
        /// Image size.
        len: usize,
        /// Slot size.
        cap: usize,
    },
    /// `swap` without a preceding `write_image`.
    #[error("no image written since the last swap")]
    NothingToSwap,
    /// A detach of an attachment this dataplane does not know.
    #[error("unknown attachment {0}")]
    UnknownAttachment(u64),
    /// `write_image` refused the bytes.
    #[error(transparent)]
    BadImage(#[from] BadImage),
    /// The conntrack lookup was asked for but is not linked in.
    #[error("cannot turn the conntrack lookup on: {0}")]
    ConntrackUnavailable(String),
    /// Frames shorter than an Ethernet header cannot be test-run.
    #[error("BPF_PROG_TEST_RUN needs at least 14 bytes, got {0}")]
    FrameTooShort(usize),
    /// A set operation was refused.
    #[error(transparent)]
    Set(#[from] SetError),
    /// Pinning under bpffs, or adopting what is pinned, failed.
    #[error("pinning: {0}")]
    Pin(String),
    /// Another program is attached where ours would go.
    #[error("{0}")]
    Occupied(String),
    /// The reverse-path lookups cannot be turned on (src/rev_path.rs).
    #[error("reverse-path lookups: {0}")]
    RevPath(String),
    /// The embedded object could not be prepared for this kernel.
    #[error("preparing the BPF object: {0}")]
    Object(String),
    /// The netfilter program is unavailable or its link failed.
    #[error("netfilter hook: {0}")]
    Netfilter(String),
    /// The benchmark's floor program (`PassFloor`) failed to load or run.
    #[error("floor program: {0}")]
    Floor(String),
    /// A generated program (`GeneratedXdp`) could not be made or loaded.
    #[error("generated program: {0}")]
    Codegen(String),
}

/// Why bytes were refused as an image (the header checks of
/// `slots.rs`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("not a usable classifier image: {0}")]
pub struct BadImage(pub String);

/// Result alias.
pub type Result<T> = std::result::Result<T, Error>;
