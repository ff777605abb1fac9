//! `parapet top`: the command ([`run`]) and its live view: the terminal in non-canonical mode without
//! echo (restored on exit), the alternate screen, one redraw per interval
//! sized to the terminal (80×24 over SSH works), and keys: `p`/`b` sort by
//! packets/bytes per second, `c` cycles the chain filter, space pauses,
//! `q` (or Ctrl-C) quits. Plain ANSI escapes; no curses dependency.

use crate::top::{catalog, sample, to_json, view, Kind, Sample, Sort, TopArgs, View};
use parapet_daemon::{Client, ClientError};
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Human rates: 1234567 → "1.2M".
fn si(x: f64) -> String {
    match x {
        x if x >= 1e9 => format!("{:.1}G", x / 1e9),
        x if x >= 1e6 => format!("{:.1}M", x / 1e6),
        x if x >= 1e3 => format!("{:.1}k", x / 1e3),
        x => format!("{x:.0}"),
    }
}

fn cut(s: &str, w: usize) -> String {
    if s.chars().count() <= w {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(w.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

/// One screen of `height` lines of at most `width` columns; `live` adds
/// the line of keys.
pub fn render(
    v: &View,
    sort: Sort,
    chain: Option<&str>,
    paused: bool,
    live: bool,
    (width, height): (usize, usize),
) -> String {
    let width = width.max(40);
    let mut out = String::new();
    let mut line = |s: String| {
        let _ = writeln!(out, "{}", cut(&s, width));
    };
    line(format!(
        "parapet top  gen {}  every {:.1}s  sort: {}  chain: {}{}",
        v.generation,
        v.interval,
        if sort == Sort::Packets {
            "packets"
        } else {
            "bytes"
        },
        chain.unwrap_or("all"),
        if paused { "  [paused]" } else { "" }
    ));
    line(format!(
        "total {} pkt/s {} B/s  accept {}/s  drop {}/s  bans {:.1}/s{}",
        si(v.total_pps),
        si(v.total_bps),
        si(v.accept_pps),
        si(v.drop_pps),
        v.bans_per_s,
        if v.kernel {
            ""
        } else {
            "  (dataplane not loaded)"
        }
    ));
    let sets: Vec<String> = v
        .sets
        .iter()
        .map(|(s, n)| format!("{s} {}", si(*n as f64)))
        .collect();
    line(format!(
        "sets: {}",
        if sets.is_empty() {
            "none".into()
        } else {
            sets.join(", ")
        }
    ));
    let hooks: Vec<String> = v
        .hooks
        .iter()
        .map(|h| {
            format!(
                "{}/{} {} pkt/s {} drop/s",
                h.hook,
                h.interface,
                si(h.pps),
                si(h.drops_per_s)
            )
        })
        .collect();
    line(format!(
        "hooks: {}",
        if hooks.is_empty() {
            "none".into()
        } else {
            hooks.join(", ")
        }
    ));
    line(format!(
        "{:>5} {:>7} {:>7} {:>9} {:>6} {:<12} rule",
        "id", "pkt/s", "B/s", "packets", "action", "chain"
    ));
    let rows = height.saturating_sub(6);
    for r in v.rows.iter().take(rows) {
        let verdict = match r.info.kind {
            Kind::Accept => "accept",
            Kind::Drop => "drop",
            Kind::Other => "-",
        };
        line(format!(
            "{:>5} {:>7} {:>7} {:>9} {:>6} {:<12} {}",
            r.info.id,
            si(r.pps),
            si(r.bps),
            si(r.packets as f64),
            verdict,
            cut(&r.info.chain, 12),
            r.info.text
        ));
    }
    if live {
        line("p/b sort  c chain  space pause  q quit".into());
    }
    out
}

/// Terminal size (columns, rows), 80×24 when unknown.
fn size() -> (usize, usize) {
    // SAFETY: TIOCGWINSZ fills a winsize; the fd is stdout's.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut ws) } == 0;
    if ok && ws.ws_col > 0 && ws.ws_row > 0 {
        (ws.ws_col as usize, ws.ws_row as usize)
    } else {
        (80, 24)
    }
}

/// Non-canonical input without echo or signals while alive, and the
/// alternate screen; both restored on drop (also when a call fails).
struct RawTerminal {
    saved: libc::termios,
}

impl RawTerminal {
    fn enter() -> std::io::Result<RawTerminal> {
        let fd = std::io::stdin().as_raw_fd();
        // SAFETY: tcgetattr/tcsetattr on stdin with a termios we own.
        let mut t: libc::termios = unsafe { std::mem::zeroed() };
        if unsafe { libc::tcgetattr(fd, &mut t) } != 0 {
            return Err(std::io::Error::other(
                "parapet top needs a terminal (use --once [--json] in scripts)",
            ));
        }
        let saved = t;
        t.c_lflag &= !(libc::ICANON | libc::ECHO | libc::ISIG);
        t.c_cc[libc::VMIN] = 0;
        t.c_cc[libc::VTIME] = 0;
        if unsafe { libc::tcsetattr(fd, libc::TCSANOW, &t) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        print!("\x1b[?1049h\x1b[?25l");
        let _ = std::io::stdout().flush();
        Ok(RawTerminal { saved })
    }
}

impl Drop for RawTerminal {
    fn drop(&mut self) {
        print!("\x1b[?25h\x1b[?1049l");
        let _ = std::io::stdout().flush();
        // SAFETY: restores the attributes saved in `enter`.
        unsafe { libc::tcsetattr(std::io::stdin().as_raw_fd(), libc::TCSANOW, &self.saved) };
    }
}

/// Waits up to `d` for a key.
fn key(d: Duration) -> Option<u8> {
    let mut p = libc::pollfd {
        fd: std::io::stdin().as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = d.as_millis().min(i32::MAX as u128) as i32;
    // SAFETY: one valid pollfd for the duration of the call.
    if unsafe { libc::poll(&mut p, 1, ms) } <= 0 {
        return None;
    }
    let mut b = [0u8; 1];
    match std::io::stdin().read(&mut b) {
        Ok(1) => Some(b[0]),
        _ => None,
    }
}

/// The live view until `q`.
pub fn live(c: &mut Client, args: &TopArgs, interval: Duration) -> Result<(), ClientError> {
    let _term = RawTerminal::enter().map_err(ClientError::Io)?;
    let mut sort = args.sort;
    let mut chain = args.chain.clone();
    let mut paused = false;
    let mut cat = catalog(c)?;
    let mut last = sample(c)?;
    // The two samples on screen: keys re-sort and re-filter them at once;
    // a pause keeps them.
    let mut pair: Option<(Sample, Sample)> = None;
    let mut next = Instant::now() + interval.min(Duration::from_millis(500));
    loop {
        if !paused && Instant::now() >= next {
            let cur = sample(c)?;
            if cur.generation != cat.generation {
                cat = catalog(c)?;
            }
            let old = std::mem::replace(&mut last, cur);
            pair = Some((old, last.clone()));
            next = Instant::now() + interval;
        }
        if let Some((a, b)) = &pair {
            let v = view(&cat, a, b, sort, chain.as_deref());
            let screen = render(&v, sort, chain.as_deref(), paused, true, size());
            // Each line ends with "clear to end of line" so a shorter
            // redraw leaves nothing of the previous one.
            let screen = screen.replace('\n', "\x1b[K\r\n");
            print!("\x1b[H{screen}\x1b[J");
            let _ = std::io::stdout().flush();
        }
        let wait = if paused {
            interval
        } else {
            next.saturating_duration_since(Instant::now())
        };
        match key(wait) {
            Some(b'q' | 3) => return Ok(()),
            Some(b'p') => sort = Sort::Packets,
            Some(b'b') => sort = Sort::Bytes,
            Some(b' ') => paused = !paused,
            Some(b'c') => {
                let i = chain
                    .as_ref()
                    .and_then(|c| cat.chains.iter().position(|x| x == c));
                chain = match i {
                    None => cat.chains.first().cloned(),
                    Some(i) => cat.chains.get(i + 1).cloned(),
                };
            }
            _ => {}
        }
    }
}

fn io_err(e: std::io::Error) -> ClientError {
    ClientError::Io(e)
}

/// `parapet top`.
pub fn run(args: TopArgs, socket: Option<&Path>) -> ExitCode {
    let path = parapet_daemon::socket_path(socket);
    let result = Client::connect(&path)
        .map_err(io_err)
        .and_then(|mut c| top(&mut c, &args));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("parapet: {e}");
            ExitCode::from(1)
        }
    }
}

fn top(c: &mut Client, args: &TopArgs) -> Result<(), ClientError> {
    let interval = Duration::from_secs_f64(args.interval.clamp(0.1, 3600.0));
    if args.once {
        let cat = catalog(c)?;
        let a = sample(c)?;
        std::thread::sleep(interval);
        let b = sample(c)?;
        let v = view(&cat, &a, &b, args.sort, args.chain.as_deref());
        if args.json {
            println!("{}", to_json(&v, args.limit, args.sort));
        } else {
            let size = (100, args.limit + 6);
            let text = render(&v, args.sort, args.chain.as_deref(), false, false, size);
            print!("{text}");
        }
        return Ok(());
    }
    live(c, args, interval)
}
