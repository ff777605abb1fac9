//! The publish backlog: local changes of shared sets waiting for the
//! broker's acknowledgement, in a file of the state directory, so that
//! neither a broker outage nor `kill -9` loses a change the daemon has
//! acknowledged to its client. Bounded by size; memory holds only offsets.
//!
//! `fleet-outbox`: records `u16 BE length` + a [`FleetMsg`] encoding,
//! appended in the order the changes were committed (under the daemon's
//! state lock). `fleet-acked`: 16 bytes, the outbox offset up to which
//! the broker acknowledged and the sequence number of that last message.
//! When everything is acknowledged the outbox is truncated to empty.

use crate::wire::FleetMsg;
use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::path::Path;

/// The outbox file and its acknowledged position.
pub struct Outbox {
    file: File,
    acked_file: File,
    /// Bytes written.
    len: u64,
    /// Offset acknowledged by the broker.
    acked: u64,
    /// Last sequence number handed out.
    seq: u64,
    max_bytes: u64,
    /// Records in the file not yet acknowledged.
    backlog: u64,
}

/// Records read for publishing: each with the offset just past it.
pub type Batch = Vec<(u64, FleetMsg)>;

impl Outbox {
    /// Opens (or creates) the outbox in `dir`; a torn or corrupt tail (a
    /// crash in the middle of a write) is cut off.
    pub fn open(dir: &Path, max_bytes: u64) -> io::Result<Outbox> {
        let open = |name: &str| {
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(dir.join(name))
        };
        let file = open("fleet-outbox")?;
        let acked_file = open("fleet-acked")?;
        let mut a = Vec::new();
        (&acked_file).read_to_end(&mut a)?;
        let (mut acked, mut seq) = (0, 0);
        if a.len() >= 16 {
            acked = u64::from_be_bytes(a[0..8].try_into().expect("8"));
            seq = u64::from_be_bytes(a[8..16].try_into().expect("8"));
        }
        let mut ob = Outbox {
            file,
            acked_file,
            len: 0,
            acked: 0,
            seq,
            max_bytes,
            backlog: 0,
        };
        // Scan the whole file: find the valid end and the last sequence.
        let size = ob.file.metadata()?.len();
        let mut off = 0;
        while off < size {
            match ob.read_at(off) {
                Some((next, m)) => {
                    ob.seq = ob.seq.max(m.seq);
                    if off >= acked {
                        ob.backlog += 1;
                    }
                    off = next;
                }
                None => break,
            }
        }
        ob.file.set_len(off)?;
        ob.len = off;
        if acked > off {
            acked = off; // an outbox truncated behind our back: resend nothing
        }
        ob.acked = acked;
        Ok(ob)
    }

    fn read_at(&self, off: u64) -> Option<(u64, FleetMsg)> {
        let mut l = [0u8; 2];
        self.file.read_exact_at(&mut l, off).ok()?;
        let n = u16::from_be_bytes(l) as u64;
        let mut b = vec![0u8; n as usize];
        self.file.read_exact_at(&mut b, off + 2).ok()?;
        FleetMsg::parse(&b).ok().map(|m| (off + 2 + n, m))
    }

    /// The next sequence number (the caller fills the message with it and
    /// appends it at once, under the same lock).
    pub fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// Appends one message. `Err` when the outbox is full (the change
    /// stays local: the caller counts it) or the write failed.
    pub fn append(&mut self, m: &FleetMsg) -> io::Result<()> {
        let mut b = vec![0, 0];
        m.emit(&mut b);
        let n = (b.len() - 2) as u16;
        b[..2].copy_from_slice(&n.to_be_bytes());
        if self.len + b.len() as u64 > self.max_bytes {
            return Err(io::Error::new(
                io::ErrorKind::StorageFull,
                "fleet outbox full",
            ));
        }
        self.file.write_all_at(&b, self.len)?;
        self.len += b.len() as u64;
        self.backlog += 1;
        Ok(())
    }

