//! Durable state: an append-only journal of acknowledged changes plus a
//! periodic snapshot, both made of checksummed records.
//!
//! File layout (all integers little endian):
//!
//! ```text
//! header:  magic (8 bytes: "PRPTJNL1" or "PRPTSNP1") · epoch u64
//! record:  len u32 · crc32c(payload) u32 · payload (len bytes)
//! payload: tag u8 · fields (strings are u32 length + UTF-8)
//! add/del: name · dims u8 · width in bytes per dim · count u32 · per
//!          element: exact-mask u8 · per dim lo [· hi unless exact]
//!          (width bytes each) [· expiry u64 for add]
//! ```
//!
//! Elements are stored parsed, not as text: replay and restart never run
//! the element parser again (an IPv4 ban costs 13 bytes).
//!
//! The snapshot with epoch `E` holds the whole state as of the start of
//! journal epoch `E`; a journal is replayed on top of the snapshot only when
//! its epoch is `>= E`, so a crash between writing a snapshot and starting
//! the next journal never replays a change twice.
//!
//! Reading stops short of nothing it can trust: a record whose checksum
//! fails is reported and skipped; a truncated tail or an implausible length
//! ends the replay there and is reported. Everything before is kept.

use crate::crc::crc32c;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

mod record;
pub use record::{decode, dim_bytes, enc, encode, from_bytes, hook_byte, mode_byte, Record};

/// Journal file magic.
pub const JOURNAL_MAGIC: &[u8; 8] = b"PRPTJNL1";
/// Snapshot file magic.
pub const SNAPSHOT_MAGIC: &[u8; 8] = b"PRPTSNP1";
/// Largest record accepted when reading (a larger length is corruption).
pub const MAX_RECORD: usize = 256 << 20;
/// Elements per add/del record in snapshots (bounds record size).
pub const CHUNK: usize = 1 << 16;

const HEADER: usize = 16;

