//! The daemon: recovery from the state directory, the control socket, a
//! reader and a writer thread per client, the expiry reaper, sd_notify and
//! signals.
//!
//! Threads rather than an event loop: a client costs two mostly idle
//! threads (connections are capped), and a blocking request — an `apply`
//! compile, a slow reader — never holds up another client. State changes are
//! serialized by one mutex; journal fsyncs are grouped (see
//! [`crate::journal::Journal`]), so concurrent writers share them.

use crate::change::Change;
use crate::command::Command;
use crate::compiled::Loader;
use crate::journal::{self, read_file, Journal, Lsn, JOURNAL_MAGIC, SNAPSHOT_MAGIC};
use crate::kernel::{hook_name, mode_name, Kernel};
use crate::proto::{code, parse_request, write_reply, ErrorReply, Outcome, MAX_LINE};
use crate::state::{Origin, State};
use parapet_dataplane::{Hook, Mode};
use parapet_sets::{Clock, SystemClock};
use serde_json::{json, Map, Value};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::os::unix::io::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// Most elements one `set.add`/`set.del`/`ban` request may carry (bounds
/// the per-request working memory; clients split bigger batches).
pub const MAX_ELEMS: usize = 1 << 18;

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

fn thread_cpu_ms() -> u64 {
    // SAFETY: getrusage only fills the struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1000 + t.tv_usec as u64 / 1000;
    tv(ru.ru_utime) + tv(ru.ru_stime)
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
    started: Instant,
    shutdown: AtomicBool,
    _lock: File,
}

fn now_clock() -> Arc<dyn Clock> {
    Arc::new(SystemClock)
}

fn peek_epoch(path: &Path, magic: &[u8; 8]) -> Option<u64> {
    let mut h = [0u8; 16];
    let mut f = File::open(path).ok()?;
    f.read_exact(&mut h).ok()?;
    (&h[..8] == magic).then(|| u64::from_le_bytes(h[8..].try_into().unwrap()))
}

fn lock_state_dir(dir: &Path) -> io::Result<File> {
    fs::create_dir_all(dir)?;
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700))?;
    let f = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(dir.join("lock"))?;
    // SAFETY: flock on a valid, owned descriptor.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            format!(
                "state directory {} is in use by another parapetd",
                dir.display()
            ),
        ));
    }
    Ok(f)
}

