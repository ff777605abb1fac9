//! The classifier image: constants of the format, the header, and the
//! validation a walker runs before trusting an image.
//!
//! The format itself is specified in `docs/image-format.md`; the constants
//! here are the single source of truth in Rust and the BPF walker's C header
//! must agree with them (the doc's tables list the same numbers).

use std::fmt;

/// `PRPT` read as a little-endian `u32`.
pub const MAGIC: u32 = 0x5450_5250;
/// The format version this crate writes and reads.
pub const VERSION: u32 = 1;
/// Words in the header.
pub const HEADER_WORDS: usize = 32;
/// Words per tree node.
pub const NODE_WORDS: usize = 8;
/// Words per partition descriptor.
pub const PARTITION_WORDS: usize = 4;
/// Words per verdict-table row.
pub const VERDICT_WORDS: usize = 4;

/// The reject type stored in the 4th word of a verdict row (the kernel's
/// `PARAPET_REJECT_*`, `parapet_dataplane::abi::reject`): which answer a
/// REJECT sends. `None` (no `--reject-with`) is 0, iptables' default (ICMP
/// port unreachable of the packet's family); iptables' short aliases
/// (`port-unreach`, …) and nft's `icmpx` types are understood; an unknown
/// name is 255 (the kernel drops without answering).
pub fn reject_code(with: Option<&str>) -> u32 {
    let Some(w) = with else { return 0 };
    match w {
        "icmp-net-unreachable" | "net-unreach" => 1,
        "icmp-host-unreachable" | "host-unreach" => 2,
        "icmp-port-unreachable" => 3,
        "icmp-proto-unreachable" | "proto-unreach" => 4,
        "icmp-net-prohibited" | "net-prohib" => 5,
        "icmp-host-prohibited" | "host-prohib" => 6,
        "icmp-admin-prohibited" | "admin-prohib" => 7,
        "tcp-reset" | "tcp-rst" => 8,
        "icmp6-no-route" | "no-route" => 9,
        "icmp6-adm-prohibited" | "adm-prohibited" => 10,
        "icmp6-addr-unreachable" | "addr-unreach" => 11,
        "icmp6-port-unreachable" => 12,
        "icmp6-policy-fail" | "policy-fail" => 13,
        "icmp6-reject-route" | "reject-route" => 14,
        "icmpx-no-route" => 15,
        "icmpx-admin-prohibited" => 16,
        "icmpx-host-unreachable" => 17,
        // the alias means the table's family's port unreachable
        "icmpx-port-unreachable" | "port-unreach" => 18,
        _ => 255,
    }
}
/// Words of an entry record's header.
pub const RECORD_HEADER_WORDS: usize = 4;
/// Words of the packet key.
pub const KEY_WORDS: usize = 26;
/// Deepest tree the format allows (root-to-leaf node count).
pub const MAX_DEPTH: usize = 64;
/// Most entry indices one leaf may hold (`bpf_loop`'s iteration limit).
pub const MAX_LEAF: usize = 1 << 23;
/// Most entries an image may hold.
pub const MAX_ENTRIES: usize = 1 << 23;
/// Most partitions (trees walked per lookup).
pub const MAX_PARTITIONS: usize = 8;
/// Most set references (one `u64` membership mask).
pub const MAX_SET_REFS: usize = 64;
/// Most ranges in one constraint (16 bits of the constraint word).
pub const MAX_RANGES: usize = 0xffff;
/// Bit 31 of a child ref: the ref is a leaf offset, not a node index.
pub const LEAF_BIT: u32 = 0x8000_0000;
/// Bit 15 of a constraint word: ranges are 8 words (128-bit bounds).
pub const WIDE_BIT: u32 = 0x8000;
/// Field id of the set-membership constraint.
pub const SET_FIELD: u32 = 12;
/// Node kind (bits 8..=15 of node word 0): binary range cut.
pub const NODE_BINARY: u32 = 0;
/// Node kind: equal-width multi-way cut over a ≤ 32-bit span.
pub const NODE_MULTI: u32 = 1;
/// Most children of a multi-way node, as a power of two.
pub const MAX_FANOUT_BITS: u32 = 8;
/// Header flag: every entry is a Decide entry.
pub const FLAG_PURE_FIRST_MATCH: u32 = 1;

/// Entry kinds as the record's word 1 encodes them.
pub mod kind {
    /// A terminal decision.
    pub const DECIDE: u32 = 0;
    /// LOG.
    pub const LOG: u32 = 1;
    /// Counter-only rule.
    pub const COUNT: u32 = 2;
    /// A jump or goto matched.
    pub const JUMP: u32 = 3;
    /// RETURN: continue at `resume`.
    pub const RETURN: u32 = 4;
    /// Bit 4: a Return that is reported as a matched rule.
    pub const COUNTED_BIT: u32 = 0x10;
}

/// The backends an image can hold.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    /// One partition whose root is a leaf of every entry: the flat scan.
    Linear = 0,
    /// Range-cut decision trees over rule partitions.
    Tree = 1,
}

/// Header word indices (see the doc's header table).
pub mod hw {
    #![allow(missing_docs)]
    pub const MAGIC: usize = 0;
    pub const VERSION: usize = 1;
    pub const BACKEND: usize = 2;
    pub const FLAGS: usize = 3;
    pub const TOTAL_WORDS: usize = 4;
    pub const CHECKSUM: usize = 5;
    pub const N_ENTRIES: usize = 6;
    pub const N_PARTITIONS: usize = 7;
    pub const POLICY: usize = 8;
    pub const MAX_DEPTH: usize = 9;
    pub const MAX_LEAF: usize = 10;
    pub const MAX_RANGES: usize = 11;
    pub const SET_REF_COUNT: usize = 12;
    pub const PARTITIONS_OFF: usize = 13;
    pub const NODES_OFF: usize = 14;
    pub const N_NODES: usize = 15;
    pub const LEAVES_OFF: usize = 16;
    pub const LEAVES_WORDS: usize = 17;
    pub const ENTRY_TABLE_OFF: usize = 18;
    pub const ENTRIES_OFF: usize = 19;
    pub const ENTRIES_WORDS: usize = 20;
    pub const VERDICTS_OFF: usize = 21;
    pub const N_VERDICTS: usize = 22;
    pub const STRINGS_OFF: usize = 23;
    pub const STRINGS_BYTES: usize = 24;
    pub const FANOUT_OFF: usize = 25;
    pub const FANOUT_WORDS: usize = 26;
}

/// FNV-1a over the image's bytes with the checksum word read as zero.
pub fn checksum(words: &[u32]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for (i, &w) in words.iter().enumerate() {
        let w = if i == hw::CHECKSUM { 0 } else { w };
        for b in w.to_le_bytes() {
            h ^= b as u32;
            h = h.wrapping_mul(0x0100_0193);
        }
    }
    h
}

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
        if !bytes.len().is_multiple_of(4) {
            return bad("length is not a multiple of 4 bytes");
        }
        let words = bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        Image::from_words(words)
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
        all_decide &= k == kind::DECIDE;
        let nc = (rec[1] >> 16) & 0xff;
        let mut p = RECORD_HEADER_WORDS;
        for _ in 0..nc {
            let Some(&c) = rec.get(p) else {
                return bad(format!("entry {i} constraints overrun the record"));
            };
            let field = c & 0xff;
            let r = (c >> 16) as usize;
            let body = if field == SET_FIELD {
                4
            } else if field < SET_FIELD {
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
        if node[0] & 0xff >= SET_FIELD {
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
