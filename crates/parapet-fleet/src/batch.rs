//! The batch message: many changes of one origin, with consecutive
//! sequence numbers, in one JetStream message on the log stream. The
//! broker's cost is per message (one message per element capped a
//! 2-core machine at 30–60k bans/s), so a node packs what its outbox
//! holds into messages of up to [`MAX_ENTRIES`] changes. Parse and emit
//! side by side; strict, because any client of the broker can publish.
//!
//! ```text
//!  0   "PFB" 0x01       magic and version
//!  4   origin    u8 len + bytes    node id: 1..=64 of [A-Za-z0-9_-]
//!      first     u64 BE            sequence of the first entry, >= 1;
//!                                  entry i has sequence first + i
//!      count     u16 BE            1..=MAX_ENTRIES
//!      count × entry:
//!        kind    u8                1 add, 2 del, 3 flush
//!        expires u64 BE            absolute expiry (ms since the epoch),
//!                                  0 = permanent; 0 for del and flush
//!        set     u8 len + bytes    1..=64 of [A-Za-z0-9_.:-]
//!        elem    u16 BE len + bytes  0 for flush, 1..=512 printable ASCII
//! ```
//!
//! It is published on `PREFIX.fleetlog.ORIGIN` (the receiver checks the
//! subject names the batch's origin) with `Nats-Msg-Id` =
//! `ORIGIN-FIRST-LAST`, so the broker drops a re-publish of the same
//! range within its duplicate window; a range cut differently after a
//! restart is caught by the receivers' per-origin high-water marks.

use crate::wire::{valid_id, FleetMsg, Reader, WireError};
use std::sync::Arc;

/// Magic and version.
pub const MAGIC: [u8; 4] = *b"PFB\x01";
/// Most changes in one message.
pub const MAX_ENTRIES: usize = 4096;
/// Largest message accepted (the stream refuses bigger ones too).
pub const MAX_BYTES: usize = 512 * 1024;
/// Packing stops before a message grows beyond this (so that a full
/// batch of the longest elements still fits [`MAX_BYTES`]).
const PACK_BYTES: usize = 256 * 1024;

/// The subject of `origin`'s batches under `prefix`.
pub fn subject(prefix: &str, origin: &str) -> String {
    format!("{prefix}.fleetlog.{origin}")
}

/// The JetStream message id of a batch of `msgs` (non-empty).
pub fn msg_id(msgs: &[FleetMsg]) -> String {
    let (a, b) = (&msgs[0], &msgs[msgs.len() - 1]);
    format!("{}-{}-{}", a.origin, a.seq, b.seq)
}

/// Encodes the longest prefix of `msgs` that makes one batch (one origin,
/// consecutive sequence numbers, at most [`MAX_ENTRIES`] changes and
/// about 256 KiB) into `out` (cleared first); returns how many it took
/// (at least one when `msgs` is not empty).
pub fn pack(msgs: &[FleetMsg], out: &mut Vec<u8>) -> usize {
    out.clear();
    let Some(first) = msgs.first() else {
        return 0;
    };
    assert!(valid_id(&first.origin) && first.seq > 0);
    out.extend_from_slice(&MAGIC);
    out.push(first.origin.len() as u8);
    out.extend_from_slice(first.origin.as_bytes());
    out.extend_from_slice(&first.seq.to_be_bytes());
    let count_at = out.len();
    out.extend_from_slice(&[0, 0]);
    let mut n = 0;
    for m in msgs.iter().take(MAX_ENTRIES) {
        let next = first.seq.checked_add(n as u64);
        if n > 0 && (m.origin != first.origin || Some(m.seq) != next || out.len() >= PACK_BYTES) {
            break;
        }
        out.push(m.kind as u8);
        m.emit_change(out);
        n += 1;
    }
    out[count_at..count_at + 2].copy_from_slice(&(n as u16).to_be_bytes());
    n
}

/// The number of changes `buf`'s header claims, without parsing the rest
/// (1 for anything that is not a batch header): sizes a consumer's round
/// before decoding. Only an estimate for a hostile message, which
/// [`parse`] then refuses whole.
pub fn claimed_count(buf: &[u8]) -> usize {
    let count = || {
        let olen = *buf.get(4)? as usize;
        let at = 5 + olen + 8;
        let c = buf.get(at..at + 2)?;
        Some(u16::from_be_bytes([c[0], c[1]]) as usize)
    };
    match count() {
        Some(n) if buf.starts_with(&MAGIC) => n.clamp(1, MAX_ENTRIES),
        _ => 1,
    }
}

