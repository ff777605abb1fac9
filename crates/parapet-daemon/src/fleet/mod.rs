//! The daemon's side of fleet replication (`parapetd --fleet`; the
//! replication itself is `parapet-fleet`, the design `docs/fleet.md`):
//! which sets are shared, the hook that queues a client's change of one
//! for publishing, and the [`Applier`] that turns other nodes' messages
//! into [`Change`]s committed as [`Origin::Remote`] — journaled, mirrored
//! into the kernel, never published again.

use crate::change::Change;
use crate::shared::Shared;
use crate::state::{Origin, State, BAN4, BAN6};
use parapet_fleet::replica::{element_key, KeyMap};
use parapet_fleet::{Applied, Applier, Fleet, FleetMsg, Kind};
use parapet_sets::{parse_element, Clock, Element, SystemClock};
use serde_json::{json, Value};
use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;

pub(crate) mod publish;
pub use publish::is_shared;

/// The wall clock moved by a fixed offset (`--clock-offset-ms`, for tests
/// of nodes whose clocks disagree).
pub struct OffsetClock(pub i64);

impl Clock for OffsetClock {
    fn now_ms(&self) -> u64 {
        SystemClock.now_ms().saturating_add_signed(self.0)
    }
}

/// Starts the fleet thread when `--fleet` was given.
pub(crate) fn start(shared: &Arc<Shared>) -> io::Result<Option<JoinHandle<()>>> {
    let Some(f) = &shared.fleet else {
        return Ok(None);
    };
    f.start(Box::new(DaemonApplier(shared.clone()))).map(Some)
}

/// `stats.fleet`: null without `--fleet`.
pub(crate) fn stats(shared: &Shared) -> Value {
    let Some(f) = &shared.fleet else {
        return Value::Null;
    };
    let s = &f.stats;
    let (backlog, bytes, pending) = f.backlog();
    json!({
        "node": f.config.node,
        "url": f.config.url,
        "connected": f.connected(),
        "published": s.published.load(Ordering::Relaxed),
        "backlog": backlog,
        "outbox_bytes": bytes,
        "in_flight": pending,
        "dropped": s.dropped.load(Ordering::Relaxed),
        "applied": s.applied.load(Ordering::Relaxed),
        "skipped": s.skipped.load(Ordering::Relaxed),
        "rejected": s.rejected.load(Ordering::Relaxed),
        "lag": s.lag.load(Ordering::Relaxed),
        "stream_seq": s.stream_seq.load(Ordering::Relaxed),
        "applied_seq": s.applied_seq.load(Ordering::Relaxed),
        "snapshots": s.snapshots.load(Ordering::Relaxed),
        "boot_snapshot_at": s.boot_snapshot_at.load(Ordering::Relaxed),
        "resyncs": s.resyncs.load(Ordering::Relaxed),
        "resync_removed": s.resync_removed.load(Ordering::Relaxed),
        "apply_delay_ms": s.apply_delay_ms.load(Ordering::Relaxed),
        "last_error": s.last_error.lock().unwrap().clone(),
    })
}

struct DaemonApplier(Arc<Shared>);

impl Applier for DaemonApplier {
    fn apply(&self, fleet: &Fleet, msgs: Vec<FleetMsg>) -> Result<Applied, String> {
        self.commit(Some(fleet), None, msgs)
    }

    fn apply_snapshot(&self, fleet: &Fleet, msgs: Vec<FleetMsg>) -> Result<Applied, String> {
        self.commit(None, Some(fleet), msgs)
    }

    fn begin_resync(&self, fleet: &Fleet) {
        let st = self.0.state.lock().unwrap();
        let mut held = KeyMap::default();
        for_each_shared(&st, &mut |set, text, expires| {
            held.insert(element_key(set, &text), expires);
        });
        fleet.begin_resync(held);
    }

    fn end_resync(&self, fleet: &Fleet) -> Result<u64, String> {
        let shared = &self.0;
        let mut lsn = None;
        let mut removed = 0;
        {
            let mut st = shared.state.lock().unwrap();
            if let Some(e) = shared.journal.failed() {
                return Err(format!("journal: {e}"));
            }
            let gone = fleet.end_resync();
            let mut msgs = Vec::new();
            for_each_shared(&st, &mut |set, text, _| {
                if gone.contains(&element_key(set, &text)) {
                    msgs.push(FleetMsg {
                        kind: Kind::Del,
                        origin: fleet.config.node.as_str().into(),
                        seq: msgs.len() as u64 + 1,
                        expires: 0,
                        set: set.into(),
                        elem: text,
                    });
                }
            });
            let origin = &mut Origin::Remote {
                journal: &shared.journal,
                lsn: &mut lsn,
            };
            // Runs of one set (for_each_shared goes set by set).
            let mut i = 0;
            while i < msgs.len() {
                let j = i + msgs[i..]
                    .iter()
                    .take_while(|m| m.set == msgs[i].set)
                    .count();
                removed += apply_run(&mut st, origin, &msgs[i..j])?;
                i = j;
            }
        }
        if let Some(l) = lsn {
            shared.journal.sync(l)?;
        }
        Ok(removed)
    }

