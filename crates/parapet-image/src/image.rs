//! A validated classifier image, and the checks that make it so.

use crate::{
    checksum, hw, kind, Backend, FIXED_FIELDS, FLAG_PURE_FIRST_MATCH, HEADER_WORDS, LEAF_BIT,
    MAGIC, MASKED_BIT, MAX_CONSTRAINTS, MAX_DEPTH, MAX_ENTRIES, MAX_FANOUT_BITS, MAX_LEAF,
    MAX_PARTITIONS, MAX_SET_REFS, NODE_BINARY, NODE_MULTI, NODE_WORDS, PARTITION_WORDS,
    RECORD_HEADER_WORDS, SET_FIELD, VERDICT_WORDS, VERSION, WIDE_BIT,
};
use std::fmt;

/// A classifier image: the words of the format, validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Image {
    words: Vec<u32>,
}

/// Why bytes are not a usable image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageError(pub String);

impl fmt::Display for ImageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid classifier image: {}", self.0)
    }
}

impl std::error::Error for ImageError {}

fn bad<T>(msg: impl Into<String>) -> Result<T, ImageError> {
    Err(ImageError(msg.into()))
}

impl Image {
    /// Wraps words the compiler produced, after validating them (the
    /// compiler's own output goes through the same checks as a loaded one,
    /// so a compiler bug is caught at build time, not by a walker).
    pub fn from_words(words: Vec<u32>) -> Result<Image, ImageError> {
        validate(&words)?;
        Ok(Image { words })
    }

    /// Parses and validates a little-endian byte image.
    pub fn from_bytes(bytes: &[u8]) -> Result<Image, ImageError> {
        Image::from_words(words_of_bytes(bytes)?)
    }

    /// The image as little-endian bytes, as written to files and BPF maps.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    /// The words.
    pub fn words(&self) -> &[u32] {
        &self.words
    }

    /// Header word `i` (see [`hw`]).
    pub fn header(&self, i: usize) -> u32 {
        self.words[i]
    }

    /// Which backend the image holds.
    pub fn backend(&self) -> Backend {
        if self.words[hw::BACKEND] == 0 {
            Backend::Linear
        } else {
            Backend::Tree
        }
    }

    /// Size in bytes.
    pub fn len_bytes(&self) -> usize {
        self.words.len() * 4
    }
}

