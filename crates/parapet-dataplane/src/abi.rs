//! `#[repr(C)]` mirrors of the structs and constants in `bpf/parapet.h`.
//!
//! These cross the kernel/user boundary through BPF maps, so their layout is
//! an ABI. The `layout` tests compare every size and offset here with the
//! numbers a C program prints from the header itself (see `build.rs`).
//!
//! One file per concern under `abi/`: `key.rs` (the packet key and parse
//! status), `config.rs` (actions, verdicts, rate limits, interface names),
//! `stats.rs`, `log.rs` (log and debug records), `sets.rs` (the set maps' structs)
//! and [`reject`]; `layout.rs` holds the layout tests. Everything is
//! re-exported here, so `abi::X` names any of it.

mod config;
mod key;
mod log;
mod outcome;
pub mod reject;
mod sets;
mod stats;

#[cfg(test)]
mod layout;

pub use config::*;
pub use key::*;
pub use log::*;
pub use outcome::*;
pub use sets::*;
pub use stats::*;

/// Version of the ABI in `parapet.h`; bumped whenever a layout changes.
pub const ABI_VERSION: u32 = 14;

// SAFETY: all of these are #[repr(C)] plain integers/arrays with explicit
// padding fields, so every bit pattern is valid and there are no
// uninitialised bytes.
unsafe impl aya::Pod for PacketKey {}
// SAFETY: as above.
unsafe impl aya::Pod for RawAction {}
// SAFETY: as above.
unsafe impl aya::Pod for Counter {}
// SAFETY: three u64, no padding.
unsafe impl aya::Pod for HookStat {}
// SAFETY: as above.
unsafe impl aya::Pod for LiteKey {}
// SAFETY: as above.
unsafe impl aya::Pod for LogLimit {}
// SAFETY: as above.
unsafe impl aya::Pod for DebugRec {}
// SAFETY: as above.
unsafe impl aya::Pod for IfName {}
// SAFETY: as above.
unsafe impl aya::Pod for RawSetRef {}
// SAFETY: as above.
unsafe impl aya::Pod for RawSetDesc {}
// SAFETY: as above.
unsafe impl aya::Pod for SetLpmKey {}
// SAFETY: as above.
unsafe impl aya::Pod for SetTupleKey {}
// SAFETY: as above.
unsafe impl aya::Pod for SetExact4Key {}
// SAFETY: as above.
unsafe impl aya::Pod for SetExact6Key {}
// SAFETY: as above.
unsafe impl aya::Pod for SetVal {}