    fn snapshot(&self, fleet: &Fleet) -> (u64, Vec<FleetMsg>) {
        let st = self.0.state.lock().unwrap();
        // Read under the lock applications hold: the sets hold at least
        // every log message up to `at`.
        let at = fleet.stats.applied_seq.load(Ordering::Relaxed);
        let mut out = Vec::new();
        for_each_shared(&st, &mut |set, elem, expires| {
            out.push(FleetMsg {
                kind: Kind::Add,
                origin: fleet.config.node.as_str().into(),
                seq: out.len() as u64 + 1,
                expires,
                set: set.into(),
                elem,
            });
        });
        (at, out)
    }
}

/// Every live element of the shared sets, set by set in name order: its
/// set, canonical text and absolute expiry (0: permanent).
fn for_each_shared(st: &State, f: &mut dyn FnMut(&str, String, u64)) {
    let now = st.now();
    let mut names: Vec<&String> = st
        .specs
        .keys()
        .filter(|n| is_shared(&st.specs, n))
        .collect();
    names.sort();
    for name in names {
        let Some(set) = st.sets.get(name) else {
            continue;
        };
        let dims = set.key_dims();
        set.for_each_element(now, &mut |se| {
            let expires = se.remaining.map_or(0, |r| now + r.max(1));
            f(name, se.element.key_text(dims), expires);
        });
    }
}

impl DaemonApplier {
    /// Commits remote changes as [`Origin::Remote`]: decided one by one
    /// by `decide` (log messages), or a snapshot's adds (`snapshot`:
    /// during a re-bootstrap, those already held as they are skipped).
    fn commit(
        &self,
        decide: Option<&Fleet>,
        snapshot: Option<&Fleet>,
        mut msgs: Vec<FleetMsg>,
    ) -> Result<Applied, String> {
        let shared = &self.0;
        let mut lsn = None;
        let mut done = Applied::default();
        {
            let mut st = shared.state.lock().unwrap();
            if let Some(e) = shared.journal.failed() {
                return Err(format!("journal: {e}"));
            }
            // Decided under the state lock, which local commits (and so
            // their `Fleet::publish`) hold too.
            if let Some(fleet) = decide {
                fleet.decide_all(&mut msgs);
            }
            if let Some(fleet) = snapshot {
                if fleet.resyncing() {
                    msgs.retain(|m| !fleet.snapshot_holds(m));
                }
            }
            let origin = &mut Origin::Remote {
                journal: &shared.journal,
                lsn: &mut lsn,
            };
            // Consecutive messages of one kind and set become one change.
            let mut i = 0;
            while i < msgs.len() {
                let (kind, set) = (msgs[i].kind, &msgs[i].set);
                let mut j = i + 1;
                while j < msgs.len()
                    && kind != Kind::Flush
                    && msgs[j].kind == kind
                    && &msgs[j].set == set
                {
                    j += 1;
                }
                match apply_run(&mut st, origin, &msgs[i..j]) {
                    Ok(n) => done.applied += n,
                    Err(e) => {
                        done.rejected.push(format!(
                            "{} from {} (seq {}): {e}",
                            set, msgs[i].origin, msgs[i].seq
                        ));
                    }
                }
                i = j;
            }
        }
        if let Some(l) = lsn {
            shared.journal.sync(l)?;
        }
        Ok(done)
    }
}

/// Commits a run of messages of one kind and set; returns how many were
/// applied. A set that is not shared here is refused: a publisher on the
/// broker can change only what the node shares.
fn apply_run(st: &mut State, origin: &mut Origin, run: &[FleetMsg]) -> Result<u64, String> {
    let (kind, name) = (run[0].kind, run[0].set.to_string());
    if st.sets.get(&name).is_none() && (name == BAN4 || name == BAN6) {
        if kind != Kind::Add {
            return Ok(run.len() as u64); // nothing was ever banned here
        }
        let create = Change::SetCreate {
            name: name.clone(),
            spec: crate::change::ban_spec(&name),
        };
        st.commit(create, origin).map_err(|e| e.msg)?;
    }
    let dims = st.dims(&name).map_err(|e| e.msg)?;
    if !is_shared(&st.specs, &name) {
        return Err(format!("set `{name}` is not shared on this node"));
    }
    let change = if kind == Kind::Flush {
        Change::SetFlush { name }
    } else {
        let mut elems: Vec<Element> = Vec::with_capacity(run.len());
        for m in run {
            let mut el =
                parse_element(&dims, &m.elem).map_err(|e| format!("element `{}`: {e}", m.elem))?;
            el.expires = (m.expires != 0).then_some(m.expires);
            elems.push(el);
        }
        if kind == Kind::Add {
            Change::SetAdd { name, elems }
        } else {
            Change::SetDel { name, elems }
        }
    };
    st.commit(change, origin).map_err(|e| e.msg)?;
    Ok(run.len() as u64)
}