    /// Up to `max` records from `from` (an offset returned earlier, or
    /// [`Outbox::acked`]), read in one chunk of at most 1 MiB (a record
    /// per `pread` would cost two system calls per change).
    pub fn read(&self, from: u64, max: usize) -> Batch {
        let mut out = Vec::new();
        let start = from.max(self.acked);
        let n = (self.len.saturating_sub(start)).min(1 << 20) as usize;
        let mut buf = vec![0u8; n];
        if self.file.read_exact_at(&mut buf, start).is_err() {
            return out;
        }
        let mut at = 0;
        while at + 2 <= buf.len() && out.len() < max {
            let len = u16::from_be_bytes([buf[at], buf[at + 1]]) as usize;
            let Some(rec) = buf.get(at + 2..at + 2 + len) else {
                break; // continues in the next chunk
            };
            let Ok(m) = FleetMsg::parse(rec) else { break };
            at += 2 + len;
            out.push((start + at as u64, m));
        }
        out
    }

    /// The broker acknowledged everything up to `off` (`n` records, the
    /// last with sequence `seq`). Persists the position; empties the
    /// file when nothing is left.
    pub fn ack(&mut self, off: u64, n: u64) -> io::Result<()> {
        self.acked = off.min(self.len);
        self.backlog = self.backlog.saturating_sub(n);
        if self.acked == self.len {
            self.file.set_len(0)?;
            self.len = 0;
            self.acked = 0;
            self.backlog = 0;
        }
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&self.acked.to_be_bytes());
        b[8..].copy_from_slice(&self.seq.to_be_bytes());
        self.acked_file.write_all_at(&b, 0)
    }

    /// Offset acknowledged so far (where publishing resumes).
    pub fn acked(&self) -> u64 {
        self.acked
    }

    /// Records waiting for the broker.
    pub fn backlog(&self) -> u64 {
        self.backlog
    }

    /// Bytes in the file.
    pub fn bytes(&self) -> u64 {
        self.len
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Kind;

    fn m(seq: u64) -> FleetMsg {
        FleetMsg {
            kind: Kind::Add,
            origin: "a".into(),
            seq,
            expires: 0,
            set: "s".into(),
            elem: format!("10.0.0.{seq}"),
        }
    }

    #[test]
    fn survives_reopen_and_cuts_torn_tail() {
        let d = tempfile::tempdir().unwrap();
        let mut o = Outbox::open(d.path(), 1 << 20).unwrap();
        for _ in 0..3 {
            let s = o.next_seq();
            o.append(&m(s)).unwrap();
        }
        let b = o.read(o.acked(), 2);
        assert_eq!(b.len(), 2);
        o.ack(b[1].0, 2).unwrap();
        let end = o.bytes();
        o.file.write_all_at(&[0, 40, 1], end).unwrap(); // torn record
        drop(o);
        let mut o = Outbox::open(d.path(), 1 << 20).unwrap();
        assert_eq!(o.bytes(), end);
        assert_eq!(o.backlog(), 1);
        let b = o.read(o.acked(), 10);
        assert_eq!(b.iter().map(|r| r.1.seq).collect::<Vec<_>>(), [3]);
        assert_eq!(o.next_seq(), 4);
        o.ack(b[0].0, 1).unwrap();
        assert_eq!((o.bytes(), o.backlog()), (0, 0));
        drop(o);
        let mut o = Outbox::open(d.path(), 1 << 20).unwrap();
        assert_eq!(o.next_seq(), 5, "sequence survives an emptied outbox");
    }

    #[test]
    fn bounded() {
        let d = tempfile::tempdir().unwrap();
        let mut o = Outbox::open(d.path(), 80).unwrap(); // two records of 37 bytes
        let s = o.next_seq();
        o.append(&m(s)).unwrap();
        let s = o.next_seq();
        o.append(&m(s)).unwrap();
        assert!(o.append(&m(3)).is_err());
    }
}