/// Rebuilds the state from snapshot + journal and opens the journal for
/// appending.
fn recover(
    config: &Config,
    loader: &dyn Loader,
    clock: Arc<dyn Clock>,
) -> io::Result<(State, Journal, Recovery, bool)> {
    let t0 = Instant::now();
    let cpu0 = thread_cpu_ms();
    let dir = &config.state_dir;
    let mut st = State::new(clock);
    let mut rec = Recovery::default();
    let mut problems = Vec::new();
    let snap = read_file(&dir.join("snapshot"), SNAPSHOT_MAGIC, |r| {
        if let Err(p) = st.replay(r, loader) {
            problems.push(format!("snapshot: {p}"));
        }
    })?;
    let s_epoch = snap.as_ref().map_or(0, |s| s.epoch);
    if let Some(s) = &snap {
        rec.snapshot_records = s.records;
        rec.problems.extend(s.problems.iter().cloned());
    }
    let jpath = dir.join("journal");
    let j_epoch = peek_epoch(&jpath, JOURNAL_MAGIC);
    let mut needs_compaction = false;
    let journal = match j_epoch {
        Some(e) if e >= s_epoch => {
            let rep = read_file(&jpath, JOURNAL_MAGIC, |r| {
                if let Err(p) = st.replay(r, loader) {
                    problems.push(format!("journal: {p}"));
                }
            })?
            .expect("journal exists");
            rec.journal_records = rep.records;
            if !rep.problems.is_empty() {
                // Keep the damaged file for inspection, then start clean.
                let keep = dir.join(format!("journal.corrupt-{}", st.now()));
                fs::copy(&jpath, &keep)?;
                rec.problems.extend(rep.problems);
                rec.problems
                    .push(format!("damaged journal kept as {}", keep.display()));
                needs_compaction = true;
            }
            Journal::open(dir, e, Some(rep.good_bytes), config.fsync)?
        }
        found => {
            if jpath.exists() && found.is_none() {
                let keep = dir.join(format!("journal.corrupt-{}", st.now()));
                fs::copy(&jpath, &keep)?;
                rec.problems.push(format!(
                    "{}: bad header; kept as {} and ignored",
                    jpath.display(),
                    keep.display()
                ));
            }
            // Missing, unreadable, or older than the snapshot (a crash right
            // after a snapshot): everything in it is in the snapshot.
            Journal::open(dir, s_epoch, None, config.fsync)?
        }
    };
    if snap.as_ref().is_some_and(|s| !s.problems.is_empty()) {
        needs_compaction = true;
    }
    rec.problems.extend(problems);
    rec.millis = t0.elapsed().as_millis() as u64;
    rec.cpu_millis = thread_cpu_ms() - cpu0;
    Ok((st, journal, rec, needs_compaction))
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

/// A running daemon (its threads); dropping it shuts it down.
pub struct Daemon {
    /// Shared state (for in-process inspection and tests).
    pub shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
    reaper: Option<JoinHandle<()>>,
    logger: Option<JoinHandle<()>>,
}

fn prepare_socket(config: &Config) -> io::Result<UnixListener> {
    let path = &config.socket;
    if let Some(parent) = path.parent() {
        if !parent.as_os_str().is_empty() {
            fs::create_dir_all(parent)?;
        }
    }
    if path.exists() {
        if UnixStream::connect(path).is_ok() {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!("another daemon is listening on {}", path.display()),
            ));
        }
        fs::remove_file(path)?; // stale socket of a dead daemon
    }
    // Bind with a restrictive umask so the socket is never briefly open to all.
    // SAFETY: umask only changes this process's file creation mask.
    let old = unsafe { libc::umask(0o177) };
    let l = UnixListener::bind(path);
    unsafe { libc::umask(old) };
    let l = l?;
    fs::set_permissions(path, fs::Permissions::from_mode(config.socket_mode))?;
    if let Some(g) = &config.socket_group {
        let cname =
            std::ffi::CString::new(g.as_str()).map_err(|_| io::Error::other("bad group name"))?;
        // SAFETY: getgrnam returns a pointer into static storage or null.
        let gr = unsafe { libc::getgrnam(cname.as_ptr()) };
        if gr.is_null() {
            return Err(io::Error::other(format!("no such group `{g}`")));
        }
        let gid = unsafe { (*gr).gr_gid };
        let cpath = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
            .map_err(|_| io::Error::other("bad path"))?;
        // SAFETY: valid C string; uid -1 leaves the owner unchanged.
        if unsafe { libc::chown(cpath.as_ptr(), u32::MAX, gid) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(l)
}

impl Daemon {
    /// Recovers state, binds the socket and starts serving.
    pub fn start(config: Config, loader: Box<dyn Loader>) -> io::Result<Daemon> {
        Self::start_with_clock(config, loader, now_clock())
    }

    /// As [`Daemon::start`] on a given clock (tests).
    pub fn start_with_clock(
        config: Config,
        loader: Box<dyn Loader>,
        clock: Arc<dyn Clock>,
    ) -> io::Result<Daemon> {
        let lock = lock_state_dir(&config.state_dir)?;
        let (mut state, journal, recovery, needs_compaction) = recover(&config, &*loader, clock)?;
        for p in &recovery.problems {
            eprintln!("parapetd: recovery: {p}");
        }
        // The program is loaded again (and re-attached) before any client
        // is served: the links died with the previous process.
        state.kernel.config = config.kernel.clone();
        for line in state.kernel_restore() {
            eprintln!("parapetd: dataplane: {line}");
        }
        let listener = prepare_socket(&config)?;
        let shared = Arc::new(Shared {
            config,
            state: Mutex::new(state),
            journal,
            loader,
            stats: Stats::default(),
            recovery,
            started: Instant::now(),
            shutdown: AtomicBool::new(false),
            _lock: lock,
        });
        if needs_compaction {
            let st = shared.state.lock().unwrap();
            compact(&shared, &st).map_err(io::Error::other)?;
        }
        let s = shared.clone();
        let acceptor = thread::Builder::new()
            .name("accept".into())
            .spawn(move || accept_loop(s, listener))?;
        let s = shared.clone();
        let reaper = thread::Builder::new()
            .name("reaper".into())
            .spawn(move || reap_loop(s))?;
        let s = shared.clone();
        let logger = thread::Builder::new()
            .name("bpf-log".into())
            .spawn(move || log_loop(s))?;
        Ok(Daemon {
            shared,
            acceptor: Some(acceptor),
            reaper: Some(reaper),
            logger: Some(logger),
        })
    }

    /// Applies a ruleset file (start-up `--config`, SIGHUP).
    pub fn apply_file(&self, path: &Path) -> Result<usize, Vec<String>> {
        let text =
            fs::read_to_string(path).map_err(|e| vec![format!("{}: {e}", path.display())])?;
        let name = path.display().to_string();
        match do_apply(&self.shared, &name, &text, None, false) {
            Ok(m) => Ok(m.get("rules").and_then(Value::as_u64).unwrap_or(0) as usize),
            Err(e) => Err(match e.detail {
                Some((_, Value::Array(v))) => v
                    .into_iter()
                    .filter_map(|s| s.as_str().map(String::from))
                    .collect(),
                _ => vec![e.msg],
            }),
        }
    }

    /// Stops accepting, writes a final snapshot (so the next start replays
    /// no journal), and waits for the service threads.
    pub fn shutdown(&mut self) {
        if self.shared.shutdown.swap(true, Ordering::SeqCst) {
            return;
        }
        let _ = UnixStream::connect(&self.shared.config.socket); // wake accept()
        if let Some(h) = self.acceptor.take() {
            let _ = h.join();
        }
        if let Some(h) = self.reaper.take() {
            let _ = h.join();
        }
        if let Some(h) = self.logger.take() {
            let _ = h.join();
        }
        let st = self.shared.state.lock().unwrap();
        let (t0, cpu0) = (Instant::now(), thread_cpu_ms());
        match compact(&self.shared, &st) {
            Ok(()) => eprintln!(
                "parapetd: final snapshot of {} elements in {} ms ({} ms CPU)",
                st.element_count(),
                t0.elapsed().as_millis(),
                thread_cpu_ms() - cpu0
            ),
            Err(e) => eprintln!("parapetd: final snapshot: {e}"),
        }
        let _ = fs::remove_file(&self.shared.config.socket);
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn accept_loop(shared: Arc<Shared>, listener: UnixListener) {
    for conn in listener.incoming() {
        if shared.shutdown.load(Ordering::SeqCst) {
            break;
        }
        let Ok(mut stream) = conn else { continue };
        shared.stats.connections.fetch_add(1, Ordering::Relaxed);
        if shared.stats.clients.fetch_add(1, Ordering::SeqCst) >= shared.config.max_clients {
            shared.stats.clients.fetch_sub(1, Ordering::SeqCst);
            let mut out = Vec::new();
            write_reply(
                &mut out,
                None,
                &Err(ErrorReply::new(code::BUSY, "too many clients")),
            );
            let _ = stream.write_all(&out);
            continue;
        }
        let s = shared.clone();
        let spawned = thread::Builder::new().name("client".into()).spawn(move || {
            let _ = serve_client(&s, stream);
            s.stats.clients.fetch_sub(1, Ordering::SeqCst);
        });
        if spawned.is_err() {
            shared.stats.clients.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

fn reap_loop(shared: Arc<Shared>) {
    let mut tick = 0u64;
    while !shared.shutdown.load(Ordering::SeqCst) {
        thread::sleep(shared.config.reap_interval);
        tick += 1;
        // Bounded work per tick so the lock is held briefly.
        let mut st = shared.state.lock().unwrap();
        st.reap(1 << 14);
        // Expired kernel entries already match nothing; freeing them scans
        // the kernel sets' mirrors, so it runs every 8th tick (2 s).
        if tick % 8 == 0 {
            st.kernel.reap(1 << 14);
        }
    }
}

/// Writes the kernel's LOG events to stderr, one line each, with the
/// live ruleset's log prefixes.
fn log_loop(shared: Arc<Shared>) {
    while !shared.shutdown.load(Ordering::SeqCst) {
        thread::sleep(Duration::from_millis(100));
        let (events, rs) = {
            let mut st = shared.state.lock().unwrap();
            if !st.kernel.loaded() {
                continue;
            }
            let ev = st.kernel.poll_log(4096);
            (ev, st.active.as_ref().map(|a| a.ruleset.clone()))
        };
        if events.is_empty() {
            continue;
        }
        let empty = parapet_model::Ruleset::default();
        let rs = rs.as_deref().unwrap_or(&empty);
        let mut out = String::new();
        for ev in &events {
            out.push_str(&parapet_dataplane::ruleset::log_line(rs, ev));
            out.push('\n');
        }
        let _ = io::stderr().write_all(out.as_bytes());
    }
}

/// Replies of one read's worth of requests, with the journal position each
/// change must reach before its reply may go out.
type Batch = Vec<(Option<u64>, Outcome, Option<Lsn>)>;

/// Serves one connection with two threads. The reader parses and executes
/// requests in order and appends their journal records; the writer makes
/// each batch durable (one journal sync) and then sends its replies, in
/// order. While the writer waits for the disk the reader goes on with the
/// next requests, and the next sync covers all of them: group commit that
/// overlaps the fdatasync with the work instead of adding to it. The
/// channel between them holds two batches, which bounds the memory a
/// client that does not read its replies can pin.
fn serve_client(shared: &Shared, stream: UnixStream) -> io::Result<()> {
    // Timeouts let the threads notice shutdown and drop dead peers.
    stream.set_read_timeout(Some(Duration::from_millis(500)))?;
    stream.set_write_timeout(Some(Duration::from_secs(60)))?;
    let wstream = stream.try_clone()?;
    let (tx, rx) = std::sync::mpsc::sync_channel::<Batch>(2);
    thread::scope(|sc| {
        let writer = thread::Builder::new()
            .name("client-w".into())
            .spawn_scoped(sc, || write_loop(shared, wstream, rx))?;
        let r = read_loop(shared, stream, tx);
        let w = writer
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("writer panicked")));
        r.and(w)
    })
}

fn read_loop(
    shared: &Shared,
    mut stream: UnixStream,
    tx: std::sync::mpsc::SyncSender<Batch>,
) -> io::Result<()> {
    const CHUNK: usize = 256 << 10;
    // `buf[..filled]` holds unprocessed input. The buffer is zeroed once
    // and reused (reads go straight into it); it grows for long lines up to
    // MAX_LINE plus a little, and shrinks back when idle.
    let mut buf: Vec<u8> = vec![0; CHUNK];
    let mut filled = 0;
    let mut discarding = false; // inside an over-long line
    let mut scanned = 0; // bytes of buf known to hold no newline
    loop {
        if shared.shutdown.load(Ordering::SeqCst) {
            return Ok(());
        }
        if filled == buf.len() {
            let grown = (buf.len() * 2).min(MAX_LINE + 2 * CHUNK);
            buf.resize(grown, 0);
        }
        let n = match stream.read(&mut buf[filled..]) {
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) =>
            {
                continue
            }
            Err(e) => return Err(e),
        };
        if n == 0 {
            return Ok(()); // a final unterminated line is ignored
        }
        filled += n;
        let mut replies: Batch = Vec::new();
        let mut start = 0;
        while let Some(pos) = memchr(b'\n', &buf[scanned..filled]) {
            let end = scanned + pos;
            let line = &buf[start..end];
            if discarding {
                discarding = false;
            } else if line.len() > MAX_LINE {
                replies.push((
                    None,
                    Err(ErrorReply::new(
                        code::TOO_LONG,
                        format!("request line longer than {MAX_LINE} bytes; skipped"),
                    )),
                    None,
                ));
            } else if !line.iter().all(u8::is_ascii_whitespace) {
                replies.push(handle_line(shared, line));
            }
            start = end + 1;
            scanned = start;
        }
        buf.copy_within(start..filled, 0);
        filled -= start;
        scanned = filled;
        if filled > MAX_LINE {
            if !discarding {
                replies.push((
                    None,
                    Err(ErrorReply::new(
                        code::TOO_LONG,
                        format!("request line longer than {MAX_LINE} bytes; skipped"),
                    )),
                    None,
                ));
            }
            discarding = true;
            filled = 0;
            scanned = 0;
        }
        if !replies.is_empty() && tx.send(replies).is_err() {
            return Ok(()); // the writer stopped: the peer is gone
        }
        if buf.len() > 4 * CHUNK && filled < CHUNK {
            buf.truncate(2 * CHUNK);
            buf.shrink_to_fit();
        }
    }
}

/// Makes each batch durable (one sync, often already done by a sync that
/// covered it), then sends its replies.
fn write_loop(
    shared: &Shared,
    mut stream: UnixStream,
    rx: std::sync::mpsc::Receiver<Batch>,
) -> io::Result<()> {
    let mut out = Vec::new();
    for mut replies in rx {
        if let Some(lsn) = replies.iter().filter_map(|r| r.2).max() {
            shared.stats.syncs.fetch_add(1, Ordering::Relaxed);
            if let Err(e) = shared.journal.sync(lsn) {
                for r in replies.iter_mut().filter(|r| r.2.is_some()) {
                    r.1 = Err(ErrorReply::new(code::IO, e.clone()));
                }
            }
            if shared.journal.bytes() > shared.config.snapshot_bytes {
                let st = shared.state.lock().unwrap();
                if shared.journal.bytes() > shared.config.snapshot_bytes {
                    if let Err(e) = compact(shared, &st) {
                        eprintln!("parapetd: {e}");
                    }
                }
            }
        }
        out.clear();
        for (id, o, _) in &replies {
            shared.stats.requests.fetch_add(1, Ordering::Relaxed);
            if o.is_err() {
                shared.stats.errors.fetch_add(1, Ordering::Relaxed);
            }
            write_reply(&mut out, *id, o);
        }
        // On error the receiver is dropped, which stops the reader.
        stream.write_all(&out)?;
        if out.capacity() > 16 << 20 {
            out = Vec::new(); // do not keep a huge reply buffer per idle client
        }
    }
    Ok(())
}

fn memchr(needle: u8, hay: &[u8]) -> Option<usize> {
    hay.iter().position(|&b| b == needle)
}

fn handle_line(shared: &Shared, line: &[u8]) -> (Option<u64>, Outcome, Option<Lsn>) {
    let req = match parse_request(line) {
        Ok(r) => r,
        Err((id, e)) => return (id, Err(e), None),
    };
    let id = req.id;
    let cmd = match Command::try_from(req) {
        Ok(c) => c,
        Err(e) => return (id, Err(e), None),
    };
    // After a journal write failure nothing more is changed: a change that
    // cannot be made durable must not be visible either.
    if cmd.mutates() {
        if let Some(e) = shared.journal.failed() {
            return (id, Err(ErrorReply::new(code::IO, e)), None);
        }
    }
    if cmd.elem_count() > MAX_ELEMS {
        return (
            id,
            Err(ErrorReply::new(
                code::INVALID,
                format!("more than {MAX_ELEMS} elements in one request; split it"),
            )),
            None,
        );
    }
    let (outcome, lsn) = match cmd {
        Command::Apply {
            rules,
            name,
            format,
            check,
        } => match apply(shared, name, rules, format.as_deref(), check) {
            Ok((m, lsn)) => (Ok(m), lsn),
            Err(e) => (Err(e), None),
        },
        Command::Stats => (Ok(stats(shared)), None),
        Command::Attach { iface, hook, mode } => attach(shared, iface, hook, mode),
        Command::Detach { iface, hook } => detach(shared, iface, hook),
        cmd => {
            let mut st = shared.state.lock().unwrap();
            st.execute(cmd, &shared.journal, &*shared.loader)
        }
    };
    (id, outcome, lsn)
}

fn apply_error(errs: Vec<String>) -> ErrorReply {
    let mut e = ErrorReply::new(code::APPLY, errs.first().cloned().unwrap_or_default());
    if errs.len() > 1 {
        e.msg = format!("{} (and {} more errors)", e.msg, errs.len() - 1);
    }
    e.detail = Some(("errors", Value::from(errs)));
    e
}

/// `apply`: compiles aside (no lock held), then validates and swaps under
/// the lock. Returns the position to sync unless only checked.
fn apply(
    shared: &Shared,
    name: String,
    text: String,
    format: Option<&str>,
    check: bool,
) -> Result<(Map<String, Value>, Option<Lsn>), ErrorReply> {
    let compiled = shared
        .loader
        .load(&name, &text, format)
        .map_err(apply_error)?;
    let mut st = shared.state.lock().unwrap();
    st.check_loaded(&name, &compiled).map_err(apply_error)?;
    let rules = compiled.ruleset.rule_count();
    if check {
        st.kernel.check(&compiled.ruleset, &compiled.compiled)?;
        return Ok((
            json!({"rules": rules, "format": compiled.format, "checked": true})
                .as_object()
                .cloned()
                .unwrap_or_default(),
            None,
        ));
    }
    let mut lsn = None;
    let change = Change::Apply {
        name,
        text,
        compiled,
    };
    st.commit(
        change,
        &mut Origin::Client {
            journal: &shared.journal,
            lsn: &mut lsn,
        },
    )?;
    let mut m = Map::new();
    m.insert("rules".into(), Value::from(rules));
    m.insert("generation".into(), Value::from(st.generation));
    Ok((m, lsn))
}

/// `attach`: loads the program on first use (outside the state lock: it
/// takes seconds of verifier time), installs the active ruleset in it,
/// attaches, and journals the attachment so a restart makes it again.
fn attach(shared: &Shared, iface: String, hook: Hook, mode: Mode) -> (Outcome, Option<Lsn>) {
    let config = {
        let st = shared.state.lock().unwrap();
        (!st.kernel.loaded()).then(|| st.kernel.config.clone())
    };
    if let Some(config) = config {
        let loaded =
            Kernel::load(&config).and_then(|dp| shared.state.lock().unwrap().kernel_adopt(dp));
        if let Err(e) = loaded {
            return (Err(e), None);
        }
    }
    let mut st = shared.state.lock().unwrap();
    let mut lsn = None;
    let change = Change::Attach {
        iface: iface.clone(),
        hook,
        mode,
    };
    let origin = &mut Origin::Client {
        journal: &shared.journal,
        lsn: &mut lsn,
    };
    let a = match st.commit(change, origin) {
        Ok(done) => done.attachment.expect("a client's attach makes one"),
        Err(e) => return (Err(e), lsn),
    };
    let mut m = Map::new();
    m.insert("iface".into(), Value::from(iface));
    m.insert("hook".into(), Value::from(hook_name(hook)));
    if let Some(actual) = a.actual {
        m.insert("mode".into(), Value::from(mode_name(actual)));
    }
    if let Some(n) = a.note {
        m.insert("note".into(), Value::from(n));
    }
    if st.active.is_none() {
        m.insert(
            "warning".into(),
            Value::from("no ruleset is applied: every packet passes until one is"),
        );
    }
    (Ok(m), lsn)
}

/// `detach`: from `iface` at `hook`, or at every hook when none is given;
/// one journaled change per hook.
fn detach(shared: &Shared, iface: String, hook: Option<Hook>) -> (Outcome, Option<Lsn>) {
    let mut st = shared.state.lock().unwrap();
    let hooks: Vec<Hook> = st
        .kernel
        .attachments()
        .iter()
        .filter(|a| a.iface == iface && hook.map_or(true, |h| h == a.hook))
        .map(|a| a.hook)
        .collect();
    if hooks.is_empty() {
        return (
            Err(ErrorReply::new(
                code::INVALID,
                format!("not attached to {iface}"),
            )),
            None,
        );
    }
    let mut lsn = None;
    for hook in &hooks {
        let change = Change::Detach {
            iface: iface.clone(),
            hook: *hook,
        };
        let origin = &mut Origin::Client {
            journal: &shared.journal,
            lsn: &mut lsn,
        };
        if let Err(e) = st.commit(change, origin) {
            return (Err(e), lsn);
        }
    }
    let mut m = Map::new();
    m.insert("detached".into(), Value::from(hooks.len()));
    (Ok(m), lsn)
}

fn do_apply(
    shared: &Shared,
    name: &str,
    text: &str,
    format: Option<&str>,
    check: bool,
) -> Result<Map<String, Value>, ErrorReply> {
    let (m, lsn) = apply(shared, name.to_string(), text.to_string(), format, check)?;
    if let Some(l) = lsn {
        shared
            .journal
            .sync(l)
            .map_err(|e| ErrorReply::new(code::IO, e))?;
    }
    Ok(m)
}

fn stats(shared: &Shared) -> Map<String, Value> {
    let st = shared.state.lock().unwrap();
    let s = &shared.stats;
    let names = st.sets.names();
    let memory: usize = names
        .iter()
        .filter_map(|n| st.sets.get(n))
        .map(|s| s.memory_bytes())
        .sum();
    let v = json!({
        "version": env!("CARGO_PKG_VERSION"),
        "uptime_s": shared.started.elapsed().as_secs(),
        "generation": st.generation,
        "rules": st.active.as_ref().map_or(0, |a| a.ruleset.rule_count()),
        "ruleset": st.active.as_ref().map(|a| a.name.clone()),
        "sets": names.len(),
        "elements": st.element_count(),
        "set_memory_bytes": memory,
        "requests": s.requests.load(Ordering::Relaxed),
        "errors": s.errors.load(Ordering::Relaxed),
        "clients": s.clients.load(Ordering::Relaxed),
        "connections": s.connections.load(Ordering::Relaxed),
        "journal_bytes": shared.journal.bytes(),
        "journal_epoch": shared.journal.epoch(),
        "journal_syncs": s.syncs.load(Ordering::Relaxed),
        "snapshots": s.snapshots.load(Ordering::Relaxed),
        "fsync": shared.config.fsync,
        "dataplane": st.kernel.stats(),
        "counters": kernel_counters(&st),
        "recovery": {
            "snapshot_records": shared.recovery.snapshot_records,
            "journal_records": shared.recovery.journal_records,
            "problems": shared.recovery.problems,
            "millis": shared.recovery.millis,
            "cpu_millis": shared.recovery.cpu_millis,
        },
    });
    v.as_object().cloned().unwrap_or_default()
}

/// The kernel's per-rule counters of rules that counted something (rule 0
/// is the policy); `null` when the program is not loaded.
fn kernel_counters(st: &State) -> Value {
    let n = st.active.as_ref().map_or(0, |a| a.counters.len());
    match st.kernel.counters(n) {
        None => Value::Null,
        Some(cs) => Value::from(
            cs.iter()
                .enumerate()
                .filter(|(_, c)| c.packets > 0)
                .map(|(i, c)| json!({"rule": i, "packets": c.packets, "bytes": c.bytes}))
                .collect::<Vec<_>>(),
        ),
    }
}

/// Sends a state notification to systemd (`READY=1`, `RELOADING=1`,
/// `STOPPING=1`, `STATUS=…`) when started with `Type=notify`: one datagram
/// to the socket named by `$NOTIFY_SOCKET` (a leading `@` means the
/// abstract namespace). Returns false when not under systemd.
pub fn sd_notify(msg: &str) -> io::Result<bool> {
    use std::os::unix::net::UnixDatagram;
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return Ok(false);
    };
    let sock = UnixDatagram::unbound()?;
    let bytes = path.as_encoded_bytes();
    if let Some(name) = bytes.strip_prefix(b"@") {
        use std::os::linux::net::SocketAddrExt;
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
        sock.send_to_addr(msg.as_bytes(), &addr)?;
    } else {
        sock.send_to(msg.as_bytes(), Path::new(&path))?;
    }
    Ok(true)
}

static SIGNAL: AtomicUsize = AtomicUsize::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    SIGNAL.store(sig as usize, Ordering::SeqCst);
}

/// Runs the daemon in the foreground until SIGTERM/SIGINT; SIGHUP re-applies
/// `config.config`. Used by the `parapetd` binary.
pub fn run(config: Config, loader: Box<dyn Loader>) -> Result<(), String> {
    // SAFETY: the handler only stores to an atomic.
    unsafe {
        for s in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            libc::signal(s, on_signal as *const () as libc::sighandler_t);
        }
    }
    let t0 = Instant::now();
    let cfg_file = config.config.clone();
    let mut d = Daemon::start(config, loader).map_err(|e| e.to_string())?;
    if let Some(f) = &cfg_file {
        match d.apply_file(f) {
            Ok(n) => eprintln!("parapetd: applied {} ({n} rules)", f.display()),
            Err(errs) => {
                for e in &errs {
                    eprintln!("{e}");
                }
                return Err(format!("cannot apply {}", f.display()));
            }
        }
    }
    let (elements, sets) = {
        let st = d.shared.state.lock().unwrap();
        (st.element_count(), st.sets.len())
    };
    eprintln!(
        "parapetd: ready on {} ({} sets, {} elements, recovered in {} ms ({} ms CPU), ready in {} ms)",
        d.shared.config.socket.display(),
        sets,
        elements,
        d.shared.recovery.millis,
        d.shared.recovery.cpu_millis,
        t0.elapsed().as_millis()
    );
    let _ = sd_notify(&format!(
        "READY=1\nSTATUS=serving {sets} sets, {elements} elements"
    ));
    loop {
        thread::sleep(Duration::from_millis(100));
        match SIGNAL.swap(0, Ordering::SeqCst) as libc::c_int {
            0 => {}
            libc::SIGHUP => {
                let _ = sd_notify("RELOADING=1");
                if let Some(f) = &cfg_file {
                    match d.apply_file(f) {
                        Ok(n) => eprintln!("parapetd: reloaded {} ({n} rules)", f.display()),
                        Err(errs) => {
                            eprintln!("parapetd: reload failed, keeping the active ruleset:");
                            for e in &errs {
                                eprintln!("{e}");
                            }
                        }
                    }
                }
                let _ = sd_notify("READY=1");
            }
            _ => {
                let _ = sd_notify("STOPPING=1");
                eprintln!("parapetd: shutting down");
                d.shutdown();
                return Ok(());
            }
        }
    }
}

/// The loader `parapetd` uses: the text frontends and the compiler.
pub fn default_loader() -> Box<dyn Loader> {
    Box::new(crate::loader::ParseLoader::default())
}
