//! The compiler: decision list → classifier image, in four stages (the
//! split of DPDK `lib/acl`: build, then generate):
//!
//! 1. [`lower`](crate::lower): each entry becomes a box — per field, its
//!    ranges (and their hull), plus a set-membership mask.
//! 2. [`partition`](crate::partition): the entries are split into a few
//!    partitions by which address fields are specific (EffiCuts /
//!    CutSplit).
//! 3. [`tree`](crate::tree): each partition becomes a range-cut tree
//!    (HyperSplit) within a memory and a work budget.
//! 4. [`emit`](crate::emit): everything is laid out as the flat image of
//!    `docs/image-format.md`.
//!
//! This file is the driver: options, errors, statistics, and the order of
//! the stages.

use crate::emit::{entry_records, image_words};
use crate::image::{self, Backend, Image, ImageError};
use crate::lower::lower;
use crate::partition::{partition, BothAddresses};
use crate::tree::{build_trees, Budget};
use parapet_model::DecisionList;
use std::fmt;
use std::time::Instant;

/// Knobs of [`compile`].
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

/// Compiles a decision list into a classifier image.
pub fn compile(
    list: &DecisionList,
    opts: &CompileOptions,
) -> Result<(Image, CompileStats), CompileError> {
    let started = Instant::now();
    let (image, stats, merged) = compile_with(list, opts, BothAddresses::JoinLarger)?;
    // Rules pinning both addresses join a single-address tree (see
    // `partition`), which pays on prefix lists like ClassBench. Where a
    // budget stopped the cuts (lists whose rules replicate on other
    // fields, e.g. `random_ruleset`'s), the bigger merged tree stops
    // earlier and its leaves grow (random:10000: 462 → 864 entry checks
    // per lookup): then the unmerged partitions are built instead, at
    // most doubling the build time of such lists.
    if merged && (stats.work_limited || stats.memory_limited) {
        let (image, mut stats, _) = compile_with(list, opts, BothAddresses::OwnPartition)?;
        stats.build_ms = started.elapsed().as_secs_f64() * 1e3;
        return Ok((image, stats));
    }
    Ok((image, stats))
}

/// [`compile`] with the rules pinning both addresses placed as `both` says;
/// also returns whether some partition merged them into a single-address
/// one.
fn compile_with(
    list: &DecisionList,
    opts: &CompileOptions,
    both: BothAddresses,
) -> Result<(Image, CompileStats, bool), CompileError> {
    let started = Instant::now();
    let n = list.entries.len();
    if n > image::MAX_ENTRIES {
        return Err(CompileError::TooManyEntries(n));
    }
    if list.set_ref_count > image::MAX_SET_REFS {
        return Err(CompileError::TooManySets(list.set_ref_count));
    }
    let lowered = lower(list)?;
    let records = entry_records(list, &lowered.boxes)?;
    let partitions = partition(&lowered.boxes, opts, both);
    let budget = Budget::new(opts, n, records.fixed_words(partitions.len()));
    let forest = build_trees(&lowered, &partitions, opts, &budget);
    let words = image_words(list, opts, &records, &forest);
    let img = Image::from_words(words).map_err(CompileError::Image)?;
    let stats = CompileStats {
        image_bytes: img.len_bytes(),
        entry_words: records.records.len(),
        memory_limited: forest.memory_limited,
        work_limited: forest.work_limited,
        max_record_words: records.max_record_words,
        partitions: forest.stats,
        build_ms: started.elapsed().as_secs_f64() * 1e3,
    };
    let merged = partitions.iter().any(|p| p.merged);
    Ok((img, stats, merged))
}
