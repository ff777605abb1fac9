//! The daemon: recovery from the state directory, the control socket, a
//! reader and a writer thread per client, the expiry reaper, sd_notify and
//! signals, the link watcher (`link_watch.rs`: the tc placement on
//! interfaces made later) and the address watcher (`addr_watch.rs`: the
//! address-type mirror follows the host's addresses).
//!
//! Threads rather than an event loop: a client costs two mostly idle
//! threads (connections are capped), and a blocking request — an `apply`
//! compile, a slow reader — never holds up another client. State changes are
//! serialized by one mutex; journal fsyncs are grouped (see
//! [`crate::journal::Journal`]), so concurrent writers share them.

use crate::compiled::Loader;
use crate::connection::accept_loop;
use crate::dispatch::do_apply;
use crate::recovery::{lock_state_dir, recover, thread_cpu_ms};
use parapet_sets::{Clock, SystemClock};
use serde_json::Value;
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

pub use crate::dispatch::MAX_ELEMS;
pub use crate::shared::{compact, Config, Recovery, Shared, Stats};

fn now_clock(offset_ms: i64) -> Arc<dyn Clock> {
    if offset_ms != 0 {
        return Arc::new(crate::fleet::OffsetClock(offset_ms));
    }
    Arc::new(SystemClock)
}

/// A running daemon (its threads); dropping it shuts it down.
pub struct Daemon {
    /// Shared state (for in-process inspection and tests).
    pub shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
    reaper: Option<JoinHandle<()>>,
    logger: Option<JoinHandle<()>>,
    rejecter: Option<JoinHandle<()>>,
    link_watch: Option<JoinHandle<()>>,
    addr_watch: Option<JoinHandle<()>>,
    xdp_loader: Option<JoinHandle<()>>,
    /// Where `--metrics` listens (the bound port when 0 was given).
    pub metrics_addr: Option<std::net::SocketAddr>,
    metrics: Vec<JoinHandle<()>>,
    fleet: Option<JoinHandle<()>>,
    crowdsec: Option<JoinHandle<()>>,
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
        let clock = now_clock(config.clock_offset_ms);
        Self::start_with_clock(config, loader, clock)
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
        // The program is loaded again before any client is served: it
        // adopts the pinned links and maps, or re-attaches (kernel.rs).
        state.kernel.config = config.kernel.clone();
        for line in state.kernel_restore() {
            eprintln!("parapetd: dataplane: {line}");
        }
        let metrics_listener = crate::metrics_http::bind(&config.metrics)?;
        let fleet = match &config.fleet {
            Some(fc) => Some(parapet_fleet::Fleet::open(fc.clone())?),
            None => None,
        };
        state.fleet = fleet.clone();
        let listener = prepare_socket(&config)?;
        let crowdsec = config.crowdsec.clone().map(crate::crowdsec::Source::new);
        let shared = Arc::new(Shared {
            config,
            state: Mutex::new(state),
            journal,
            loader,
            stats: Stats::default(),
            recovery,
            fleet,
            crowdsec,
            started: Instant::now(),
            shutdown: AtomicBool::new(false),
            _lock: lock,
        });
        if needs_compaction {
            let st = shared.state.lock().unwrap();
            compact(&shared, &st).map_err(io::Error::other)?;
        }
        let metrics_cfg = shared.config.metrics.clone();
        let exporter = crate::metrics_http::start(&shared, &metrics_cfg, metrics_listener)?;
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
        let s = shared.clone();
        let rejecter = thread::Builder::new()
            .name("nf-reject".into())
            .spawn(move || crate::rejecter::reject_loop(s))?;
        let s = shared.clone();
        let link_watch = thread::Builder::new()
            .name("link-watch".into())
            .spawn(move || crate::link_watch::watch_loop(s))?;
        let s = shared.clone();
        let addr_watch = thread::Builder::new()
            .name("addr-watch".into())
            .spawn(move || crate::addr_watch::watch_loop(s))?;
        let s = shared.clone();
        let xdp_loader = thread::Builder::new()
            .name("xdp-loader".into())
            .spawn(move || crate::xdp_loader::load_loop(s))?;
        let fleet = crate::fleet::start(&shared)?;
        let crowdsec = crate::crowdsec::start(&shared)?;
        Ok(Daemon {
            shared,
            acceptor: Some(acceptor),
            reaper: Some(reaper),
            logger: Some(logger),
            rejecter: Some(rejecter),
            link_watch: Some(link_watch),
            addr_watch: Some(addr_watch),
            xdp_loader: Some(xdp_loader),
            metrics_addr: exporter.addr,
            metrics: exporter.threads,
            fleet,
            crowdsec,
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
        if let Some(h) = self.rejecter.take() {
            let _ = h.join();
        }
        if let Some(h) = self.link_watch.take() {
            let _ = h.join();
        }
        if let Some(h) = self.addr_watch.take() {
            let _ = h.join();
        }
        // (a tree form loading now is finished first: at most the
        // verifier's seconds)
        if let Some(h) = self.xdp_loader.take() {
            let _ = h.join();
        }
        for h in self.metrics.drain(..) {
            let _ = h.join();
        }
        if let Some(f) = &self.shared.fleet {
            f.stop();
        }
        if let Some(h) = self.fleet.take() {
            let _ = h.join();
        }
        if let Some(s) = &self.shared.crowdsec {
            s.stop();
        }
        if let Some(h) = self.crowdsec.take() {
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

fn reap_loop(shared: Arc<Shared>) {
    let mut tick = 0u64;
    while !shared.shutdown.load(Ordering::SeqCst) {
        thread::sleep(shared.config.reap_interval);
        tick += 1;
        // Expired kernel entries already match nothing; freeing them scans
        // the kernel sets' mirrors, so it runs every 8th tick (2 s).
        if tick % 8 == 0 {
            reap_kernel(&shared);
        }
        // Bounded work per tick so the lock is held briefly.
        let mut st = shared.state.lock().unwrap();
        st.reap(1 << 14);
        // Time windows read boot time plus this offset: rewritten every
        // 4th tick (1 s) so a stepped wall clock is followed within a
        // second (docs/dataplane.md, "Wall-clock time").
        if tick % 4 == 0 {
            st.kernel.refresh_wall_clock();
        }
    }
}

/// Kernel entries freed per set and lock hold: one batch delete each
/// (`BPF_MAP_DELETE_BATCH`, a few ms for 16,384 entries).
const KERNEL_REAP_CHUNK: usize = 1 << 14;
/// Chunks per reaping round: up to 1 M entries of a set every 2 s.
const KERNEL_REAP_CHUNKS: usize = 64;

/// Frees the kernel entries of every expired element (a mass expiry of
/// 100k bans goes in one round, not one chunk per round), in chunks with
/// the state's lock released between them so bans and unbans interleave.
fn reap_kernel(shared: &Shared) {
    for _ in 0..KERNEL_REAP_CHUNKS {
        let gone = shared.state.lock().unwrap().kernel.reap(KERNEL_REAP_CHUNK);
        // fewer than one chunk over all sets: every set is done
        if gone < KERNEL_REAP_CHUNK {
            break;
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