/// Parses one batch into its changes, each with its origin and sequence.
pub fn parse(buf: &[u8]) -> Result<Vec<FleetMsg>, WireError> {
    let mut r = Reader { buf, at: 0 };
    if buf.len() > MAX_BYTES {
        return r.fail(MAX_BYTES, "batch longer than the largest valid one");
    }
    if r.take(4, "truncated magic")? != MAGIC {
        return r.fail(0, "bad magic or version");
    }
    let origin = r.origin()?;
    let first = r.seq()?;
    let at = r.at;
    let count = r.u16("truncated count")? as usize;
    if count == 0 || count > MAX_ENTRIES || first.checked_add(count as u64 - 1).is_none() {
        return r.fail(at, "bad count");
    }
    // At least 12 bytes per entry: a count the bytes cannot hold is
    // refused before anything is allocated for it.
    if count * 12 > buf.len() - r.at {
        return r.fail(at, "count larger than the batch");
    }
    let mut out = Vec::with_capacity(count);
    // One allocation per change (its element text): the origin is the
    // batch's, and a set name is shared by the run of changes naming it
    // (a consumer applies hundreds of thousands of changes a second after
    // an outage; three strings per change were a sixth of its time).
    let origin: Arc<str> = origin.into();
    let mut set_name: Arc<str> = Arc::from("");
    for i in 0..count as u64 {
        let kind = r.kind()?;
        let (expires, set, elem) = r.change(kind)?;
        if *set_name != *set {
            set_name = set.into();
        }
        out.push(FleetMsg {
            kind,
            origin: origin.clone(),
            seq: first + i,
            expires,
            set: set_name.clone(),
            elem: elem.to_string(),
        });
    }
    if r.at != buf.len() {
        return r.fail(r.at, "trailing bytes");
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Kind;

    fn m(seq: u64, kind: Kind) -> FleetMsg {
        FleetMsg {
            kind,
            origin: "node-a".into(),
            seq,
            expires: if kind == Kind::Add {
                1_700_000_000_000
            } else {
                0
            },
            set: "parapet-ban4".into(),
            elem: if kind == Kind::Flush {
                String::new()
            } else {
                format!("192.0.2.{}", seq % 250)
            },
        }
    }

    #[test]
    fn round_trip_and_limits() {
        let msgs = vec![m(5, Kind::Add), m(6, Kind::Del), m(7, Kind::Flush)];
        let mut b = Vec::new();
        assert_eq!(pack(&msgs, &mut b), 3);
        assert_eq!(parse(&b).unwrap(), msgs);
        assert_eq!(msg_id(&msgs), "node-a-5-7");
        // A sequence gap or another origin ends the batch.
        let gap = vec![m(5, Kind::Add), m(7, Kind::Add)];
        assert_eq!(pack(&gap, &mut b), 1);
        // At most MAX_ENTRIES.
        let many: Vec<_> = (1..=MAX_ENTRIES as u64 + 10)
            .map(|s| m(s, Kind::Add))
            .collect();
        assert_eq!(pack(&many, &mut b), MAX_ENTRIES);
        assert_eq!(parse(&b).unwrap().len(), MAX_ENTRIES);
        assert!(b.len() <= MAX_BYTES);
        assert_eq!(claimed_count(&b), MAX_ENTRIES);
    }

    #[test]
    fn claimed_count_peeks_the_header_only() {
        let mut b = Vec::new();
        pack(&[m(5, Kind::Add), m(6, Kind::Add), m(7, Kind::Del)], &mut b);
        assert_eq!(claimed_count(&b), 3);
        assert_eq!(claimed_count(&b[..21]), 3, "the entries are not read");
        assert_eq!(claimed_count(&b[..20]), 1, "truncated count");
        assert_eq!(claimed_count(b"junk"), 1);
        let mut lie = b.clone();
        lie[19..21].copy_from_slice(&[0xff, 0xff]);
        assert_eq!(claimed_count(&lie), MAX_ENTRIES, "bounded");
        lie[0] = b'X';
        assert_eq!(claimed_count(&lie), 1, "not a batch");
    }

    #[test]
    fn rejects_each_bad_field() {
        let mut good = Vec::new();
        pack(&[m(5, Kind::Add), m(6, Kind::Add)], &mut good);
        let set = |i: usize, v: &[u8]| {
            let mut b = good.clone();
            b[i..i + v.len()].copy_from_slice(v);
            b
        };
        // Offsets: magic 0, origin len 4, origin 5..11, first 11, count 19.
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (vec![], "truncated magic"),
            (set(0, b"PFM\x01"), "bad magic or version"),
            (set(5, b"."), "bad origin node id"),
            (set(11, &0u64.to_be_bytes()), "sequence 0"),
            (set(19, &[0, 0]), "bad count"),
            (set(11, &u64::MAX.to_be_bytes()), "bad count"),
            (set(19, &[0x10, 0]), "count larger than the batch"),
            (set(19, &[0, 3]), "truncated kind"),
            (set(19, &[0, 1]), "trailing bytes"),
            (set(21, &[9]), "unknown kind"),
            (set(21, &[2]), "expiry on a del or flush"),
            (good[..good.len() - 1].to_vec(), "truncated element"),
            (
                vec![0x41; MAX_BYTES + 1],
                "batch longer than the largest valid one",
            ),
        ];
        for (b, what) in cases {
            assert_eq!(parse(&b).unwrap_err().what, what, "{what}");
        }
    }

    proptest::proptest! {
        #[test]
        fn never_panics(b in proptest::collection::vec(proptest::num::u8::ANY, 0..300)) {
            let _ = parse(&b);
        }

        #[test]
        fn mutations_parse_or_fail_cleanly(i in 0usize..200, v in proptest::num::u8::ANY) {
            let msgs = vec![m(5, Kind::Add), m(6, Kind::Del), m(7, Kind::Flush)];
            let mut b = Vec::new();
            pack(&msgs, &mut b);
            let i = i % b.len();
            b[i] = v;
            if let Ok(p) = parse(&b) {
                let mut again = Vec::new();
                pack(&p, &mut again);
                proptest::prop_assert_eq!(again, b);
            }
        }
    }
}
