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
//!
//! Classification currently uses an interim (proto, dport) table; the
//! classifier-image walker slots into `parapet_classify()` in the BPF
//! program and reads the image written with [`Dataplane::write_image`].
//! See `docs/dataplane.md`.

pub mod abi;
pub mod dataplane;
pub mod packet;
pub mod parse;

pub use abi::{Counter, PacketKey, ParseStatus, Stat, Verdict};
pub use dataplane::{
    Attached, Dataplane, Decision, Error, Hook, LoadOptions, LogEvent, Mode, Stats, TestRunOutcome,
};
