//! # parapet-image
//!
//! The one owner of parapet's classifier image format (specified in
//! `docs/image-format.md`), the way `regex-automata`'s `util/wire.rs` owns
//! every serialized DFA: the constants, the header and its checksum, the
//! validation a walker runs before trusting an image ([`Image`]), the packet
//! key layout and its one builder ([`KeyWords`]), the REJECT type codes
//! ([`reject`]) and the conntrack state codes ([`ct`]).
//!
//! `parapet-compile` writes images with these, its Rust walkers and
//! `parapet-dataplane` read them, and the BPF walker's `bpf/image.h` is
//! checked against them by the dataplane's layout probe.

pub mod ct;
mod image;
mod key;
pub mod patterns;
pub mod reject;

pub use image::{check_header, words_of_bytes, Image, ImageError};
pub use key::{u128_at, KeyWords, KEY_OFF, KEY_SETS, KEY_WIDE};

/// `PRPT` read as a little-endian `u32`.
pub const MAGIC: u32 = 0x5450_5250;
/// The format version this crate writes and reads.
pub const VERSION: u32 = 13;
/// Words in the header.
pub const HEADER_WORDS: usize = 32;
/// Words per tree node.
pub const NODE_WORDS: usize = 8;
/// Words per partition descriptor.
pub const PARTITION_WORDS: usize = 4;
/// Words per verdict-table row.
pub const VERDICT_WORDS: usize = 4;

/// Words of an entry record's header.
pub const RECORD_HEADER_WORDS: usize = 4;
/// Words of the packet key.
pub const KEY_WORDS: usize = 57;
/// Deepest tree the format allows (root-to-leaf node count).
pub const MAX_DEPTH: usize = 64;
/// Most entry indices one leaf may hold (`bpf_loop`'s iteration limit).
pub const MAX_LEAF: usize = 1 << 23;
/// Most entries an image may hold.
pub const MAX_ENTRIES: usize = 1 << 23;
/// Most partitions (trees walked per lookup).
pub const MAX_PARTITIONS: usize = 8;
/// Most constraints in one entry record (the walkers' loop bound: one per
/// fixed field and the set field, with room for fields to come).
pub const MAX_CONSTRAINTS: usize = 24;
/// Most set references (one `u64` membership mask).
pub const MAX_SET_REFS: usize = 64;
/// Most ranges in one constraint (16 bits of the constraint word).
pub const MAX_RANGES: usize = 0xffff;
/// Bit 31 of a child ref: the ref is a leaf offset, not a node index.
pub const LEAF_BIT: u32 = 0x8000_0000;
/// Bit 15 of a constraint word: ranges are 8 words (128-bit bounds).
pub const WIDE_BIT: u32 = 0x8000;
/// Bit 14 of a constraint word: a masked comparison, `key & mask == value`
/// (its range count is 0; its body is the mask then the value, one word
/// each, or four each with [`WIDE_BIT`]).
pub const MASKED_BIT: u32 = 0x4000;
/// Bit 13 of a masked constraint word: `!=` (the masked bits differ).
pub const MASK_NEGATE_BIT: u32 = 0x2000;
/// Field ids below this are fixed fields (`Field::FIXED`, the key's
/// `KEY_OFF`).
pub const FIXED_FIELDS: u32 = 30;
/// Field id of the set-membership constraint (apart from the fixed
/// fields, so fields can be added without moving it).
pub const SET_FIELD: u32 = 31;
/// Node kind (bits 8..=15 of node word 0): binary range cut.
pub const NODE_BINARY: u32 = 0;
/// Node kind: equal-width multi-way cut over a ≤ 32-bit span.
pub const NODE_MULTI: u32 = 1;
/// Most children of a multi-way node, as a power of two.
pub const MAX_FANOUT_BITS: u32 = 8;
/// Header flag: every entry is a Decide entry.
pub const FLAG_PURE_FIRST_MATCH: u32 = 1;
/// Header flag: some entry matches an address type (key words 34, 35):
/// the dataplane types the packet's addresses only for such images
/// (docs/hooks.md, "Address and packet types").
pub const FLAG_ADDR_TYPES: u32 = 2;
/// Header flag: some entry tests a TCP option kind (field ids 27, 28; key
/// words 44..=51, image version 11): the dataplane walks the segment's
/// option area only for such images (docs/dataplane.md, "TCP options").
pub const FLAG_TCP_OPTIONS: u32 = 4;
/// Header flag: some entry tests a `-m string` pattern (field
/// [`patterns::FIELD`], key words 52..=55, image version 12): the dataplane
/// copies the datagram and searches it only for such images
/// (docs/dataplane.md, "String matches").
pub const FLAG_PATTERNS: u32 = 8;
/// Header flag: some entry reads the reverse-path outcome (field id 29,
/// key word 56, image version 13): the dataplane looks the packet's
/// source up in the host's routes (`bpf_fib_lookup`) only for such images
/// (docs/dataplane.md, "Reverse path").
pub const FLAG_REV_PATH: u32 = 16;

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
    /// Bit 5: the entry has a stateful condition, checked once its
    /// constraints match; bits 24..=31 of the word are its row in the
    /// stateful table ([`crate::stateful`]).
    pub const STATEFUL_BIT: u32 = 0x20;
    /// Shift of the stateful row index in word 1.
    pub const STATEFUL_ROW_SHIFT: u32 = 24;
}