/// Appends one framed record whose payload `f` writes.
pub fn frame(buf: &mut Vec<u8>, f: impl FnOnce(&mut Vec<u8>)) {
    let start = buf.len();
    buf.extend_from_slice(&[0u8; 8]);
    f(buf);
    let len = (buf.len() - start - 8) as u32;
    let crc = crc32c(&buf[start + 8..]);
    buf[start..start + 4].copy_from_slice(&len.to_le_bytes());
    buf[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

/// What reading a journal or snapshot found.
#[derive(Debug, Default)]
pub struct ReadReport {
    /// The header's epoch.
    pub epoch: u64,
    /// Records decoded and handed to the callback.
    pub records: u64,
    /// Bytes of the file covered by intact records (header included).
    pub good_bytes: u64,
    /// File size.
    pub file_bytes: u64,
    /// Problems found: corrupt records skipped, truncated tails.
    pub problems: Vec<String>,
}

/// Reads a journal or snapshot file, calling `f` on each intact record in
/// order. `Ok(None)` when the file does not exist.
pub fn read_file(
    path: &Path,
    magic: &[u8; 8],
    mut f: impl FnMut(Record),
) -> io::Result<Option<ReadReport>> {
    let mut data = Vec::new();
    match File::open(path) {
        Ok(mut file) => file.read_to_end(&mut data)?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let name = path.display();
    let mut rep = ReadReport {
        file_bytes: data.len() as u64,
        ..Default::default()
    };
    if data.len() < HEADER || &data[..8] != magic {
        rep.problems.push(format!(
            "{name}: bad or missing header; ignoring the whole file ({} bytes)",
            data.len()
        ));
        return Ok(Some(rep));
    }
    rep.epoch = u64::from_le_bytes(data[8..16].try_into().unwrap());
    let mut off = HEADER;
    rep.good_bytes = off as u64;
    let mut last_bad = false;
    while off < data.len() {
        let rest = data.len() - off;
        if rest < 8 {
            rep.problems.push(format!(
                "{name}: truncated record header at offset {off}; dropping the last {rest} bytes"
            ));
            break;
        }
        let len = u32::from_le_bytes(data[off..off + 4].try_into().unwrap()) as usize;
        let crc = u32::from_le_bytes(data[off + 4..off + 8].try_into().unwrap());
        if len > MAX_RECORD {
            rep.problems.push(format!("{name}: corrupt record length {len} at offset {off}; dropping the last {rest} bytes"));
            break;
        }
        if rest - 8 < len {
            rep.problems.push(format!("{name}: truncated record at offset {off} ({len} byte payload, {} present); dropping the last {rest} bytes", rest - 8));
            break;
        }
        let payload = &data[off + 8..off + 8 + len];
        if crc32c(payload) != crc {
            if last_bad {
                // Two bad records in a row: the length was probably corrupt
                // too, and what follows cannot be framed reliably.
                rep.problems.push(format!("{name}: another checksum mismatch at offset {off}; dropping the last {rest} bytes"));
                break;
            }
            rep.problems.push(format!(
                "{name}: checksum mismatch in record at offset {off} ({len} bytes); record skipped"
            ));
            last_bad = true;
            off += 8 + len;
            continue;
        }
        last_bad = false;
        match decode(payload) {
            Some(r) => {
                f(r);
                rep.records += 1;
            }
            None => rep.problems.push(format!(
                "{name}: undecodable record at offset {off}; record skipped"
            )),
        }
        off += 8 + len;
        rep.good_bytes = off as u64;
    }
    Ok(Some(rep))
}

fn fsync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

fn write_header(f: &mut impl Write, magic: &[u8; 8], epoch: u64) -> io::Result<()> {
    f.write_all(magic)?;
    f.write_all(&epoch.to_le_bytes())
}

/// A sink for snapshot records: called with a closure that writes one payload.
pub type Emit<'a> = dyn FnMut(&dyn Fn(&mut Vec<u8>)) -> io::Result<()> + 'a;

/// Writes a snapshot atomically: `snapshot.tmp`, fsync, rename over
/// `snapshot`, fsync the directory. `f` writes framed records.
pub fn write_snapshot(
    dir: &Path,
    epoch: u64,
    f: impl FnOnce(&mut Emit) -> io::Result<()>,
) -> io::Result<()> {
    let tmp = dir.join("snapshot.tmp");
    let mut w = BufWriter::with_capacity(1 << 20, File::create(&tmp)?);
    write_header(&mut w, SNAPSHOT_MAGIC, epoch)?;
    let mut buf = Vec::new();
    let mut emit = |payload: &dyn Fn(&mut Vec<u8>)| -> io::Result<()> {
        buf.clear();
        frame(&mut buf, |b| payload(b));
        w.write_all(&buf)
    };
    f(&mut emit)?;
    let file = w.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()?;
    fs::rename(&tmp, dir.join("snapshot"))?;
    fsync_dir(dir)
}

struct Pending {
    buf: Vec<u8>,
    lsn: u64,
}

struct JFile {
    file: File,
    synced: u64,
    bytes: u64,
    epoch: u64,
    failed: Option<String>,
}

/// The append-only journal with group commit: changes are appended to a
/// memory buffer under the state lock (so journal order is state order);
/// [`Journal::sync`] writes and fdatasyncs everything pending, so one
/// fdatasync covers every change appended by any client meanwhile.
pub struct Journal {
    dir: PathBuf,
    fsync: bool,
    pending: Mutex<Pending>,
    file: Mutex<JFile>,
    /// Write + fdatasync time of each sync that wrote (for metrics).
    pub fsync_seconds: crate::metrics_tally::Histogram,
}

/// Log sequence number: count of records appended since start.
pub type Lsn = u64;

impl Journal {
    /// Opens `journal` for appending after replay: keeps its first
    /// `good_bytes` (drops a torn tail) when `epoch` matches, else starts a
    /// fresh file with `epoch`.
    pub fn open(dir: &Path, epoch: u64, keep: Option<u64>, fsync: bool) -> io::Result<Journal> {
        let path = dir.join("journal");
        let (file, bytes) = match keep {
            Some(good) => {
                let file = OpenOptions::new().read(true).write(true).open(&path)?;
                file.set_len(good)?;
                file.sync_all()?;
                (file, good)
            }
            None => (Self::fresh(dir, epoch)?, HEADER as u64),
        };
        let mut file = file;
        use std::io::Seek;
        file.seek(io::SeekFrom::End(0))?;
        Ok(Journal {
            dir: dir.to_path_buf(),
            fsync,
            pending: Mutex::new(Pending {
                buf: Vec::new(),
                lsn: 0,
            }),
            file: Mutex::new(JFile {
                file,
                synced: 0,
                bytes,
                epoch,
                failed: None,
            }),
            fsync_seconds: Default::default(),
        })
    }

    fn fresh(dir: &Path, epoch: u64) -> io::Result<File> {
        let tmp = dir.join("journal.tmp");
        let mut f = File::create(&tmp)?;
        write_header(&mut f, JOURNAL_MAGIC, epoch)?;
        f.sync_all()?;
        fs::rename(&tmp, dir.join("journal"))?;
        fsync_dir(dir)?;
        OpenOptions::new().append(true).open(dir.join("journal"))
    }

    /// Appends one record (payload written by `f`); returns its LSN. Not
    /// durable until [`Journal::sync`] with that LSN returns.
    pub fn append(&self, f: impl FnOnce(&mut Vec<u8>)) -> Lsn {
        let mut p = self.pending.lock().unwrap();
        frame(&mut p.buf, f);
        p.lsn += 1;
        p.lsn
    }

    /// Makes every record up to `lsn` durable (written and, unless fsync is
    /// off, fdatasync'ed). Returns at once when a concurrent sync covered it.
    pub fn sync(&self, lsn: Lsn) -> Result<(), String> {
        let mut jf = self.file.lock().unwrap();
        if let Some(e) = &jf.failed {
            return Err(e.clone());
        }
        if jf.synced >= lsn {
            return Ok(());
        }
        let (buf, upto) = {
            let mut p = self.pending.lock().unwrap();
            (std::mem::take(&mut p.buf), p.lsn)
        };
        let t0 = std::time::Instant::now();
        let r = jf.file.write_all(&buf).and_then(|_| {
            if self.fsync {
                jf.file.sync_data()
            } else {
                Ok(())
            }
        });
        match r {
            Ok(()) => {
                self.fsync_seconds.observe(t0.elapsed());
                jf.bytes += buf.len() as u64;
                jf.synced = upto;
                // Give the buffer back to reuse its capacity.
                let mut p = self.pending.lock().unwrap();
                if p.buf.is_empty() && buf.capacity() <= 64 << 20 {
                    let mut buf = buf;
                    buf.clear();
                    p.buf = buf;
                }
                Ok(())
            }
            Err(e) => {
                // The file may now end in a partial record; refuse further
                // changes rather than acknowledge what may not replay.
                let msg =
                    format!("journal write failed: {e}; the daemon no longer accepts changes");
                jf.failed = Some(msg.clone());
                Err(msg)
            }
        }
    }

    /// Everything appended so far, made durable.
    pub fn sync_all(&self) -> Result<(), String> {
        let lsn = self.pending.lock().unwrap().lsn;
        self.sync(lsn)
    }

    /// Why the journal stopped accepting records, if it did.
    pub fn failed(&self) -> Option<String> {
        self.file.lock().unwrap().failed.clone()
    }

    /// Bytes in the journal file (synced part).
    pub fn bytes(&self) -> u64 {
        self.file.lock().unwrap().bytes
    }

    /// The current epoch.
    pub fn epoch(&self) -> u64 {
        self.file.lock().unwrap().epoch
    }

    /// After a snapshot with epoch `epoch` was written: starts a new, empty
    /// journal with that epoch. Call with the state lock held and after
    /// [`Journal::sync_all`], so nothing pending is lost.
    pub fn rotate(&self, epoch: u64) -> io::Result<()> {
        let mut jf = self.file.lock().unwrap();
        let file = Self::fresh(&self.dir, epoch)?;
        jf.file = file;
        jf.bytes = HEADER as u64;
        jf.epoch = epoch;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use parapet_dataplane::{AttachPoint, Mode};
    use parapet_sets::{Element, KeyPart};

    const DIMS: [KeyPart; 2] = [KeyPart::Ipv4Addr, KeyPart::InetService];

    fn sample() -> Vec<Record> {
        let a = Element::new(&[(0x0a00_0001, 0x0a00_0001), (80, 80)]);
        let b = Element::new(&[(0x0a00_0000, 0x0aff_ffff), (1000, 2000)]);
        vec![
            Record::SetCreate {
                name: "b".into(),
                spec: "{}".into(),
            },
            Record::SetAdd {
                name: "b".into(),
                widths: vec![4, 2],
                elems: vec![
                    Element {
                        expires: Some(5),
                        ..a.clone()
                    },
                    b,
                ],
            },
            Record::SetDel {
                name: "b".into(),
                widths: vec![4, 2],
                elems: vec![a],
            },
            Record::SetFlush { name: "b".into() },
            Record::Apply {
                name: "r".into(),
                format: "json".into(),
                text: "x\ny".into(),
            },
            Record::Attach {
                iface: "veth0".into(),
                hook: 1,
                mode: 0,
            },
            Record::Detach {
                iface: "veth0".into(),
                hook: 1,
            },
            Record::SetDestroy { name: "b".into() },
        ]
    }

    fn encode(r: &Record, b: &mut Vec<u8>) {
        match r {
            Record::SetCreate { name, spec } => enc::create(b, name, spec),
            Record::SetDestroy { name } => enc::destroy(b, name),
            Record::SetAdd { name, elems, .. } => enc::add(
                b,
                name,
                &DIMS,
                elems.iter().map(|e| (e, e.expires.unwrap_or(0))),
            ),
            Record::SetDel { name, elems, .. } => enc::del(b, name, &DIMS, elems.iter()),
            Record::SetFlush { name } => enc::flush(b, name),
            Record::Apply { name, format, text } => enc::apply(b, name, format, text),
            Record::Attach { iface, hook, mode } => enc::attach(b, iface, *hook, *mode),
            Record::Detach { iface, hook } => enc::detach(b, iface, *hook),
        }
    }

    #[test]
    fn hook_and_mode_bytes_round_trip() {
        for h in [AttachPoint::Xdp, AttachPoint::Tc, AttachPoint::Netfilter] {
            for m in [Mode::Native, Mode::Skb] {
                assert_eq!(from_bytes(hook_byte(h), mode_byte(m)), (h, m));
            }
        }
    }

    #[test]
    fn round_trip() {
        for r in sample() {
            let mut b = Vec::new();
            encode(&r, &mut b);
            assert_eq!(decode(&b), Some(r));
            b.push(0);
            assert_eq!(decode(&b), None, "trailing bytes are an error");
        }
    }

    #[test]
    fn journal_write_read_and_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::open(dir.path(), 3, None, true).unwrap();
        let mut last = 0;
        for r in sample() {
            last = j.append(|b| encode(&r, b));
        }
        j.sync(last).unwrap();
        let path = dir.path().join("journal");
        let mut got = Vec::new();
        let rep = read_file(&path, JOURNAL_MAGIC, |r| got.push(r))
            .unwrap()
            .unwrap();
        assert_eq!(got, sample());
        assert_eq!(rep.epoch, 3);
        assert!(rep.problems.is_empty());
        assert_eq!(rep.good_bytes, rep.file_bytes);
        let data = fs::read(&path).unwrap();

        // Truncation anywhere inside the last record keeps the others.
        for cut in (data.len() - 10)..data.len() {
            fs::write(&path, &data[..cut]).unwrap();
            let mut got = Vec::new();
            let rep = read_file(&path, JOURNAL_MAGIC, |r| got.push(r))
                .unwrap()
                .unwrap();
            let all = sample();
            assert_eq!(got, all[..all.len() - 1].to_vec(), "cut at {cut}");
            assert_eq!(rep.problems.len(), 1, "{:?}", rep.problems);
        }

        // A flipped byte inside the second record's payload: that record is
        // skipped and reported, the rest replays.
        let mut bad = data.clone();
        let second =
            HEADER + 8 + u32::from_le_bytes(data[HEADER..HEADER + 4].try_into().unwrap()) as usize;
        bad[second + 12] ^= 0x40;
        fs::write(&path, &bad).unwrap();
        let mut got = Vec::new();
        let rep = read_file(&path, JOURNAL_MAGIC, |r| got.push(r))
            .unwrap()
            .unwrap();
        let mut want = sample();
        want.remove(1);
        assert_eq!(got, want);
        assert!(rep.problems[0].contains("checksum"), "{:?}", rep.problems);

        // A corrupt length: replay stops there, earlier records survive.
        let mut bad = data.clone();
        bad[second..second + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        fs::write(&path, &bad).unwrap();
        let mut got = Vec::new();
        let rep = read_file(&path, JOURNAL_MAGIC, |r| got.push(r))
            .unwrap()
            .unwrap();
        assert_eq!(got, sample()[..1].to_vec());
        assert_eq!(rep.good_bytes as usize, second);

        // Bad magic: nothing is replayed, and it is reported.
        let mut bad = data;
        bad[0] = b'X';
        fs::write(&path, &bad).unwrap();
        let rep = read_file(&path, JOURNAL_MAGIC, |_| panic!("no records"))
            .unwrap()
            .unwrap();
        assert_eq!(rep.problems.len(), 1);
    }

    proptest::proptest! {
        // Whatever happens to the bytes, reading never panics, and what it
        // returns is a subsequence of what was written (a damaged record
        // is dropped, never invented or altered: the CRC sees to that).
        #[test]
        fn damaged_journals_yield_a_subsequence(cut in 0usize..400, flips in proptest::collection::vec((0usize..400, 1u8..=255), 0..4)) {
            let dir = tempfile::tempdir().unwrap();
            let j = Journal::open(dir.path(), 1, None, false).unwrap();
            let mut last = 0;
            for r in sample() {
                last = j.append(|b| encode(&r, b));
            }
            j.sync(last).unwrap();
            let path = dir.path().join("journal");
            let mut data = fs::read(&path).unwrap();
            data.truncate(cut.max(HEADER).min(data.len()));
            for (pos, x) in flips {
                if pos >= HEADER && pos < data.len() {
                    data[pos] ^= x;
                }
            }
            fs::write(&path, &data).unwrap();
            let mut got = Vec::new();
            read_file(&path, JOURNAL_MAGIC, |r| got.push(r)).unwrap().unwrap();
            let all = sample();
            let mut it = all.iter();
            for g in &got {
                proptest::prop_assert!(it.any(|r| r == g), "{:?} not in order", g);
            }
        }
    }

    #[test]
    fn snapshot_is_atomic_and_readable() {
        let dir = tempfile::tempdir().unwrap();
        write_snapshot(dir.path(), 9, |emit| {
            for r in sample() {
                emit(&|b: &mut Vec<u8>| encode(&r, b))?;
            }
            Ok(())
        })
        .unwrap();
        assert!(!dir.path().join("snapshot.tmp").exists());
        let mut got = Vec::new();
        let rep = read_file(&dir.path().join("snapshot"), SNAPSHOT_MAGIC, |r| {
            got.push(r)
        })
        .unwrap()
        .unwrap();
        assert_eq!((rep.epoch, got), (9, sample()));
    }
}
