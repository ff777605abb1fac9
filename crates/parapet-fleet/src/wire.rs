//! The fleet message: one change of one element of a shared set (or the
//! flush of a set): an outbox record, and an entry of a published batch
//! (`batch.rs`, which packs many of them into one JetStream message). Parse and emit
//! side by side; the parser is strict (every field bounded and checked,
//! no trailing bytes) because any client of the broker can publish.
//!
//! ```text
//!  0   "PFM" 0x01        magic and version
//!  4   kind      u8      1 add, 2 del, 3 flush
//!  5   origin    u8 len + bytes   node id: 1..=64 of [A-Za-z0-9_-]
//!      seq       u64 BE  per-origin sequence, >= 1
//!      expires   u64 BE  absolute expiry, ms since the Unix epoch;
//!                        0 = permanent (always 0 for del and flush)
//!      set       u8 len + bytes   1..=64 of [A-Za-z0-9_.:-]
//!      elem      u16 BE len + bytes   element text as `list` prints it:
//!                        0 for flush, 1..=512 printable ASCII otherwise
//! ```
//!
//! The element travels as text and is parsed by the receiver against its
//! own set's type (`parapet_sets::parse_element`), so a type mismatch is a
//! rejected message, never a wrong key.

use std::fmt;
use std::sync::Arc;

/// Magic and version.
pub const MAGIC: [u8; 4] = *b"PFM\x01";
/// Longest node id.
pub const MAX_ORIGIN: usize = 64;
/// Longest set name (as the daemon's).
pub const MAX_SET: usize = 64;
/// Longest element text (as the daemon's).
pub const MAX_ELEM: usize = 512;
/// Largest encoded message.
pub const MAX_MSG: usize = 4 + 1 + 1 + MAX_ORIGIN + 8 + 8 + 1 + MAX_SET + 2 + MAX_ELEM;

/// What a message does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Add (ban) the element until `expires`.
    Add = 1,
    /// Delete (unban) the element.
    Del = 2,
    /// Remove every element of the set.
    Flush = 3,
}

/// One fleet message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FleetMsg {
    /// What it does.
    pub kind: Kind,
    /// Node that made the change (shared by the changes of a batch).
    pub origin: Arc<str>,
    /// That node's sequence number of the change.
    pub seq: u64,
    /// Absolute expiry, ms since the Unix epoch; 0 = permanent.
    pub expires: u64,
    /// Set name (shared by consecutive changes of one set in a batch).
    pub set: Arc<str>,
    /// Element text (empty for flush).
    pub elem: String,
}

/// Why a message was rejected: what and at which byte.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WireError {
    /// Byte offset of the bad field.
    pub at: usize,
    /// What is wrong.
    pub what: &'static str,
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "byte {}: {}", self.at, self.what)
    }
}

impl std::error::Error for WireError {}

/// A node id, stream prefix or origin: 1..=64 of `[A-Za-z0-9_-]`.
pub fn valid_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_ORIGIN
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn valid_set(s: &[u8]) -> bool {
    !s.is_empty()
        && s.len() <= MAX_SET
        && s.iter()
            .all(|b| b.is_ascii_alphanumeric() || b"_.-:".contains(b))
}

fn valid_elem(s: &[u8]) -> bool {
    s.iter().all(|b| (0x21..0x7f).contains(b) || *b == b' ')
}

pub(crate) struct Reader<'a> {
    pub(crate) buf: &'a [u8],
    pub(crate) at: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], WireError> {
        let end = self.at.checked_add(n).filter(|e| *e <= self.buf.len());
        let Some(end) = end else {
            return Err(WireError { at: self.at, what });
        };
        let s = &self.buf[self.at..end];
        self.at = end;
        Ok(s)
    }

    pub(crate) fn u8(&mut self, what: &'static str) -> Result<u8, WireError> {
        Ok(self.take(1, what)?[0])
    }

    pub(crate) fn u16(&mut self, what: &'static str) -> Result<u16, WireError> {
        let b = self.take(2, what)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    pub(crate) fn u64(&mut self, what: &'static str) -> Result<u64, WireError> {
        let b = self.take(8, what)?;
        Ok(u64::from_be_bytes(b.try_into().expect("8 bytes")))
    }

    /// A change's kind.
    pub(crate) fn kind(&mut self) -> Result<Kind, WireError> {
        let at = self.at;
        match self.u8("truncated kind")? {
            1 => Ok(Kind::Add),
            2 => Ok(Kind::Del),
            3 => Ok(Kind::Flush),
            _ => self.fail(at, "unknown kind"),
        }
    }

    /// An origin node id (length byte, then the id).
    pub(crate) fn origin(&mut self) -> Result<&'a str, WireError> {
        let n = self.u8("truncated origin length")? as usize;
        let at = self.at;
        let origin = self.take(n, "truncated origin")?;
        std::str::from_utf8(origin)
            .ok()
            .filter(|o| valid_id(o))
            .ok_or(WireError {
                at,
                what: "bad origin node id",
            })
    }

    /// A sequence number (never 0).
    pub(crate) fn seq(&mut self) -> Result<u64, WireError> {
        let at = self.at;
        match self.u64("truncated sequence")? {
            0 => self.fail(at, "sequence 0"),
            s => Ok(s),
        }
    }

    /// The rest of a change of `kind`: expiry, set name, element text.
    pub(crate) fn change(&mut self, kind: Kind) -> Result<(u64, &'a str, &'a str), WireError> {
        let at = self.at;
        let expires = self.u64("truncated expiry")?;
        if kind != Kind::Add && expires != 0 {
            return self.fail(at, "expiry on a del or flush");
        }
        let n = self.u8("truncated set length")? as usize;
        let at = self.at;
        let set = self.take(n, "truncated set name")?;
        if !valid_set(set) {
            return self.fail(at, "bad set name");
        }
        let n = self.u16("truncated element length")? as usize;
        let at = self.at;
        let elem = self.take(n, "truncated element")?;
        if (kind == Kind::Flush) != elem.is_empty() || n > MAX_ELEM || !valid_elem(elem) {
            return self.fail(at, "bad element");
        }
        // Both checked: ASCII.
        let text = |b: &'a [u8]| std::str::from_utf8(b).expect("ASCII");
        Ok((expires, text(set), text(elem)))
    }

    pub(crate) fn fail<T>(&self, at: usize, what: &'static str) -> Result<T, WireError> {
        Err(WireError { at, what })
    }
}

