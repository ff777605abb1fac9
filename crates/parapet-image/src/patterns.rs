//! The pattern table (image version 12): the distinct `-m string`
//! searches of an image, and the key words that say which of them a
//! packet's bytes hold.
//!
//! An entry's `-m string` is a masked constraint on field
//! [`FIELD`] (key words [`KEY_WORD`]`..+4`, bit `i` = pattern row `i` is
//! found), so both walkers check it with the masked comparison they
//! already have; the trees never cut on it. The bits are the walkers'
//! business: the Rust engines fill them from the packet's bytes
//! ([`hits`]) before the lookup; the BPF walker searches a row only when
//! a candidate's constraint reads its bit (bpf/lib/patterns.h), once per
//! packet.
//!
//! Table: header word [`crate::hw::PATTERNS_OFF`] (absolute word offset)
//! and [`crate::hw::N_PATTERNS`] rows of [`ROW_WORDS`] words
//! `[data_off, len | F_ICASE, from, to]`, then each row's data at
//! absolute word `data_off`: the pattern's `len` bytes (folded through
//! the kernel's `toupper` when [`F_ICASE`], as ts_kmp and ts_bm fold it
//! at prepare time), zero padded to a word, then `len` bytes of its
//! Knuth-Morris-Pratt prefix table (`fail[k]`: the longest proper border
//! of `pattern[..=k]`), zero padded. A row is found when the pattern lies
//! wholly inside bytes `[from, min(to, length))` of the datagram from its
//! IP header, comparing the kernel's `toupper` of each packet byte with
//! the stored byte under [`F_ICASE`] (parapet_model::string_match, which
//! is the specification).

use parapet_model::string_match::{kernel_toupper, StringMatch, MAX_PATTERN};

/// Field id of the pattern hits in constraints (apart from the fixed
/// fields, as the set field is; image version 12).
pub const FIELD: u32 = 30;
/// First key word of the pattern hits (4 words, least significant first).
pub const KEY_WORD: usize = 52;
/// Most rows: one bit each in the 128-bit hits.
pub const MAX_ROWS: usize = 128;
/// Words per row.
pub const ROW_WORDS: usize = 4;
/// Row flag (word 1, bit 8): `--icase`.
pub const F_ICASE: u32 = 0x100;

/// One row: a search without its `!` and algorithm (they do not change
/// what is found: the `!` is the constraint's, and bm and kmp find the
/// same occurrences).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Pattern {
    /// The pattern as written (1..=128 bytes).
    pub bytes: Vec<u8>,
    /// `--from`.
    pub from: u16,
    /// `--to`.
    pub to: u16,
    /// `--icase`.
    pub icase: bool,
}

impl Pattern {
    /// The row of a string match.
    pub fn of(m: &StringMatch) -> Pattern {
        Pattern {
            bytes: m.pattern.clone(),
            from: m.from,
            to: m.to,
            icase: m.icase,
        }
    }

    /// The bytes the table stores: folded when `icase`.
    fn stored(&self) -> Vec<u8> {
        if self.icase {
            self.bytes.iter().map(|&b| kernel_toupper(b)).collect()
        } else {
            self.bytes.clone()
        }
    }
}

/// The Knuth-Morris-Pratt prefix table of `p`.
pub fn prefix_table(p: &[u8]) -> Vec<u8> {
    let mut fail = vec![0u8; p.len()];
    let mut k = 0usize;
    for i in 1..p.len() {
        while k > 0 && p[i] != p[k] {
            k = fail[k - 1] as usize;
        }
        if p[i] == p[k] {
            k += 1;
        }
        fail[i] = k as u8;
    }
    fail
}

fn byte_words(b: &[u8]) -> impl Iterator<Item = u32> + '_ {
    b.chunks(4).map(|c| {
        let mut x = [0u8; 4];
        x[..c.len()].copy_from_slice(c);
        u32::from_le_bytes(x)
    })
}

/// The table's words for rows `rows`, placed at absolute word `at`.
pub fn table_words(rows: &[Pattern], at: usize) -> Vec<u32> {
    let mut out = vec![0u32; rows.len() * ROW_WORDS];
    for (i, p) in rows.iter().enumerate() {
        let stored = p.stored();
        let data_off = at + out.len();
        out.extend(byte_words(&stored));
        out.extend(byte_words(&prefix_table(&stored)));
        out[i * ROW_WORDS..(i + 1) * ROW_WORDS].copy_from_slice(&[
            data_off as u32,
            stored.len() as u32 | if p.icase { F_ICASE } else { 0 },
            p.from as u32,
            p.to as u32,
        ]);
    }
    out
}

fn bytes_at(w: &[u32], off: usize, len: usize) -> Option<Vec<u8>> {
    let words = w.get(off..off + len.div_ceil(4))?;
    let mut b: Vec<u8> = words.iter().flat_map(|x| x.to_le_bytes()).collect();
    b.truncate(len);
    Some(b)
}

/// A row as the image stores it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredRow {
    /// The pattern's bytes, folded when `icase`.
    pub stored: Vec<u8>,
    /// Its prefix table.
    pub fail: Vec<u8>,
    /// `--from`.
    pub from: u16,
    /// `--to`.
    pub to: u16,
    /// `--icase`.
    pub icase: bool,
}

