//! # parapet-fleet
//!
//! Replication of parapetd's shared sets (the ban sets and sets created
//! `--shared`) across a fleet over NATS JetStream. The design — what is
//! replicated, ordering, conflicts, failures — is in `docs/fleet.md`.
//!
//! - [`wire`]: one change (an outbox record), parsed strictly and emitted
//!   side by side;
//! - [`batch`]: many changes of one origin in one broker message;
//! - [`outbox`]: the durable, bounded publish backlog;
//! - [`replica`]: which consumed messages to apply (dedupe, own echoes);
//! - [`snapshot`]: the shared sets' contents at a log position, written
//!   periodically, read by a new node before the log;
//! - [`link`]: the NATS client glue (stream, durable consumer, the
//!   publish and consume loops) on a tokio runtime of its own thread;
//! - [`Fleet`]: what the daemon holds: [`Fleet::publish`] (its hook for
//!   local changes) and the [`Applier`] it implements for remote ones.

pub mod batch;
pub mod link;
pub mod outbox;
pub mod replica;
pub mod snapshot;
pub mod wire;

use outbox::Outbox;
use replica::Replica;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
pub use wire::{FleetMsg, Kind, WireError};

/// How to reach the fleet.
#[derive(Clone, Debug)]
pub struct FleetConfig {
    /// `nats://HOST:PORT` (or `tls://`); several comma-separated.
    pub url: String,
    /// This node's id (origin of its messages, name of its consumer).
    pub node: String,
    /// Subject and stream prefix: subjects `PREFIX.fleetlog.NODE`, stream
    /// `PREFIX_fleetlog`. Nodes with the same prefix form one fleet.
    pub prefix: String,
    /// NATS credentials file (`.creds`: JWT and nkey seed).
    pub creds: Option<PathBuf>,
    /// User and password (`USER:PASSWORD` in a file, not on the command line).
    pub user_password: Option<(String, String)>,
    /// Require TLS.
    pub tls: bool,
    /// CA certificate(s) to verify the server with (PEM).
    pub tls_ca: Option<PathBuf>,
    /// Client certificate and key (PEM) for mutual TLS.
    pub tls_cert: Option<(PathBuf, PathBuf)>,
    /// State directory (outbox files).
    pub state_dir: PathBuf,
    /// Largest outbox, bytes.
    pub outbox_bytes: u64,
    /// Largest stream, bytes (when creating it; oldest dropped beyond).
    pub stream_bytes: i64,
    /// How often to write a snapshot of the shared sets (None: never).
    pub snapshot_every: Option<std::time::Duration>,
}

/// One batch of remote changes applied, as the daemon reports it.
#[derive(Debug, Default)]
pub struct Applied {
    /// Messages applied.
    pub applied: u64,
    /// Messages refused (unknown or unshared set, bad element), each why.
    pub rejected: Vec<String>,
}

/// The daemon's side: applies remote changes as changes of its state,
/// journaled and synced before it returns. It must call [`Fleet::decide`]
/// for each message under the same lock as its local commits take (they
/// call [`Fleet::publish`]): deciding and applying are one step for the
/// state, or a local change slipping in between would be misjudged.
/// `Err` means nothing can be applied now (the journal failed): the
/// batch is not acknowledged and comes again.
pub trait Applier: Send + Sync + 'static {
    /// Applies the messages `fleet.decide` accepts, in order.
    fn apply(&self, fleet: &Fleet, msgs: Vec<FleetMsg>) -> Result<Applied, String>;
    /// Applies one part of a snapshot (adds, not decided: they are no
    /// origin's changes), journaled and synced.
    fn apply_snapshot(&self, fleet: &Fleet, msgs: Vec<FleetMsg>) -> Result<Applied, String>;
    /// Under the state lock: [`FleetStats::applied_seq`] and every live
    /// element of the shared sets as an add with its absolute expiry,
    /// origin this node and sequence numbers 1, 2, ...
    fn snapshot(&self, fleet: &Fleet) -> (u64, Vec<FleetMsg>);
    /// Under the state lock: hands [`Fleet::begin_resync`] every live
    /// element of the shared sets ([`replica::element_key`] of its set and
    /// canonical text → absolute expiry, 0 = permanent).
    fn begin_resync(&self, fleet: &Fleet);
    /// Under the state lock: [`Fleet::end_resync`], then removes the
    /// shared sets' elements whose keys it returned (journaled and synced,
    /// never published: the fleet removed them in the lost log); returns
    /// how many.
    fn end_resync(&self, fleet: &Fleet) -> Result<u64, String>;
}

