//! Start-up: the state directory's lock, and the state rebuilt from
//! snapshot + journal.

use crate::compiled::Loader;
use crate::journal::{read_file, Journal, JOURNAL_MAGIC, SNAPSHOT_MAGIC};
use crate::shared::{Config, Recovery};
use crate::state::State;
use parapet_sets::Clock;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// CPU time of the calling thread, ms.
pub(crate) fn thread_cpu_ms() -> u64 {
    // SAFETY: getrusage only fills the struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1000 + t.tv_usec as u64 / 1000;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn peek_epoch(path: &Path, magic: &[u8; 8]) -> Option<u64> {
    let mut h = [0u8; 16];
    let mut f = File::open(path).ok()?;
    f.read_exact(&mut h).ok()?;
    (&h[..8] == magic).then(|| u64::from_le_bytes(h[8..].try_into().unwrap()))
}

pub(crate) fn lock_state_dir(dir: &Path) -> io::Result<File> {
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
pub(crate) fn recover(
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