impl FleetMsg {
    /// Parses one message; strict.
    pub fn parse(buf: &[u8]) -> Result<FleetMsg, WireError> {
        let mut r = Reader { buf, at: 0 };
        if buf.len() > MAX_MSG {
            return r.fail(MAX_MSG, "message longer than the largest valid one");
        }
        if r.take(4, "truncated magic")? != MAGIC {
            return r.fail(0, "bad magic or version");
        }
        let kind = r.kind()?;
        let origin = r.origin()?;
        let seq = r.seq()?;
        let (expires, set, elem) = r.change(kind)?;
        if r.at != buf.len() {
            return r.fail(r.at, "trailing bytes");
        }
        Ok(FleetMsg {
            kind,
            origin: origin.into(),
            seq,
            expires,
            set: set.into(),
            elem: elem.to_string(),
        })
    }

    /// Appends the encoding to `out`. Panics on fields [`FleetMsg::parse`]
    /// would reject (a bug of the caller: the daemon only emits valid ones).
    pub fn emit(&self, out: &mut Vec<u8>) {
        assert!(valid_id(&self.origin) && self.seq > 0);
        out.extend_from_slice(&MAGIC);
        out.push(self.kind as u8);
        out.push(self.origin.len() as u8);
        out.extend_from_slice(self.origin.as_bytes());
        out.extend_from_slice(&self.seq.to_be_bytes());
        self.emit_change(out);
    }

    /// Appends expiry, set name and element text (the part of a change
    /// that a batch entry shares with a message).
    pub(crate) fn emit_change(&self, out: &mut Vec<u8>) {
        assert!(valid_set(self.set.as_bytes()) && self.elem.len() <= MAX_ELEM);
        out.extend_from_slice(&self.expires.to_be_bytes());
        out.push(self.set.len() as u8);
        out.extend_from_slice(self.set.as_bytes());
        out.extend_from_slice(&(self.elem.len() as u16).to_be_bytes());
        out.extend_from_slice(self.elem.as_bytes());
    }

    /// The encoding.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(64);
        self.emit(&mut v);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg() -> FleetMsg {
        FleetMsg {
            kind: Kind::Add,
            origin: "node-a".into(),
            seq: 7,
            expires: 1_700_000_000_000,
            set: "parapet-ban4".into(),
            elem: "192.0.2.1".into(),
        }
    }

    #[test]
    fn round_trip() {
        let m = msg();
        assert_eq!(FleetMsg::parse(&m.to_bytes()).unwrap(), m);
        let f = FleetMsg {
            kind: Kind::Flush,
            expires: 0,
            elem: String::new(),
            ..m
        };
        assert_eq!(FleetMsg::parse(&f.to_bytes()).unwrap(), f);
    }

    #[test]
    fn rejects_each_bad_field() {
        let good = msg().to_bytes();
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (vec![], "truncated magic"),
            (b"PFM\x02".to_vec(), "bad magic or version"),
            ([&good[..4], &[9]].concat(), "unknown kind"),
            ([&good[..], &[0]].concat(), "trailing bytes"),
            (good[..good.len() - 1].to_vec(), "truncated element"),
            (
                {
                    let mut b = good.clone();
                    b[6] = b'.';
                    b
                },
                "bad origin node id",
            ),
            (
                {
                    let mut b = good.clone();
                    b[4] = 2; // a del with an expiry
                    b
                },
                "expiry on a del or flush",
            ),
        ];
        for (b, what) in cases {
            assert_eq!(FleetMsg::parse(&b).unwrap_err().what, what, "{b:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn never_panics(b in proptest::collection::vec(proptest::num::u8::ANY, 0..200)) {
            let _ = FleetMsg::parse(&b);
        }

        #[test]
        fn mutations_parse_or_fail_cleanly(i in 0usize..40, v in proptest::num::u8::ANY) {
            let mut b = msg().to_bytes();
            let i = i % b.len();
            b[i] = v;
            if let Ok(m) = FleetMsg::parse(&b) {
                proptest::prop_assert_eq!(m.to_bytes(), b);
            }
        }
    }
}
