//! What a compile takes and gives back: the options in, the statistics or
//! the error out. The driver (`compile.rs`) and every stage use them, so
//! they live apart from both.

use parapet_image::{self as image, Backend, ImageError};
use std::fmt;

/// Knobs of [`compile`](crate::compile()).
#[derive(Clone, Debug)]
pub struct CompileOptions {
    /// Which backend to emit.
    pub backend: Backend,
    /// Bytes the image may take. The rule records themselves are a floor
    /// (an image can never be smaller than the linear one); above that, the
    /// trees stop cutting when their share is spent.
    pub max_memory: usize,
    /// A node with at most this many entries becomes a leaf (HyperSplit's
    /// `binth`).
    pub leaf_size: usize,
    /// Split the rules into partitions by address specificity.
    pub partition: bool,
    /// Depth cap of every tree (≤ [`image::MAX_DEPTH`]).
    pub max_depth: usize,
    /// Cap on cut-selection work, in entry-field visits, as a multiple of
    /// the entry count (plus a constant). Bounds build time on adversarial
    /// lists deterministically.
    pub work_factor: u64,
    /// Space factor of multi-way cuts (HiCuts' `spfac`): a node may cut a
    /// field into up to 256 equal parts as long as the children hold at most
    /// `spfac × n` entries in total. 0 disables multi-way cuts (binary range
    /// cuts only).
    pub spfac: f64,
    /// Keep the entries after one that covers a leaf's whole region
    /// (normally dropped: no packet of the leaf reaches them). Incremental
    /// deletes tombstone entries in place, and the entries a tombstone
    /// uncovers must then still be in the leaf.
    pub keep_shadowed: bool,
}

impl Default for CompileOptions {
    fn default() -> Self {
        CompileOptions {
            backend: Backend::Tree,
            max_memory: 256 << 20,
            leaf_size: 8,
            partition: true,
            max_depth: 48,
            work_factor: 4_000,
            spfac: 4.0,
            keep_shadowed: false,
        }
    }
}

/// Why a list could not be compiled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CompileError {
    /// More entries than the format allows.
    TooManyEntries(usize),
    /// More set references than one `u64` mask holds.
    TooManySets(usize),
    /// A constraint with more ranges than the format allows.
    TooManyRanges {
        /// The entry's rule id.
        rule_id: u32,
    },
    /// More rules with a stateful condition (`limit`) than the image's
    /// stateful table holds.
    TooManyStateful(usize),
    /// A rule with a time window (`-m time`, nft `meta time|hour|day`) and
    /// another stateful condition: an image entry names one stateful row;
    /// the linear engine evaluates both.
    TimeWindow {
        /// The rule's id.
        rule_id: u32,
    },
    /// A `-m recent --hitcount` above what the image's row and the BPF
    /// map's stamp ring hold (255): Linux 6.11 and later accept up to
    /// 65,535; the linear engine evaluates it.
    RecentHitcount {
        /// The rule's id.
        rule_id: u32,
        /// Its `--hitcount`.
        hitcount: u32,
    },
    /// A rule matching a field no hook fills (the conntrack entry's
    /// original source port and its addresses, a TCP option), or an address type set telling UNICAST from the
    /// route types the dataplane does not mirror (`UNREACHABLE`, …): the
    /// linear engine evaluates it.
    HostField {
        /// The rule's id.
        rule_id: u32,
        /// The field's name (`dtype`, `stype`, `ctorigsport`).
        field: String,
    },
    /// A masked comparison on a field the image does not key on (a set).
    MaskedField {
        /// The rule's id.
        rule_id: u32,
    },
    /// The produced image failed validation (a compiler bug).
    Image(ImageError),
}

