//! The control socket's connections: the acceptor, and a reader and a
//! writer thread per client.

use crate::dispatch::handle_line;
use crate::journal::Lsn;
use crate::proto::{code, write_reply, ErrorReply, Outcome, MAX_LINE};
use crate::shared::{compact, Shared};
use std::io::{self, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

/// Accepts clients until shutdown, each served by [`serve_client`].
pub(crate) fn accept_loop(shared: Arc<Shared>, listener: UnixListener) {
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
                replies.push(too_long());
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
                replies.push(too_long());
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

/// The reply to a line longer than [`MAX_LINE`] (which is skipped).
fn too_long() -> (Option<u64>, Outcome, Option<Lsn>) {
    let msg = format!("request line longer than {MAX_LINE} bytes; skipped");
    (None, Err(ErrorReply::new(code::TOO_LONG, msg)), None)
}

fn memchr(needle: u8, hay: &[u8]) -> Option<usize> {
    hay.iter().position(|&b| b == needle)
}
