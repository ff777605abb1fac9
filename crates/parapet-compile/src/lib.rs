//! # parapet-compile
//!
//! The compile stage of parapet: a flattened [`parapet_model::DecisionList`]
//! becomes a **classifier image** — flat little-endian `u32` words, no
//! pointers, bounded depth and leaf length (`docs/image-format.md`) — that
//! the Rust [`Walker`] here and the BPF walker both interpret.
//!
//! - [`compile()`]: decision list → image. Rules are partitioned by which
//!   address fields are specific, then each partition becomes a binary
//!   range-cut tree (HyperSplit-style) whose leaves are short sorted lists of
//!   entry indices checked in full. Memory and build work are budgeted: an
//!   adversarial list gets longer leaves, never an out-of-memory.
//! - [`Walker`]: classifies a [`KeyWords`] (a packet plus set-membership
//!   bits, `parapet_image`'s key) exactly as
//!   [`parapet_model::DecisionList::classify`] does — deciding rule,
//!   verdict, and non-terminal rules (LOG, counters, jumps, RETURNs).
//! - [`FastPath`]: the sibling engine for pure first-match lists, built from
//!   the image: the same trees in a compact layout (two binary levels per
//!   node, record offsets in leaves, fixed-size records) walked by
//!   branch-free, lock-stepped batches.
//! - [`Classifier`]: the meta-engine. `Classifier::build(list, &opts)` picks
//!   linear or tree from the list and the [`Policy`] (and the fast path or
//!   the walker for each lookup), and
//!   [`Classifier::explain`] says why and what it built.
//! - [`Incremental`]: single-rule inserts and deletes on pure first-match
//!   lists without recompiling the trees (tombstones plus a small overlay,
//!   merged when they grow).
//! - [`time_lookups`]: the lookup-rate measurement behind
//!   `parapet bench classify`.
//!
//! ```
//! use parapet_model::*;
//! use parapet_compile::{BuildOptions, Classifier};
//! let rs = parapet_gen::worst_case(100);
//! let list = flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
//! let c = Classifier::build(&list, &BuildOptions::default()).unwrap();
//! let d = c.classify(&parapet_gen::worst_case_packet(), &[]);
//! assert_eq!(d, list.classify(&parapet_gen::worst_case_packet(), &[]));
//! assert_eq!(d.rule_id, 101);
//! ```

mod api;
mod chain;
mod compile;
mod emit;
mod fast;
#[doc(hidden)]
pub mod fuzzing;
mod incremental;
pub mod lookup_timing;
mod lower;
mod meta;
mod partition;
mod read;
mod stateful;
mod tree;
mod walk;

pub use api::{CompileError, CompileOptions, CompileStats, PartitionStats};
pub use chain::{compile_chain, compile_hook_chains, shared_hooks};
pub use compile::compile;
pub use fast::FastPath;
pub use incremental::{Incremental, UpdateError};
pub use lookup_timing::{thread_cpu_seconds, time_lookups, time_lookups_for, LookupTiming};
pub use meta::{BuildOptions, Classifier, Engine, Policy, LINEAR_CROSSOVER};
pub use parapet_image::{Backend, Image, ImageError, KeyWords};
pub use stateful::ImageState;
pub use walk::{RawDecision, Walker};