impl fmt::Display for CompileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CompileError::TooManyEntries(n) => write!(
                f,
                "{n} entries exceed the image format's {} limit",
                image::MAX_ENTRIES
            ),
            CompileError::TooManySets(n) => write!(
                f,
                "{n} set references exceed the image format's {} limit",
                image::MAX_SET_REFS
            ),
            CompileError::TooManyRanges { rule_id } => write!(
                f,
                "rule {rule_id} has a match of more than {} ranges",
                image::MAX_RANGES
            ),
            CompileError::TooManyStateful(n) => write!(
                f,
                "{n} rules with a limit exceed the image format's {} limit per chain",
                image::stateful::MAX_ROWS
            ),
            CompileError::RecentHitcount { rule_id, hitcount } => write!(
                f,
                "rule {rule_id} has -m recent --hitcount {hitcount}: the compiled engines and the kernel dataplane keep {} time stamps per address (--hitcount up to {}, the limit of kernels before 6.11), so only the linear engine evaluates it (classify --engine linear); they refuse it rather than count short",
                image::stateful::RECENT_MAX_HITCOUNT + 1,
                image::stateful::RECENT_MAX_HITCOUNT
            ),
            CompileError::TimeWindow { rule_id } => write!(
                f,
                "rule {rule_id} has a time condition (-m time, meta time|hour|day) together with another stateful condition (limit, recent, hashlimit, quota or a dynamic set): only the linear engine evaluates the two in one rule so far (classify --engine linear, --stateful replay); the compiled engines and the kernel dataplane refuse it rather than drop one of them"
            ),
            CompileError::HostField { rule_id, field } if field == "ctorigsport" => write!(
                f,
                "rule {rule_id} matches the conntrack entry's original source port (--ctorigsrcport, ct original proto-src): only the linear engine evaluates it so far (classify --engine linear); the compiled engines and the kernel dataplane refuse it rather than guess"
            ),
            CompileError::HostField { rule_id, field }
                if ["ctorigsrc", "ctorigdst", "ctreplsrc", "ctrepldst"].contains(&field.as_str()) =>
            {
                write!(
                    f,
                    "rule {rule_id} matches the conntrack entry's {} address (--{field}, ct {} ip|ip6 {}): the packet key has no word for the entry's addresses yet, so only the linear engine evaluates it (classify --engine linear); the compiled engines and the kernel dataplane refuse it rather than guess",
                    match field.as_str() {
                        "ctorigsrc" => "original source",
                        "ctorigdst" => "original destination",
                        "ctreplsrc" => "reply source",
                        _ => "reply destination",
                    },
                    if field.starts_with("ctorig") { "original" } else { "reply" },
                    if field.ends_with("src") { "saddr" } else { "daddr" },
                )
            }
            CompileError::HostField { rule_id, field } if field == "string-rows" => write!(
                f,
                "rule {rule_id} has a -m string match past the image's {} distinct searches (pattern, --from, --to, --icase) per chain: only the linear engine evaluates so many (classify --engine linear); the compiled engines and the kernel dataplane refuse it rather than guess",
                image::patterns::MAX_ROWS
            ),
            CompileError::HostField { rule_id, field } => write!(
                f,
                "rule {rule_id} matches the IPv6 {} (-m addrtype, fib saddr|daddr type) by a type set that tells UNICAST from ANYCAST, BLACKHOLE, UNREACHABLE, PROHIBIT or THROW: for IPv6 the kernel reads those from a lookup in the whole routing table, the dataplane only the host's addresses of the `local` table (docs/hooks.md, \"Address and packet types\"), so the compiled engines and the kernel dataplane refuse it rather than guess; classify --engine linear evaluates it",
                if field == "stype" { "source address type" } else { "destination address type" }
            ),
            CompileError::MaskedField { rule_id } => write!(
                f,
                "rule {rule_id} has a masked comparison on a field the image cannot key on"
            ),
            CompileError::Image(e) => write!(f, "compiler produced a bad image: {e}"),
        }
    }
}

impl std::error::Error for CompileError {}

/// What the compiler did, for `explain()`.
#[derive(Clone, Debug, Default)]
pub struct CompileStats {
    /// Per partition.
    pub partitions: Vec<PartitionStats>,
    /// Wall time of the compile, in milliseconds.
    pub build_ms: f64,
    /// Image size in bytes.
    pub image_bytes: usize,
    /// Words of the entry records (the floor of any image).
    pub entry_words: usize,
    /// True when a tree stopped cutting because its memory share ran out.
    pub memory_limited: bool,
    /// True when a tree stopped cutting because the work budget ran out.
    pub work_limited: bool,
    /// Longest entry record in words.
    pub max_record_words: usize,
}

/// Shape of one partition's tree.
#[derive(Clone, Debug, Default)]
pub struct PartitionStats {
    /// Which rules it holds (e.g. "src+dst specific").
    pub name: String,
    /// Entries assigned to it.
    pub entries: usize,
    /// Tree nodes.
    pub nodes: usize,
    /// Leaves (before sharing identical ones).
    pub leaves: usize,
    /// Longest root-to-leaf path in nodes.
    pub depth: usize,
    /// Longest leaf.
    pub max_leaf: usize,
    /// Entry indices over all leaves, divided by entries: rule replication.
    pub replication: f64,
}
