//! Exposing [`crate::metrics::collect`]: a minimal HTTP/1.1 responder for
//! Prometheus (`--metrics ADDR:PORT`) and a writer for node_exporter's
//! textfile collector (`--metrics-textfile DIR`).
//!
//! Hand-written on `std::net::TcpListener` rather than an HTTP crate: it
//! answers one request per connection (`GET /metrics`, `Connection:
//! close`) and nothing else, so the whole server is its bounds — at most
//! [`MAX_CONNECTIONS`] connections at once (more are closed at once), a
//! request head of at most [`MAX_REQUEST`] bytes, read within
//! [`READ_TIMEOUT`], and a write timeout. However often it is scraped,
//! it collects at most once per [`MIN_COLLECT_INTERVAL`] and serves the
//! same text in between: scrapers (many Prometheus servers, a `watch
//! curl`) cannot add work to the ban path (CrowdSec's bouncer once pinned
//! a CPU collecting nftables metrics per scrape, cs-firewall-bouncer#334).

use crate::metrics::{collect, MetricsConfig};
use crate::shared::Shared;
use std::fs;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// Concurrent connections served; more are closed unanswered.
pub const MAX_CONNECTIONS: usize = 4;
/// Largest request head (request line and headers).
pub const MAX_REQUEST: usize = 8192;
/// Time a client has to send its request head.
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// Scrapes closer together than this get the previous collection.
pub const MIN_COLLECT_INTERVAL: Duration = Duration::from_secs(1);

/// The last collection, shared by the connection threads.
type Cache = Arc<Mutex<Option<(Instant, Arc<String>)>>>;

/// The last collection when it is recent, else a new one. Holding the
/// cache's lock while collecting makes concurrent scrapes wait for one
/// collection instead of each running their own.
fn cached(shared: &Shared, cfg: &MetricsConfig, cache: &Cache) -> Arc<String> {
    let mut c = cache.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((at, text)) = c.as_ref() {
        if at.elapsed() < MIN_COLLECT_INTERVAL {
            return text.clone();
        }
    }
    let text = Arc::new(collect(shared, cfg));
    *c = Some((Instant::now(), text.clone()));
    text
}
/// The text file's name in `--metrics-textfile DIR` (node_exporter reads
/// `*.prom`; the temporary file it is renamed from does not match).
pub const TEXTFILE: &str = "parapet.prom";

/// The metrics threads of a running daemon.
pub struct Exporter {
    /// Where the listener is bound (the actual port when 0 was asked for).
    pub addr: Option<SocketAddr>,
    /// The threads, joined at shutdown.
    pub threads: Vec<JoinHandle<()>>,
}

/// Binds the listener (refusing a non-loopback address unless allowed)
/// before anything is served, so a bad `--metrics` fails the start.
pub fn bind(cfg: &MetricsConfig) -> io::Result<Option<TcpListener>> {
    cfg.check().map_err(io::Error::other)?;
    let Some(addr) = cfg.listen else {
        return Ok(None);
    };
    let l = TcpListener::bind(addr)
        .map_err(|e| io::Error::new(e.kind(), format!("--metrics {addr}: {e}")))?;
    Ok(Some(l))
}

/// Starts the listener's and the text file's threads.
pub fn start(
    shared: &Arc<Shared>,
    cfg: &MetricsConfig,
    listener: Option<TcpListener>,
) -> io::Result<Exporter> {
    let mut ex = Exporter {
        addr: None,
        threads: Vec::new(),
    };
    if let Some(l) = listener {
        ex.addr = Some(l.local_addr()?);
        let (s, c) = (shared.clone(), cfg.clone());
        ex.threads.push(
            thread::Builder::new()
                .name("metrics-http".into())
                .spawn(move || serve(s, c, l))?,
        );
    }
    if let Some(dir) = &cfg.textfile {
        fs::create_dir_all(dir)?;
        let (s, c, d) = (shared.clone(), cfg.clone(), dir.clone());
        ex.threads.push(
            thread::Builder::new()
                .name("metrics-file".into())
                .spawn(move || textfile_loop(s, c, &d))?,
        );
    }
    Ok(ex)
}

