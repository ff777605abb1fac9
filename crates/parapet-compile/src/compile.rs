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
//! This file is the driver: it runs the stages in order. Its options,
//! statistics and errors are in `api.rs`.

use crate::api::{CompileError, CompileOptions, CompileStats};
use crate::emit::{entry_records, image_words};
use crate::lower::lower;
use crate::partition::{partition, BothAddresses};
use crate::tree::{build_trees, Budget};
use parapet_image::{self as image, Image};
use parapet_model::DecisionList;
use std::time::Instant;

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
    let words = image_words(list, opts, &records, &forest, &lowered.patterns);
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
