//! Progress of long daemon operations on a terminal: after a second (so
//! quick ones stay silent), one self-overwriting line on stderr, redrawn
//! at most ten times a second and erased when done. Nothing at all when
//! stderr is not a terminal (pipes, logs, fail2ban). The delay can be set
//! with `PARAPET_PROGRESS_AFTER_MS` (tests use 0).

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn delay() -> Duration {
    let ms = std::env::var("PARAPET_PROGRESS_AFTER_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    Duration::from_millis(ms)
}

/// A counted operation (`done` of `total`).
pub struct Progress {
    label: String,
    total: u64,
    start: Instant,
    after: Duration,
    last: Option<Instant>,
    on: bool,
}

impl Progress {
    /// Starts timing `label`; draws nothing unless stderr is a terminal.
    pub fn new(label: impl Into<String>, total: u64) -> Progress {
        Progress {
            label: label.into(),
            total,
            start: Instant::now(),
            after: delay(),
            last: None,
            on: std::io::stderr().is_terminal(),
        }
    }

    /// Reports `done` units finished.
    pub fn update(&mut self, done: u64) {
        let now = Instant::now();
        if !self.on
            || now.duration_since(self.start) < self.after
            || self
                .last
                .is_some_and(|l| now.duration_since(l) < Duration::from_millis(100))
        {
            return;
        }
        self.last = Some(now);
        let pct = (done * 100).checked_div(self.total).unwrap_or(100);
        let secs = now.duration_since(self.start).as_secs_f64();
        let mut e = std::io::stderr().lock();
        let _ = write!(
            e,
            "\r\x1b[K{}: {done}/{} ({pct}%) {secs:.1} s",
            self.label, self.total
        );
        let _ = e.flush();
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if self.last.is_some() {
            let _ = write!(std::io::stderr(), "\r\x1b[K");
        }
    }
}

/// An operation of unknown length (one request): elapsed seconds, drawn
/// by a thread until dropped.
pub struct Waiting {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Waiting {
    /// Starts showing `label… N.N s` after the delay, on a terminal.
    pub fn new(label: impl Into<String>) -> Waiting {
        let stop = Arc::new(AtomicBool::new(false));
        let label = label.into();
        let thread = std::io::stderr().is_terminal().then(|| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let (start, after) = (Instant::now(), delay());
                let mut drawn = false;
                while !stop.load(Ordering::SeqCst) {
                    let t = start.elapsed();
                    if t >= after {
                        let _ = write!(
                            std::io::stderr(),
                            "\r\x1b[K{label}… {:.1} s",
                            t.as_secs_f64()
                        );
                        drawn = true;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
                if drawn {
                    let _ = write!(std::io::stderr(), "\r\x1b[K");
                }
            })
        });
        Waiting { stop, thread }
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
