//! parapet-peers — the test bed and kernel-peer measurements of issue 7.
//!
//! Builds two network namespaces joined by a veth pair ([`testbed`]),
//! generates traffic in one ([`gen`]) and filters in the other with
//! iptables-legacy, iptables-nft, nftables (linear, set, verdict map) or
//! parapet's dataplane ([`filters`]), loading worst-case rulesets rendered
//! from one description ([`rules`]). [`bench::run`] measures throughput vs
//! rule count and frame size, ruleset load times, the ipfw early/late
//! experiment, ban insertion rates ([`bans`]) and latency under load;
//! [`report`] writes Markdown, SVG plots and JSON.
//!
//! Everything needs root; nothing leaves the two namespaces, which are
//! deleted on drop, on Ctrl-C and on panic.

pub mod bans;
pub mod bench;
pub mod cmd;
pub mod error;
pub mod experiment;
pub mod filters;
pub mod forward;
pub mod report;
pub mod router;
pub mod rules;
pub mod signal;
pub mod stats;
pub mod testbed;
pub mod traffic;

pub use bench::{run, Config, Experiment, Record, Results};
pub use error::{Error, Result};
pub use filters::Filter;
pub use rules::{RuleKind, RuleSpec};
pub use testbed::Testbed;
pub use traffic::GeneratorKind;

use std::path::PathBuf;
use std::sync::OnceLock;

static WORKDIR: OnceLock<PathBuf> = OnceLock::new();

/// Per-process scratch directory for rule files and generator configs,
/// `$TMPDIR/parapet-peers-<pid>`; [`remove_workdir`] deletes it.
pub fn workdir() -> Result<PathBuf> {
    let d = WORKDIR
        .get_or_init(|| std::env::temp_dir().join(format!("parapet-peers-{}", std::process::id())));
    std::fs::create_dir_all(d)?;
    Ok(d.clone())
}

/// Deletes the scratch directory, if created.
pub fn remove_workdir() {
    if let Some(d) = WORKDIR.get() {
        let _ = std::fs::remove_dir_all(d);
    }
}
