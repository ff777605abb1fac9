//! What the daemon's threads share: settings, the state behind its
//! mutex, the journal, the loader and the counters; and compaction
//! (snapshot + new journal epoch), which needs all of them.

use crate::compiled::Loader;
use crate::journal::{self, Journal};
use crate::state::State;
use std::fs::File;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Daemon settings.
#[derive(Clone, Debug)]
pub struct Config {
    /// Control socket path.
    pub socket: PathBuf,
    /// State directory (journal, snapshot, lock).
    pub state_dir: PathBuf,
    /// Ruleset file applied at start and on SIGHUP.
    pub config: Option<PathBuf>,
    /// Socket file mode.
    pub socket_mode: u32,
    /// Group owning the socket (by name), if not the daemon's.
    pub socket_group: Option<String>,
    /// fdatasync the journal before acknowledging changes (off only for
    /// throwaway state, e.g. benchmarks of everything but the disk).
    pub fsync: bool,
    /// Most concurrent clients.
    pub max_clients: usize,
    /// Journal size that triggers a snapshot.
    pub snapshot_bytes: u64,
    /// How often expired elements are reaped.
    pub reap_interval: Duration,
    /// Sizing of the kernel dataplane and the chain it runs.
    pub kernel: crate::kernel::KernelConfig,
    /// Prometheus metrics: off unless asked for (`--metrics*`).
    pub metrics: crate::metrics_config::MetricsConfig,
    /// Fleet replication (`--fleet`), if any.
    pub fleet: Option<parapet_fleet::FleetConfig>,
    /// Added to the wall clock, ms (tests of clock skew between nodes).
    pub clock_offset_ms: i64,
    /// CrowdSec Local API source (`--crowdsec`), if any.
    pub crowdsec: Option<crate::crowdsec::source::CrowdsecConfig>,
    /// Tests only: how long `apply` holds the state lock before it swaps
    /// (`--test-apply-hold-ms`: a long apply, for the link watcher's test).
    pub test_apply_hold: Duration,
}

impl Config {
    /// Defaults with the given socket and state directory.
    pub fn new(socket: impl Into<PathBuf>, state_dir: impl Into<PathBuf>) -> Config {
        Config {
            socket: socket.into(),
            state_dir: state_dir.into(),
            config: None,
            socket_mode: 0o660,
            socket_group: None,
            fsync: true,
            max_clients: 256,
            snapshot_bytes: 64 << 20,
            reap_interval: Duration::from_millis(250),
            kernel: crate::kernel::KernelConfig::default(),
            metrics: crate::metrics_config::MetricsConfig::default(),
            fleet: None,
            clock_offset_ms: 0,
            crowdsec: None,
            test_apply_hold: Duration::ZERO,
        }
    }
}

/// Counters for `stats`.
#[derive(Default)]
pub struct Stats {
    /// Requests answered.
    pub requests: AtomicU64,
    /// Requests answered with an error.
    pub errors: AtomicU64,
    /// Connected clients.
    pub clients: AtomicUsize,
    /// Connections accepted since start.
    pub connections: AtomicU64,
    /// Snapshots written since start.
    pub snapshots: AtomicU64,
    /// Journal fsync batches.
    pub syncs: AtomicU64,
}

/// What recovery found, for logs and `stats`.
#[derive(Debug, Default, Clone)]
pub struct Recovery {
    /// Records replayed from the snapshot.
    pub snapshot_records: u64,
    /// Records replayed from the journal.
    pub journal_records: u64,
    /// Problems (corruption, truncation, records that no longer apply).
    pub problems: Vec<String>,
    /// Time taken (wall clock).
    pub millis: u64,
    /// CPU time the recovering thread used (on a loaded machine this is
    /// what recovery costs; `millis` also counts waiting for a CPU).
    pub cpu_millis: u64,
}

/// State shared by the daemon's threads.
pub struct Shared {
    /// Settings.
    pub config: Config,
    /// The state.
    pub state: Mutex<State>,
    /// The journal.
    pub journal: Journal,
    /// Ruleset loader.
    pub loader: Box<dyn Loader>,
    /// Counters.
    pub stats: Stats,
    /// Recovery report.
    pub recovery: Recovery,
    /// Fleet replication, if configured.
    pub fleet: Option<std::sync::Arc<parapet_fleet::Fleet>>,
    /// The CrowdSec source, if configured.
    pub crowdsec: Option<std::sync::Arc<crate::crowdsec::source::Source>>,
    pub(crate) started: Instant,
    pub(crate) shutdown: AtomicBool,
    pub(crate) _lock: File,
}

/// Writes a snapshot of `st` and starts a new journal epoch. Call with the
/// state lock held.
pub fn compact(shared: &Shared, st: &State) -> Result<(), String> {
    shared.journal.sync_all()?;
    let epoch = shared.journal.epoch() + 1;
    journal::write_snapshot(&shared.config.state_dir, epoch, |emit| st.snapshot(emit))
        .map_err(|e| format!("snapshot failed: {e}"))?;
    shared
        .journal
        .rotate(epoch)
        .map_err(|e| format!("journal rotation failed: {e}"))?;
    shared.stats.snapshots.fetch_add(1, Ordering::Relaxed);
    Ok(())
}