/// `parapetd`'s fleet flags.
#[derive(clap::Args, Debug, Clone)]
pub struct FleetArgs {
    /// Share the ban sets and sets created with `--shared` with every
    /// parapetd on this NATS JetStream server: nats://HOST:PORT (or
    /// tls://; several comma-separated).
    #[arg(long, value_name = "URL")]
    pub fleet: Option<String>,
    /// Fleet: this node's id, 1-64 of A-Z a-z 0-9 _ - (default: host name).
    #[arg(long, value_name = "ID")]
    pub fleet_node: Option<String>,
    /// Fleet: subject and stream prefix (nodes with one prefix form a fleet).
    #[arg(long, default_value = "parapet", value_name = "PREFIX")]
    pub fleet_prefix: String,
    /// Fleet: NATS credentials file (.creds).
    #[arg(long, value_name = "FILE")]
    pub fleet_creds: Option<std::path::PathBuf>,
    /// Fleet: file holding USER:PASSWORD.
    #[arg(long, value_name = "FILE")]
    pub fleet_user_file: Option<std::path::PathBuf>,
    /// Fleet: require TLS.
    #[arg(long)]
    pub fleet_tls: bool,
    /// Fleet: CA certificate (PEM) to verify the server.
    #[arg(long, value_name = "FILE")]
    pub fleet_tls_ca: Option<std::path::PathBuf>,
    /// Fleet: client certificate (PEM) for mutual TLS (with --fleet-tls-key).
    #[arg(long, value_name = "FILE", requires = "fleet_tls_key")]
    pub fleet_tls_cert: Option<std::path::PathBuf>,
    /// Fleet: client key (PEM).
    #[arg(long, value_name = "FILE", requires = "fleet_tls_cert")]
    pub fleet_tls_key: Option<std::path::PathBuf>,
    /// Fleet: largest publish backlog (outbox file), MiB.
    #[arg(long, default_value_t = 256)]
    pub fleet_outbox_mib: u64,
    /// Fleet: largest stream when this node creates it, MiB.
    #[arg(long, default_value_t = 1024)]
    pub fleet_stream_mib: u64,
    /// Fleet: seconds between snapshots of the shared sets (what a new
    /// node loads before the log); 0 = never.
    #[arg(long, default_value_t = 300, value_name = "S")]
    pub fleet_snapshot_s: u64,
    /// Tests only: ms added to the wall clock (simulates clock skew).
    #[arg(long, default_value_t = 0, allow_hyphen_values = true, hide = true)]
    pub clock_offset_ms: i64,
}

impl FleetArgs {
    /// The fleet settings, if `--fleet` was given.
    pub fn config(
        &self,
        state_dir: &std::path::Path,
    ) -> Result<Option<parapet_fleet::FleetConfig>, String> {
        let Some(url) = &self.fleet else {
            return Ok(None);
        };
        let node = match &self.fleet_node {
            Some(n) => n.clone(),
            None => std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map_err(|e| format!("--fleet-node not given and no host name: {e}"))?
                .trim()
                .replace('.', "-"),
        };
        let user_password = match &self.fleet_user_file {
            None => None,
            Some(p) => {
                let t = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
                let (u, pw) = t
                    .trim_end_matches('\n')
                    .split_once(':')
                    .ok_or_else(|| format!("{}:1:1: expected USER:PASSWORD", p.display()))?;
                Some((u.to_string(), pw.to_string()))
            }
        };
        Ok(Some(parapet_fleet::FleetConfig {
            url: url.clone(),
            node,
            prefix: self.fleet_prefix.clone(),
            creds: self.fleet_creds.clone(),
            user_password,
            tls: self.fleet_tls,
            tls_ca: self.fleet_tls_ca.clone(),
            tls_cert: self.fleet_tls_cert.clone().zip(self.fleet_tls_key.clone()),
            state_dir: state_dir.to_path_buf(),
            outbox_bytes: self.fleet_outbox_mib.max(1) << 20,
            stream_bytes: (self.fleet_stream_mib.max(1) << 20) as i64,
            snapshot_every: (self.fleet_snapshot_s > 0)
                .then(|| std::time::Duration::from_secs(self.fleet_snapshot_s)),
        }))
    }
}