/// Counters for `stats`.
#[derive(Default)]
pub struct FleetStats {
    /// Messages the broker acknowledged.
    pub published: AtomicU64,
    /// Local changes not queued: the outbox was full or failed.
    pub dropped: AtomicU64,
    /// Remote messages applied.
    pub applied: AtomicU64,
    /// Own messages and duplicates skipped.
    pub skipped: AtomicU64,
    /// Malformed or refused messages.
    pub rejected: AtomicU64,
    /// Messages still to consume behind the last one delivered.
    pub lag: AtomicU64,
    /// Stream sequence of the last message delivered.
    pub stream_seq: AtomicU64,
    /// Stream sequence of the last message applied (and journaled).
    pub applied_seq: AtomicU64,
    /// Snapshots written.
    pub snapshots: AtomicU64,
    /// Log position of the snapshot this node bootstrapped from (0: none).
    pub boot_snapshot_at: AtomicU64,
    /// Re-bootstraps from a snapshot of a running node whose next log
    /// message was gone (away longer than the log's horizon).
    pub resyncs: AtomicU64,
    /// Elements removed by the end of a re-bootstrap (the fleet had
    /// removed them in the part of the log this node never read).
    pub resync_removed: AtomicU64,
    /// Milliseconds between a remote message's publication (by the
    /// broker's clock) and its application here, last batch.
    pub apply_delay_ms: AtomicU64,
    /// Last error, for `stats`.
    pub last_error: Mutex<String>,
}

impl FleetStats {
    pub(crate) fn error(&self, e: impl std::fmt::Display) {
        *self.last_error.lock().unwrap() = e.to_string();
    }
}

/// The fleet: the outbox, the receive-side state and the counters,
/// shared between the daemon's threads and the fleet's own thread.
pub struct Fleet {
    /// Settings.
    pub config: FleetConfig,
    outbox: Mutex<Outbox>,
    replica: Mutex<Replica>,
    /// Counters.
    pub stats: FleetStats,
    wake: tokio::sync::Notify,
    stop: AtomicBool,
    client: std::sync::OnceLock<async_nats::Client>,
}

impl Fleet {
    /// Opens the outbox. No network until [`Fleet::start`].
    pub fn open(config: FleetConfig) -> io::Result<Arc<Fleet>> {
        if !wire::valid_id(&config.node) || !wire::valid_id(&config.prefix) {
            return Err(io::Error::other(
                "fleet node id and prefix: 1 to 64 of A-Z a-z 0-9 _ -",
            ));
        }
        let outbox = Outbox::open(&config.state_dir, config.outbox_bytes)?;
        // Nothing is taken as in flight after a restart: the outbox may
        // hold a change whose journal record a crash lost (the client was
        // never answered), so own messages coming back are applied again,
        // in stream order, which makes this node equal to the others.
        let replica = Replica::new(&config.node);
        Ok(Arc::new(Fleet {
            config,
            outbox: Mutex::new(outbox),
            replica: Mutex::new(replica),
            stats: FleetStats::default(),
            wake: tokio::sync::Notify::new(),
            stop: AtomicBool::new(false),
            client: std::sync::OnceLock::new(),
        }))
    }