/// Waits up to 200 ms for a connection, so shutdown is noticed.
fn readable(l: &TcpListener) -> bool {
    let mut p = libc::pollfd {
        fd: l.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the duration of the call.
    unsafe { libc::poll(&mut p, 1, 200) > 0 }
}

fn serve(shared: Arc<Shared>, cfg: MetricsConfig, l: TcpListener) {
    let active = Arc::new(AtomicUsize::new(0));
    let cache: Cache = Arc::default();
    while !shared.shutdown.load(Ordering::SeqCst) {
        if !readable(&l) {
            continue;
        }
        let Ok((stream, _)) = l.accept() else {
            continue;
        };
        if active.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            active.fetch_sub(1, Ordering::SeqCst);
            continue; // dropped: closed unanswered
        }
        let (s, c, a, k) = (shared.clone(), cfg.clone(), active.clone(), cache.clone());
        let spawned = thread::Builder::new()
            .name("metrics-conn".into())
            .spawn(move || {
                let _ = answer(&s, &c, &k, stream);
                a.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            active.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// Reads the request head: `Ok(None)` when too big or too slow.
fn read_head(stream: &mut TcpStream) -> io::Result<Option<Vec<u8>>> {
    let deadline = Instant::now() + READ_TIMEOUT;
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || buf.len() > MAX_REQUEST {
            return Ok(None);
        }
        stream.set_read_timeout(Some(left))?;
        match stream.read(&mut chunk) {
            Ok(0) => return Ok(None),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return Ok(None),
        }
    }
    Ok(Some(buf))
}

/// What to answer to a request head: status, and whether to send metrics.
fn route(head: &[u8]) -> (&'static str, bool) {
    let line = head.split(|b| *b == b'\r').next().unwrap_or_default();
    let mut parts = line.split(|b| *b == b' ');
    let (method, target) = (parts.next().unwrap_or_default(), parts.next());
    let Some(target) = target else {
        return ("400 Bad Request", false);
    };
    let path = target.split(|b| *b == b'?').next().unwrap_or_default();
    match (method, path) {
        (b"GET" | b"HEAD", b"/metrics") => ("200 OK", true),
        (b"GET" | b"HEAD", _) => ("404 Not Found", false),
        _ => ("405 Method Not Allowed", false),
    }
}

fn answer(
    shared: &Shared,
    cfg: &MetricsConfig,
    cache: &Cache,
    mut stream: TcpStream,
) -> io::Result<()> {
    stream.set_write_timeout(Some(WRITE_TIMEOUT))?;
    let Some(head) = read_head(&mut stream)? else {
        let msg = "HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        return stream.write_all(msg.as_bytes());
    };
    let (status, ok) = route(&head);
    let head_only = head.starts_with(b"HEAD ");
    let (ctype, body) = if ok {
        (
            "text/plain; version=0.0.4; charset=utf-8",
            cached(shared, cfg, cache),
        )
    } else {
        (
            "text/plain; charset=utf-8",
            Arc::new(format!("{status}: parapetd serves /metrics only\n")),
        )
    };
    let response_head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(response_head.as_bytes())?;
    if !head_only {
        stream.write_all(body.as_bytes())?;
    }
    let _ = stream.shutdown(std::net::Shutdown::Write);
    Ok(())
}

/// Writes `DIR/parapet.prom` atomically (a temporary file renamed over
/// it) every `textfile_interval`, and once more at shutdown.
fn textfile_loop(shared: Arc<Shared>, cfg: MetricsConfig, dir: &Path) {
    let step = Duration::from_millis(100);
    let mut next = Instant::now();
    loop {
        let stopping = shared.shutdown.load(Ordering::SeqCst);
        if stopping || Instant::now() >= next {
            if let Err(e) = write_textfile(dir, &collect(&shared, &cfg)) {
                eprintln!("parapetd: --metrics-textfile {}: {e}", dir.display());
            }
            next = Instant::now() + cfg.textfile_interval;
        }
        if stopping {
            return;
        }
        thread::sleep(step);
    }
}

/// The atomic write: node_exporter never reads a half-written file.
pub fn write_textfile(dir: &Path, text: &str) -> io::Result<()> {
    let tmp = dir.join(format!(".{TEXTFILE}.tmp"));
    fs::write(&tmp, text)?;
    fs::rename(&tmp, dir.join(TEXTFILE))
}

#[cfg(test)]
mod tests {
    use super::route;

    #[test]
    fn only_get_metrics_is_served() {
        assert_eq!(route(b"GET /metrics HTTP/1.1\r\n\r\n"), ("200 OK", true));
        assert_eq!(
            route(b"GET /metrics?x=1 HTTP/1.1\r\n\r\n"),
            ("200 OK", true)
        );
        assert!(route(b"HEAD /metrics HTTP/1.0\r\n\r\n").1);
        assert_eq!(route(b"GET / HTTP/1.1\r\n\r\n").0, "404 Not Found");
        assert_eq!(
            route(b"POST /metrics HTTP/1.1\r\n\r\n").0,
            "405 Method Not Allowed"
        );
        assert_eq!(route(b"garbage\r\n\r\n").0, "400 Bad Request");
    }
}
