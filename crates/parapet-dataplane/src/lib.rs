//! parapet's kernel dataplane.
//!
//! A BPF program (`bpf/parapet.bpf.c`, compiled by `build.rs` and embedded
//! here) parses each packet at XDP or tc ingress into a fixed
//! [`abi::PacketKey`], classifies it, counts it per rule, logs it through a
//! rate-limited ring buffer when the rule says so, and returns the rule's
//! verdict. [`Dataplane`] loads and drives it from user space.
//!
//! - [`abi`]: `#[repr(C)]` mirrors of `bpf/parapet.h`, checked against C.
//! - [`parse`]: the same parser in Rust, for user-space tools and
//!   differential tests against the kernel program.
//! - [`packet`]: builders for crafted test frames.
//! - [`dataplane`]: the aya-based loader and control API.
//! - [`image`]: the header checks of the classifier image (format:
//!   `parapet-image`) the BPF walker reads.
//! - [`sets`]: sets in BPF maps (the image key's set bits): element
//!   splitting, expiries, the user-space mirror.
//! - [`bridge`]: from `parapet_model::SetRef` and `parapet_sets::SetStore`
//!   to the kernel's sets ([`Dataplane::install_sets`]).
//! - [`ct_table`]: the nft table that makes the kernel track connections
//!   for the conntrack lookup.
//! - [`ruleset`]: a compiled ruleset into the kernel
//!   ([`Dataplane::install_ruleset`]), shared by `parapet run` and `parapetd`.
//!
//! Classification: the BPF image walker (`bpf/lib/walk.h`) reads the
//! classifier image written with [`Dataplane::write_image`] and made live
//! with [`Dataplane::swap`]; without a live image an interim (proto, dport)
//! table decides. See `docs/dataplane.md`.

pub mod abi;
pub mod bridge;
pub mod ct_table;
pub mod dataplane;
pub mod image;
#[doc(hidden)]
pub mod kfunc;
pub mod packet;
pub mod parse;
pub mod ruleset;
pub mod sets;

pub use abi::{Counter, KernelVerdict, PacketKey, ParseStatus, Stat};
pub use dataplane::{
    Attached, Dataplane, Decision, Error, Features, Hook, LoadOptions, LogEvent, Mode, Stats,
    TestRunOutcome,
};
pub use sets::{monotonic_ns, PacketPart, SetDim, SetElement, SetError, SetSizing};