/// Row `i` of image `w`, or `None` when it does not lie inside the image
/// or is malformed.
pub fn row(w: &[u32], i: usize) -> Option<StoredRow> {
    let off = *w.get(crate::hw::PATTERNS_OFF)? as usize;
    let r = w.get(off + i * ROW_WORDS..off + (i + 1) * ROW_WORDS)?;
    let len = (r[1] & 0xff) as usize;
    if len == 0 || len > MAX_PATTERN || r[1] & !(0xff | F_ICASE) != 0 {
        return None;
    }
    let (from, to) = (u16::try_from(r[2]).ok()?, u16::try_from(r[3]).ok()?);
    let data = r[0] as usize;
    let pat = bytes_at(w, data, len)?;
    let fail = bytes_at(w, data + len.div_ceil(4), len)?;
    Some(StoredRow {
        stored: pat,
        fail,
        from,
        to,
        icase: r[1] & F_ICASE != 0,
    })
}

/// Checks the table of image `w` (rows inside the image, lengths, prefix
/// tables that only move back): what the walkers rely on.
pub fn check(w: &[u32]) -> Result<(), String> {
    let n = w[crate::hw::N_PATTERNS] as usize;
    if n > MAX_ROWS {
        return Err("too many pattern rows".into());
    }
    for i in 0..n {
        let r = row(w, i).ok_or(format!("pattern row {i} is malformed"))?;
        if r.from > r.to {
            return Err(format!("pattern row {i} starts after its end"));
        }
        if r.fail.iter().enumerate().any(|(k, &f)| f as usize > k) {
            return Err(format!("pattern row {i} has a bad prefix table"));
        }
    }
    Ok(())
}

/// Whether row `(pat, from, to, icase)` is found in `datagram`: the
/// pattern wholly inside `[from, min(to, len))`.
fn found(pat: &[u8], from: u16, to: u16, icase: bool, datagram: &[u8]) -> bool {
    let end = datagram.len().min(to as usize);
    let Some(region) = datagram.get(from as usize..end) else {
        return false;
    };
    let fold = |c: u8| if icase { kernel_toupper(c) } else { c };
    region
        .windows(pat.len())
        .any(|win| win.iter().zip(pat).all(|(&c, &p)| fold(c) == p))
}

/// The hits of image `w`'s pattern rows in `datagram` (the packet from
/// its IP header; `None`: the packet does not say its bytes, and nothing
/// is found), as key words [`KEY_WORD`]`..+4` hold them.
pub fn hits(w: &[u32], datagram: Option<&[u8]>) -> u128 {
    let Some(d) = datagram else { return 0 };
    let n = (w[crate::hw::N_PATTERNS] as usize).min(MAX_ROWS);
    (0..n)
        .filter(|&i| row(w, i).is_some_and(|r| found(&r.stored, r.from, r.to, r.icase, d)))
        .fold(0u128, |m, i| m | 1 << i)
}

#[cfg(test)]
mod tests {
    use super::*;
    use parapet_model::string_match::StringAlgo;

    #[test]
    fn prefix_tables_are_the_borders() {
        assert_eq!(prefix_table(b"abab"), [0, 0, 1, 2]);
        assert_eq!(prefix_table(b"aaaa"), [0, 1, 2, 3]);
        assert_eq!(prefix_table(b"abcabd"), [0, 0, 0, 1, 2, 0]);
    }

    /// The table read back finds what the model's match finds, on
    /// patterns folded across the Latin-1 edge (0xff folds to 0xdf,
    /// which folds again to 0xbf: the stored byte must not be folded
    /// twice).
    #[test]
    fn hits_agree_with_the_model() {
        let ms: Vec<StringMatch> = [
            (&b"GET"[..], 0, 65535, true),
            (&[0xff, 0x41][..], 0, 65535, true),
            (&b"345"[..], 3, 6, false),
            (&b"f!"[..], 0, 65535, false),
        ]
        .iter()
        .map(|&(p, from, to, icase)| StringMatch {
            pattern: p.to_vec(),
            algo: StringAlgo::Kmp,
            from,
            to,
            icase,
            invert: false,
        })
        .collect();
        let rows: Vec<Pattern> = ms.iter().map(Pattern::of).collect();
        let mut w = vec![0u32; crate::HEADER_WORDS];
        w[crate::hw::PATTERNS_OFF] = w.len() as u32;
        w[crate::hw::N_PATTERNS] = rows.len() as u32;
        let t = table_words(&rows, w.len());
        w.extend(t);
        check(&w).unwrap();
        for d in [
            &b"get /"[..],
            &[0xdf, 0x61][..],
            &[0xff, 0x61][..],
            &b"0123456789f!"[..],
            &b"012345"[..],
        ] {
            let want = ms
                .iter()
                .enumerate()
                .filter(|(_, m)| m.found(d))
                .fold(0u128, |a, (i, _)| a | 1 << i);
            assert_eq!(hits(&w, Some(d)), want, "{d:?}");
        }
        assert_eq!(hits(&w, None), 0);
    }
}