/// The little-endian words of an image's bytes.
pub fn words_of_bytes(bytes: &[u8]) -> Result<Vec<u32>, ImageError> {
    if !bytes.len().is_multiple_of(4) {
        return bad("length is not a multiple of 4 bytes");
    }
    Ok(bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

/// The checks that need no knowledge of the regions: magic, version,
/// length and checksum. They catch truncation and corruption in transit;
/// [`Image::from_words`] runs them before the structural checks.
pub fn check_header(w: &[u32]) -> Result<(), ImageError> {
    if w.len() < HEADER_WORDS {
        return bad("shorter than the header");
    }
    if w[hw::MAGIC] != MAGIC {
        return bad("bad magic");
    }
    if w[hw::VERSION] != VERSION {
        return bad(format!("unsupported version {}", w[hw::VERSION]));
    }
    if w[hw::TOTAL_WORDS] as usize != w.len() {
        return bad("total_words does not match the length");
    }
    if w[hw::CHECKSUM] != checksum(w) {
        return bad("checksum mismatch");
    }
    Ok(())
}

/// A region `[off, off + len)` of the image, checked to lie inside it.
fn region(words: &[u32], off: usize, len: usize, what: &str) -> Result<(), ImageError> {
    match off.checked_add(len) {
        Some(end) if off >= HEADER_WORDS && end <= words.len() => Ok(()),
        _ => bad(format!("{what} region out of bounds")),
    }
}

/// Checks everything a walker relies on, so that walking a validated image
/// never indexes out of bounds, loops, or exceeds the stated bounds.
fn validate(w: &[u32]) -> Result<(), ImageError> {
    check_header(w)?;
    if w[hw::BACKEND] > 1 {
        return bad("unknown backend");
    }
    let h = |i: usize| w[i] as usize;
    let n_entries = h(hw::N_ENTRIES);
    let n_parts = h(hw::N_PARTITIONS);
    let n_nodes = h(hw::N_NODES);
    let n_verdicts = h(hw::N_VERDICTS);
    if n_entries > MAX_ENTRIES {
        return bad("too many entries");
    }
    if n_parts == 0 || n_parts > MAX_PARTITIONS {
        return bad("partition count out of range");
    }
    if h(hw::MAX_DEPTH) > MAX_DEPTH || h(hw::MAX_LEAF) > MAX_LEAF {
        return bad("stated bounds exceed the format's caps");
    }
    if h(hw::SET_REF_COUNT) > MAX_SET_REFS {
        return bad("too many set references");
    }
    region(
        w,
        h(hw::PARTITIONS_OFF),
        n_parts * PARTITION_WORDS,
        "partition",
    )?;
    region(
        w,
        h(hw::NODES_OFF),
        n_nodes.saturating_mul(NODE_WORDS),
        "node",
    )?;
    region(w, h(hw::LEAVES_OFF), h(hw::LEAVES_WORDS), "leaf")?;
    region(w, h(hw::ENTRY_TABLE_OFF), n_entries, "entry table")?;
    region(w, h(hw::ENTRIES_OFF), h(hw::ENTRIES_WORDS), "entry")?;
    region(
        w,
        h(hw::VERDICTS_OFF),
        n_verdicts.saturating_mul(VERDICT_WORDS),
        "verdict",
    )?;
    region(w, h(hw::FANOUT_OFF), h(hw::FANOUT_WORDS), "fanout")?;
    region(
        w,
        h(hw::STRINGS_OFF),
        h(hw::STRINGS_BYTES).div_ceil(4),
        "string",
    )?;
    if h(hw::N_PATTERNS) > 0 {
        region(
            w,
            h(hw::PATTERNS_OFF),
            h(hw::N_PATTERNS).saturating_mul(crate::patterns::ROW_WORDS),
            "pattern",
        )?;
        crate::patterns::check(w).map_err(ImageError)?;
    }
    let n_stateful = h(hw::N_STATEFUL);
    if n_stateful > crate::stateful::MAX_ROWS {
        return bad("too many stateful rows");
    }
    if n_stateful > 0 {
        region(
            w,
            h(hw::STATEFUL_OFF),
            n_stateful * crate::stateful::ROW_WORDS,
            "stateful",
        )?;
    }
    for r in 0..n_stateful {
        let row = &w[h(hw::STATEFUL_OFF) + r * crate::stateful::ROW_WORDS..];
        match row[1] & 0xff {
            crate::stateful::XT_LIMIT if row[1] >> 8 == 0 && row[3] > 0 => {}
            crate::stateful::NFT_LIMIT if row[1] >> 8 <= 1 => {}
            crate::stateful::RECENT
                // hitcount: any byte (≤ RECENT_MAX_HITCOUNT); the IPv6
                // prefix ≤ 128
                if row[1] >> 14 == 0 && row[4] >> 8 <= 128 => {}
            crate::stateful::HASHLIMIT
                if row[1] & 0xe000 == 0
                    && (row[1] >> 16) & 0xff <= 128
                    && row[1] >> 24 <= 128
                    && (row[3] != 0 || row[4] & 0xff != 0)
                    && row[4] >> 8 != 0
                    && row[5] != 0 => {}
            // A port above the service bits only with a constant one.
            crate::stateful::DYNSET
                if ((row[1] >> crate::stateful::DYNSET_PORT_SHIFT) & 3 == 3
                    || row[1] >> crate::stateful::DYNSET_PORT_CONST_SHIFT == 0)
                    && row[4] != 0
                    && (row[5] >> crate::stateful::DYNSET_UNIT_SHIFT) & 0xf <= 3
                    && (row[1] & crate::stateful::F_DYNSET_LIMIT == 0
                        || (row[5] & 0xf_ffff != 0 && row[5] >> 24 != 0)) => {}
            crate::stateful::QUOTA if row[1] >> 8 <= 1 => {}
            // seconds of the day < 86400; no other flag bits
            crate::stateful::TIME
                if row[1] & 0xc00 == 0
                    && row[1] >> crate::stateful::TIME_DAYTIME_STOP_SHIFT < 86_400
                    && row[4] & 0x00ff_ffff < 86_400 => {}
            // `--every` ≥ 1 with `--packet` below it; a threshold ≤ 2^31.
            crate::stateful::STATISTIC_NTH
                if row[1] & !(crate::stateful::F_INVERT | 0xff) == 0
                    && row[2] != 0
                    && row[3] < row[2] => {}
            crate::stateful::STATISTIC_RANDOM
                if row[1] & !(crate::stateful::F_INVERT | 0xff) == 0 && row[2] <= 1 << 31 => {}
            _ => return bad(format!("stateful row {r} has an unknown kind")),
        }
    }
    if h(hw::POLICY) >= n_verdicts {
        return bad("policy verdict index out of range");
    }
    // Verdicts.
    let strings = &w[h(hw::STRINGS_OFF)..h(hw::STRINGS_OFF) + h(hw::STRINGS_BYTES).div_ceil(4)];
    let string_bytes: Vec<u8> = strings.iter().flat_map(|x| x.to_le_bytes()).collect();
    for v in 0..n_verdicts {
        let row = &w[h(hw::VERDICTS_OFF) + v * VERDICT_WORDS..][..VERDICT_WORDS];
        match row[0] {
            0..=2 => {}
            3 => {
                let (off, len) = (row[1] as usize, row[2] as usize);
                match off.checked_add(len) {
                    Some(end) if end <= h(hw::STRINGS_BYTES) => {
                        if std::str::from_utf8(&string_bytes[off..end]).is_err() {
                            return bad("verdict string is not UTF-8");
                        }
                    }
                    _ => return bad("verdict string out of bounds"),
                }
            }
            _ => return bad("unknown verdict code"),
        }
    }
    // Entry records.
    let entries = &w[h(hw::ENTRIES_OFF)..][..h(hw::ENTRIES_WORDS)];
    let mut all_decide = true;
    let mut max_ranges = 0usize;
    for i in 0..n_entries {
        let off = w[h(hw::ENTRY_TABLE_OFF) + i] as usize;
        if off + RECORD_HEADER_WORDS > entries.len() {
            return bad(format!("entry {i} record out of bounds"));
        }
        let rec = &entries[off..];
        let len = rec[3] as usize;
        if len < RECORD_HEADER_WORDS || len > rec.len() {
            return bad(format!("entry {i} record length out of bounds"));
        }
        let rec = &rec[..len];
        let k = rec[1] & 0xf;
        if k > kind::RETURN {
            return bad(format!("entry {i} has an unknown kind"));
        }
        if k == kind::DECIDE && ((rec[1] >> 8) & 0xff) as usize >= n_verdicts {
            return bad(format!("entry {i} verdict out of range"));
        }
        if k == kind::RETURN && (rec[2] as usize <= i || rec[2] as usize > n_entries) {
            return bad(format!("entry {i} resumes at a bad index"));
        }
        if rec[1] & kind::STATEFUL_BIT != 0
            && (rec[1] >> kind::STATEFUL_ROW_SHIFT) as usize >= n_stateful
        {
            return bad(format!("entry {i} names a stateful row out of range"));
        }
        all_decide &= k == kind::DECIDE && rec[1] & kind::STATEFUL_BIT == 0;
        let nc = (rec[1] >> 16) & 0xff;
        if nc as usize > MAX_CONSTRAINTS {
            return bad(format!(
                "entry {i} has more than {MAX_CONSTRAINTS} constraints"
            ));
        }
        let mut p = RECORD_HEADER_WORDS;
        for _ in 0..nc {
            let Some(&c) = rec.get(p) else {
                return bad(format!("entry {i} constraints overrun the record"));
            };
            let field = c & 0xff;
            let r = (c >> 16) as usize;
            let body = if field == SET_FIELD {
                4
            } else if field == crate::patterns::FIELD {
                // the pattern hits: a wide masked comparison only
                if r != 0 || c & MASKED_BIT == 0 || c & WIDE_BIT == 0 {
                    return bad(format!("entry {i} has a malformed pattern constraint"));
                }
                if w[hw::FLAGS] & crate::FLAG_PATTERNS == 0 {
                    return bad(format!("entry {i} tests a pattern without FLAG_PATTERNS"));
                }
                8
            } else if field < FIXED_FIELDS && c & MASKED_BIT != 0 {
                if r != 0 {
                    return bad(format!("entry {i} has a masked constraint with ranges"));
                }
                if c & WIDE_BIT != 0 {
                    8
                } else {
                    2
                }
            } else if field < FIXED_FIELDS {
                max_ranges = max_ranges.max(r);
                r * if c & WIDE_BIT != 0 { 8 } else { 2 }
            } else {
                return bad(format!("entry {i} constrains an unknown field"));
            };
            p += 1 + body;
            if p > len {
                return bad(format!("entry {i} constraints overrun the record"));
            }
        }
        if p != len {
            return bad(format!("entry {i} record has trailing words"));
        }
    }
    if max_ranges > h(hw::MAX_RANGES) {
        return bad("a constraint has more ranges than max_ranges says");
    }
    if (w[hw::FLAGS] & FLAG_PURE_FIRST_MATCH != 0) && !all_decide {
        return bad("PURE_FIRST_MATCH set but some entry is not a decision");
    }
    // Leaves are checked as the nodes reach them.
    let leaves = &w[h(hw::LEAVES_OFF)..][..h(hw::LEAVES_WORDS)];
    let check_leaf = |off: usize| -> Result<(), ImageError> {
        let Some(&count) = leaves.get(off) else {
            return bad("leaf out of bounds");
        };
        let count = count as usize;
        if count > h(hw::MAX_LEAF) || off + 1 + count > leaves.len() {
            return bad("leaf longer than max_leaf or the pool");
        }
        let mut prev: Option<u32> = None;
        for &idx in &leaves[off + 1..off + 1 + count] {
            if idx as usize >= n_entries || prev.is_some_and(|p| idx <= p) {
                return bad("leaf indices not increasing entry indices");
            }
            prev = Some(idx);
        }
        Ok(())
    };
    let nodes = &w[h(hw::NODES_OFF)..][..n_nodes * NODE_WORDS];
    // Depth of each node from its partition's root; children come after
    // parents, so one forward pass computes every depth.
    let mut depth = vec![0u32; n_nodes];
    let mut reached = vec![false; n_nodes];
    for p in 0..n_parts {
        let root = w[h(hw::PARTITIONS_OFF) + p * PARTITION_WORDS];
        if root & LEAF_BIT != 0 {
            check_leaf((root & !LEAF_BIT) as usize)?;
        } else if (root as usize) < n_nodes {
            if reached[root as usize] {
                return bad("two partitions share a root");
            }
            reached[root as usize] = true;
            depth[root as usize] = 1;
        } else {
            return bad("partition root out of range");
        }
    }
    let fanout = &w[h(hw::FANOUT_OFF)..][..h(hw::FANOUT_WORDS)];
    for i in 0..n_nodes {
        let node = &nodes[i * NODE_WORDS..][..NODE_WORDS];
        if !reached[i] {
            return bad(format!("node {i} is not reachable from a root"));
        }
        if depth[i] as usize > h(hw::MAX_DEPTH) {
            return bad("a path is deeper than max_depth");
        }
        if node[0] & 0xff >= FIXED_FIELDS {
            return bad(format!("node {i} cuts an unknown field"));
        }
        let children: &[u32] = match (node[0] >> 8) & 0xff {
            NODE_BINARY => &node[1..3],
            NODE_MULTI => {
                let bits = node[2] & 0xff;
                let shift = (node[2] >> 8) & 0xff;
                if bits == 0 || bits > MAX_FANOUT_BITS || bits + shift > 32 {
                    return bad(format!("node {i} has a bad fanout"));
                }
                let off = node[1] as usize;
                match fanout.get(off..off + (1usize << bits)) {
                    Some(c) => c,
                    None => return bad(format!("node {i} fanout out of bounds")),
                }
            }
            _ => return bad(format!("node {i} has an unknown kind")),
        };
        for &child in children {
            if child & LEAF_BIT != 0 {
                check_leaf((child & !LEAF_BIT) as usize)?;
            } else {
                let c = child as usize;
                if c <= i || c >= n_nodes {
                    return bad(format!("node {i} has a child that is not after it"));
                }
                if reached[c] {
                    return bad(format!("node {c} has two parents"));
                }
                reached[c] = true;
                depth[c] = depth[i] + 1;
            }
        }
    }
    Ok(())
}