    /// Queues a local change of a shared set: one message per element
    /// (`elems`: text and absolute expiry, 0 = permanent; empty for a
    /// flush). Called under the daemon's state lock, so the outbox order
    /// is the commit order. Never blocks on the network; when the outbox
    /// is full the change stays local and is counted in `dropped`.
    pub fn publish(&self, kind: Kind, set: &str, elems: &[(String, u64)]) {
        let mut ob = self.outbox.lock().unwrap();
        let mut rep = self.replica.lock().unwrap();
        let flush = [(String::new(), 0)];
        let elems = if kind == Kind::Flush {
            &flush[..]
        } else {
            elems
        };
        let (origin, set): (Arc<str>, Arc<str>) = (self.config.node.as_str().into(), set.into());
        for (elem, expires) in elems {
            let m = FleetMsg {
                kind,
                origin: origin.clone(),
                seq: ob.next_seq(),
                expires: if kind == Kind::Add { *expires } else { 0 },
                set: set.clone(),
                elem: elem.clone(),
            };
            match ob.append(&m) {
                Ok(()) => rep.local(&m),
                Err(e) => {
                    self.stats.dropped.fetch_add(1, Ordering::Relaxed);
                    self.stats.error(format!("outbox: {e}"));
                }
            }
        }
        drop(rep);
        drop(ob);
        self.wake.notify_one();
    }

    /// Whether to apply a consumed message (see [`Replica::decide`]);
    /// counts the skipped ones.
    pub fn decide(&self, m: &FleetMsg) -> bool {
        let d = self.replica.lock().unwrap().decide(m);
        if d != replica::Decision::Apply {
            self.stats.skipped.fetch_add(1, Ordering::Relaxed);
        }
        d == replica::Decision::Apply
    }

    /// Keeps the consumed messages to apply (in stream order; see
    /// [`Replica::decide_all`]): one lock of the replica for a round;
    /// counts the skipped ones.
    pub fn decide_all(&self, msgs: &mut Vec<FleetMsg>) {
        let skipped = self.replica.lock().unwrap().decide_all(msgs);
        self.stats
            .skipped
            .fetch_add(skipped as u64, Ordering::Relaxed);
    }

    /// Starts a re-bootstrap ([`Replica::begin_resync`]); call under the
    /// state lock.
    pub fn begin_resync(&self, held: replica::KeyMap<u64>) {
        self.replica.lock().unwrap().begin_resync(held);
    }

    /// During a re-bootstrap, whether a snapshot add is already held as is
    /// ([`Replica::snapshot_holds`]); call under the state lock.
    pub fn snapshot_holds(&self, m: &FleetMsg) -> bool {
        self.replica.lock().unwrap().snapshot_holds(m)
    }

    /// Whether a re-bootstrap is under way.
    pub fn resyncing(&self) -> bool {
        self.replica.lock().unwrap().resyncing()
    }

    /// Ends a re-bootstrap: the keys of the elements to remove
    /// ([`Replica::end_resync`]); call under the state lock.
    pub fn end_resync(&self) -> replica::KeySet {
        self.replica.lock().unwrap().end_resync()
    }

    /// Starts the fleet thread (connect, publish, consume).
    pub fn start(self: &Arc<Self>, applier: Box<dyn Applier>) -> io::Result<JoinHandle<()>> {
        let f = self.clone();
        std::thread::Builder::new()
            .name("fleet".into())
            .spawn(move || link::run(f, applier))
    }

    /// Asks the fleet thread to stop (join the handle after).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.wake.notify_one();
    }

    pub(crate) fn stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// Whether the client is connected to the broker now.
    pub fn connected(&self) -> bool {
        self.client
            .get()
            .is_some_and(|c| c.connection_state() == async_nats::connection::State::Connected)
    }

    /// Records waiting in the outbox, outbox bytes, own changes in flight.
    pub fn backlog(&self) -> (u64, u64, usize) {
        let ob = self.outbox.lock().unwrap();
        let p = self.replica.lock().unwrap().pending();
        (ob.backlog(), ob.bytes(), p)
    }
}
