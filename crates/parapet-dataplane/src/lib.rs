//! parapet's kernel dataplane.
//!
//! A BPF program (`bpf/parapet.bpf.c`, compiled by `build.rs` and embedded
//! here) parses each packet at XDP or tc ingress into a fixed
//! [`abi::PacketKey`], classifies it, counts it per rule, logs it through a
//! rate-limited ring buffer when the rule says so, and returns the rule's
//! verdict. [`Dataplane`] loads and drives it from user space.
//!
//! - [`abi`]: `#[repr(C)]` mirrors of `bpf/parapet.h`, checked against C.
//! - [`frame`]: Ethernet frames, parsed ([`frame::parse`], the BPF
//!   parser's twin in Rust, for user-space tools and differential tests
//!   against the kernel program) and built ([`frame::build`], crafted test
//!   frames).
//! - [`Dataplane`], the aya-based loader and control API, one file per
//!   facet: `load.rs` (the object, options, features, the handle),
//!   `attach.rs` ([`AttachPoint`]s), `actions.rs` (rule actions, the
//!   interim classifier), `slots.rs` (image slots and the header checks of
//!   an image, format: `parapet-image`), `counters.rs` (counters,
//!   statistics, the LOG ring), `set_maps.rs` (sets in the kernel) and
//!   `test_run.rs` (`BPF_PROG_TEST_RUN`; `floor.rs`: the benchmark's
//!   trivial XDP and tc programs, [`PassFloor`]; `stage_profile.rs`: the
//!   program stopped after one stage, [`Stage`]); errors in `error.rs`.
//! - [`pin`]: programs, maps and links pinned under bpffs, so the kernel
//!   keeps enforcing when the process dies; adoption by the next load and
//!   the program swap by `BPF_LINK_UPDATE` (raw syscalls in `bpf_sys.rs`).
//! - `reject_queue.rs`: REJECT at the netfilter hooks, answered from user
//!   space ([`RejectQueue`], [`RejectSender`]).
//! - [`sets`]: sets in BPF maps (the image key's set bits): element
//!   splitting, expiries, the user-space mirror.
//! - [`bridge`]: from `parapet_model::SetRef` and `parapet_sets::SetStore`
//!   to the kernel's sets ([`Dataplane::install_sets`]).
//! - [`ct_table`]: the nft table that makes the kernel track connections
//!   for the conntrack lookup.
//! - [`ruleset`]: a compiled ruleset into the kernel
//!   ([`Dataplane::install_ruleset`]), shared by `parapet run` and `parapetd`.
//! - [`codegen`]: a short decision list as a straight-line XDP program of
//!   its own (no image, maps or calls), for benchmarks and tests so far.
//!
//! Classification: the BPF image walker (`bpf/lib/walk.h`) reads the
//! classifier image written with [`Dataplane::write_image`] and made live
//! with [`Dataplane::swap`]; without a live image an interim (proto, dport)
//! table decides. See `docs/dataplane.md`.

pub mod abi;
mod actions;
pub mod addr_types;
mod adopt;
mod attach;
mod bpf_sys;
pub mod bridge;
pub mod codegen;
mod counters;
pub mod ct_table;
mod dynset_seed;
mod error;
mod floor;
pub mod frame;
mod handover;
#[doc(hidden)]
pub mod kfunc;
mod late_load;
mod load;
pub mod netfilter;
mod netfilter_attach;
mod netlink;
mod objects;
pub mod pin;
mod programs;
mod recent;
mod reject_queue;
pub mod rev_path;
pub mod ruleset;
mod set_expiry;
mod set_maps;
pub mod set_mirror;
mod slots;
mod stage_profile;
pub mod stateful;
pub mod tc_hooks;
mod test_run;
mod xdp_engine;

pub use abi::{Counter, KernelVerdict, PacketKey, ParseStatus, Stat, HOOK_IFACES};
pub use adopt::program_for_hook;
pub use attach::{hook_pin_name, AttachPoint, Attached, Mode};
pub use bpf_sys::LinkIds;
pub use codegen::{EngineWant, XdpEngine};
pub use counters::{HookCount, LogEvent, Stats};
pub use error::{BadImage, Error, Result};
pub use floor::{PassFloor, TestRunner};
pub use load::{
    bpf_object_for_this_kernel, Dataplane, Features, LoadOptions, BPF_OBJECT, BPF_OBJECT_ITER,
    INTERFACE_ONLY_NOTE,
};
pub use netfilter::{NfAttached, NfFamily, NfFloor, NfHook, NfLink, PRIORITY_SEARCH};
pub use pin::{
    default_pin_dir, handover_dir, pin_dir_in_netns, remove_handover, remove_pins,
    remove_stale_handovers, PinnedAttachment,
};
pub use programs::{LateLoader, LatePrograms, Programs};
pub use recent::{RecentAddress, RECENT_STAMPS};
pub use reject_queue::{NfReject, RejectCounts, RejectQueue, RejectSender};
pub use set_mirror::{
    monotonic_ns, KernelSetEntry, PacketPart, SetDim, SetElement, SetError, SetSizing,
};
pub use stage_profile::{Stage, BPF_OBJECT_STAGES};
pub use tc_hooks::{
    ifindex_of, is_tc_hooks_pin, tc_hook_bit, TcHooksAttached, TcHooksKit, TcHooksLinks,
    STAGE_POST_OUT, STAGE_ROUTE_IN, TC_HOOKS_IN, TC_HOOKS_OUT,
};
pub use test_run::{KernelDecision, TestRunOutcome};
pub use xdp_engine::{GeneratedOnMaps, PreparedXdpEngine, XdpEngineLoader};