/// The stateful table: one row of [`stateful::ROW_WORDS`] words per rule
/// with a stateful condition (every entry of that rule names the same row,
/// so they share one bucket, as the kernel's rule has one), and per
/// condition of a rule with several (`-m recent … -m limit …`: each guard
/// entry names its condition's row).
///
/// Row: `[rule_id, kind | flags, p0, p1, p2, p3, 0, 0]`.
/// - [`stateful::XT_LIMIT`] (`xt_limit.c`): `p0 = avg`, `p1 = burst`; the
///   walker derives cost and cap with the kernel's `HZ`.
/// - [`stateful::NFT_LIMIT`] (`nft_limit.c`, packets): `p0..p1 = cost`,
///   `p2..p3 = tokens_max` (nanoseconds, low word first); flag
///   [`stateful::F_OVER`] inverts the answer.
/// - [`stateful::RECENT`] (`xt_recent.c`, image version 2): flag bits 8..9
///   the command ([`stateful::RECENT_CMD_SHIFT`]: 0 `--set`, 1 `--rcheck`,
///   2 `--update`, 3 `--remove`), [`stateful::F_RDEST`],
///   [`stateful::F_INVERT`], [`stateful::F_REAP`], [`stateful::F_RTTL`]
///   (image version 7); `p0` = the table id
///   (FNV-1a of `--name`), `p1` = `--seconds`, `p2` = `--hitcount` (bits
///   0..7) | the IPv6 mask's prefix length << 8, `p3` = the IPv4
///   mask.
/// - [`stateful::HASHLIMIT`] (`xt_hashlimit.c`, image version 3): word 1
///   holds the mode bits << [`stateful::HASHLIMIT_MODE_SHIFT`],
///   [`stateful::F_ABOVE`], the source and destination prefix lengths
///   << [`stateful::HASHLIMIT_SRCMASK_SHIFT`] /
///   [`stateful::HASHLIMIT_DSTMASK_SHIFT`]; `p0` = the table id (FNV-1a of
///   `--hashlimit-name`), `p1` = `avg`'s low word, `p2` = `avg`'s high
///   byte | burst << [`stateful::HASHLIMIT_BURST_SHIFT`], `p3` =
///   `--hashlimit-htable-expire` (ms).
/// - [`stateful::DYNSET`] (`nft_dynset.c`/`nft_lookup.c`, nft dynamic
///   sets): word 1 holds the op << [`stateful::DYNSET_OP_SHIFT`] (0 `add`,
///   1 `update`, 2 `delete`, 3 lookup), [`stateful::F_RDEST`] (the key is
///   the destination address), [`stateful::F_INVERT`] (lookup `!=`),
///   [`stateful::F_DYNSET_LIMIT`] (the element has a limit) and
///   [`stateful::F_DYNSET_OVER`] (`limit rate over`), and (image version
///   10) the key's service << [`stateful::DYNSET_PORT_SHIFT`] (0 none: the
///   key is the address alone, 1 the source port, 2 the destination port,
///   3 the port << [`stateful::DYNSET_PORT_CONST_SHIFT`]); `p0` = the set id
///   (FNV-1a of `TABLE/SET`), `p1` = the timeout of new or refreshed
///   elements in ms (0: none), `p2` = the set's size, `p3` = the limit:
///   rate (bits 0..19) | unit (bits 20..23: 0 second, 1 minute, 2 hour,
///   3 day) | burst << 24; a packet costs `unit × 1e9 / rate` ns of a
///   bucket of `cost × burst` ns.
/// - [`stateful::QUOTA`] (`nft_quota.c`): `p0..p1` the quota in bytes,
///   `p2..p3` the bytes counted at load (`used`), low word first; flag
///   [`stateful::F_OVER`]: `quota over`.
/// - [`stateful::TIME`] (`xt_time.c`, image version 5; `-m time`, nft
///   `meta time|hour|day`): flags [`stateful::F_KERNEL_TZ`] (`--kerneltz`)
///   and [`stateful::F_CONTIGUOUS`], the last second of the day
///   (`--timestop`) << [`stateful::TIME_DAYTIME_STOP_SHIFT`] in word 1;
///   `p0` = `--datestart`, `p1` = `--datestop` (UTC seconds since the
///   epoch, clamped to `0..=u32::MAX`), `p2` = the first second of the day
///   (`--timestart`, bits 0..16) | weekdays << 24 (bit 1 Monday … 7
///   Sunday), `p3` = month days (bits 1..31). The clock: UTC seconds from
///   the kernel's boot time plus an offset user space writes
///   (docs/dataplane.md, "Wall-clock time").
/// - [`stateful::STATISTIC_NTH`] (`xt_statistic.c`, image version 9):
///   `p0` = `--every` (≥ 1), `p1` = `--packet` (< `p0`); flag
///   [`stateful::F_INVERT`]: `!`. The packets counted live in the row's
///   bucket; packet `i` (from 0, since the generation began) matches when
///   `i mod p0 == p1`.
/// - [`stateful::STATISTIC_RANDOM`] (`xt_statistic.c`, image version 9):
///   `p0` = the threshold (`--probability` × 2^31, rounded; ≤ 2^31); the
///   packet matches when a random word's low 31 bits are below it; flag
///   [`stateful::F_INVERT`]: `!`.
pub mod stateful {
    /// Words per row.
    pub const ROW_WORDS: usize = 8;
    /// Most rows an image may hold (the row index is 8 bits of word 1).
    pub const MAX_ROWS: usize = 256;
    /// Row kind: iptables `-m limit`.
    pub const XT_LIMIT: u32 = 1;
    /// Row kind: nft `limit rate … packets`.
    pub const NFT_LIMIT: u32 = 2;
    /// Row flag (bits 8..): nft `limit rate over`.
    pub const F_OVER: u32 = 0x100;
    /// Row kind: iptables `-m recent`.
    pub const RECENT: u32 = 3;
    /// Shift of a recent row's command (2 bits) in word 1.
    pub const RECENT_CMD_SHIFT: u32 = 8;
    /// Recent row flag: `--rdest`.
    pub const F_RDEST: u32 = 0x400;
    /// Recent row flag: `!`.
    pub const F_INVERT: u32 = 0x800;
    /// Recent row flag: `--reap`.
    pub const F_REAP: u32 = 0x1000;
    /// Recent row flag: `--rttl` (image version 7).
    pub const F_RTTL: u32 = 0x2000;
    /// The largest `--hitcount` a recent row holds (the kernel's).
    pub const RECENT_MAX_HITCOUNT: u32 = 255;
    /// Row kind: iptables `-m hashlimit` (image version 3).
    pub const HASHLIMIT: u32 = 4;
    /// Shift of a hashlimit row's `--hashlimit-mode` bits (4, the kernel's
    /// `XT_HASHLIMIT_HASH_*`) in word 1.
    pub const HASHLIMIT_MODE_SHIFT: u32 = 8;
    /// Hashlimit row flag: `--hashlimit-above`.
    pub const F_ABOVE: u32 = 0x1000;
    /// Shift of a hashlimit row's `--hashlimit-srcmask` (8 bits) in word 1.
    pub const HASHLIMIT_SRCMASK_SHIFT: u32 = 16;
    /// Shift of a hashlimit row's `--hashlimit-dstmask` (8 bits) in word 1.
    pub const HASHLIMIT_DSTMASK_SHIFT: u32 = 24;
    /// Shift of a hashlimit row's burst in `p2`.
    pub const HASHLIMIT_BURST_SHIFT: u32 = 8;
    /// Row kind: an nft dynamic set (`add`/`update`/`delete @s`, lookup).
    pub const DYNSET: u32 = 5;
    /// Shift of a dynset row's op (2 bits) in word 1.
    pub const DYNSET_OP_SHIFT: u32 = 8;
    /// Dynset row flag: the element has a limit.
    pub const F_DYNSET_LIMIT: u32 = 0x1000;
    /// Dynset row flag: `limit rate over`.
    pub const F_DYNSET_OVER: u32 = 0x2000;
    /// Shift of a dynset row's key service (2 bits: 0 none, 1 the source
    /// port, 2 the destination port, 3 a constant) in word 1 (image
    /// version 10).
    pub const DYNSET_PORT_SHIFT: u32 = 14;
    /// Shift of a dynset row's constant port (16 bits) in word 1.
    pub const DYNSET_PORT_CONST_SHIFT: u32 = 16;
    /// Shift of a dynset row's limit unit (4 bits) in `p3`.
    pub const DYNSET_UNIT_SHIFT: u32 = 20;
    /// Shift of a dynset row's limit burst (8 bits) in `p3`.
    pub const DYNSET_BURST_SHIFT: u32 = 24;
    /// Row kind: nft `quota [over] N bytes` (flag [`F_OVER`]: `over`).
    pub const QUOTA: u32 = 6;
    /// Row kind: a time window (`xt_time`'s `time_mt`), image version 5.
    pub const TIME: u32 = 7;
    /// Row kind: `-m statistic --mode nth` (image version 9; flag
    /// [`F_INVERT`]: `!`).
    pub const STATISTIC_NTH: u32 = 8;
    /// Row kind: `-m statistic --mode random` (image version 9; flag
    /// [`F_INVERT`]: `!`).
    pub const STATISTIC_RANDOM: u32 = 9;
    /// Time row flag: `--kerneltz` (the kernel's `sys_tz`, not UTC).
    pub const F_KERNEL_TZ: u32 = 0x100;
    /// Time row flag: `--contiguous`.
    pub const F_CONTIGUOUS: u32 = 0x200;
    /// Shift of a time row's `--timestop` (17 bits) in word 1.
    pub const TIME_DAYTIME_STOP_SHIFT: u32 = 12;
    /// Shift of a time row's weekday bits in `p2`.
    pub const TIME_WEEKDAYS_SHIFT: u32 = 24;
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
    pub const STATEFUL_OFF: usize = 27;
    pub const N_STATEFUL: usize = 28;
    /// The pattern table (image version 12; [`crate::patterns`]).
    pub const PATTERNS_OFF: usize = 29;
    /// Rows of the pattern table.
    pub const N_PATTERNS: usize = 30;
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
