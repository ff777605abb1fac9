//! Compile stage 2, partitioning: which entries go in which tree.
//!
//! The entries are split into a few partitions by which address fields are
//! specific (EffiCuts / CutSplit): rules that pin the source but not the
//! destination never share a tree with rules that pin only the
//! destination, so cutting one address never copies the other group's wide
//! rules. This is what keeps `cross_product` linear in size.

use crate::api::CompileOptions;
use crate::lower::EntryBox;
use parapet_image::Backend;

/// Where the rules pinning both addresses go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BothAddresses {
    /// Into the larger single-address partition (see [`partition`]).
    JoinLarger,
    /// Into a partition of their own.
    OwnPartition,
}

/// One partition: the entries one tree is built over.
#[derive(Clone, Debug)]
pub(crate) struct Partition {
    /// Which rules it holds (e.g. "src+dst specific").
    pub name: String,
    /// Entry indices, ascending.
    pub entries: Vec<u32>,
    /// The catch-all partition of rules specific in neither address.
    pub catch_all: bool,
    /// A single-address partition that also holds the rules pinning both
    /// addresses.
    pub merged: bool,
}

impl Partition {
    fn whole(name: &str, entries: Vec<u32>) -> Partition {
        Partition {
            name: name.into(),
            entries,
            catch_all: false,
            merged: false,
        }
    }
}

/// Partition names, in the order partitions are laid out.
const GROUP_NAMES: [&str; 4] = [
    "src+dst specific",
    "src specific",
    "dst specific",
    "neither address specific",
];

/// The catch-all group of [`group_of`].
const CATCH_ALL: usize = 3;

/// Suffix of the name of a single-address partition that also holds the
/// rules pinning both addresses.
const MERGED: &str = " (with src+dst)";

/// Which partition an entry goes to: by whether each address is "small"
/// (at most 1/65536 of its family's address space, i.e. a /16 or longer for
/// IPv4, a /16 or longer for IPv6).
fn group_of(e: &EntryBox) -> usize {
    let v4_only = e.hull[0].1 <= 4;
    let small = |f: usize| {
        let Some(_) = &e.ranges[f] else { return false };
        let (lo, hi) = e.hull[f];
        let span = hi - lo;
        let space_bits = if v4_only || hi <= u32::MAX as u128 {
            32
        } else {
            128
        };
        span < (1u128 << (space_bits - 16))
    };
    match (small(1), small(2)) {
        (true, true) => 0,
        (true, false) => 1,
        (false, true) => 2,
        (false, false) => 3,
    }
}

/// Splits the entries (`boxes`, in list order) into partitions, in the
/// order the walker visits them; never empty.
pub(crate) fn partition(
    boxes: &[EntryBox],
    opts: &CompileOptions,
    both: BothAddresses,
) -> Vec<Partition> {
    let n = boxes.len();
    let all: Vec<u32> = (0..n as u32).collect();
    if opts.backend == Backend::Linear {
        return vec![Partition::whole("all entries (linear)", all)];
    }
    if !opts.partition || n <= 4 * opts.leaf_size {
        return vec![Partition::whole("all entries", all)];
    }
    let mut g: [Vec<u32>; 4] = Default::default();
    for &i in &all {
        g[group_of(&boxes[i as usize])].push(i);
    }
    // Rules pinning both addresses join the larger single-address
    // group: cutting that address copies none of them, and a lookup
    // walks one tree fewer. Measured (`explain`, the sets' traces):
    // fw1_10k 10.9 → 7.6 fast-path steps per lookup, ipc1_10k 12.7 →
    // 10.6, fw1_100k 12.0 → 8.0, ipc1_100k 6.4 → 5.0, memory within
    // ±4%. Rules pinning only the other address still get their own
    // tree, so `cross_product` stays unreplicated.
    let host = if g[2].len() > g[1].len() { 2 } else { 1 };
    let with_both = both == BothAddresses::JoinLarger && !g[0].is_empty();
    if with_both {
        let both = std::mem::take(&mut g[0]);
        let mut merged: Vec<u32> = both.into_iter().chain(g[host].drain(..)).collect();
        merged.sort_unstable();
        g[host] = merged;
    }
    // A tiny partition costs a tree walk per lookup for little gain:
    // fold it into the catch-all one (whose tree may cut any field).
    let tiny = (n / 50).max(32);
    for k in 0..CATCH_ALL {
        if !g[k].is_empty() && g[k].len() < tiny {
            let moved = std::mem::take(&mut g[k]);
            g[CATCH_ALL].extend(moved);
        }
    }
    g[CATCH_ALL].sort_unstable();
    let mut parts = Vec::new();
    for (k, entries) in g.into_iter().enumerate() {
        if !entries.is_empty() {
            let merged = k == host && with_both;
            let name = if merged {
                format!("{}{MERGED}", GROUP_NAMES[k])
            } else {
                GROUP_NAMES[k].into()
            };
            parts.push(Partition {
                name,
                entries,
                catch_all: k == CATCH_ALL,
                merged,
            });
        }
    }
    // Walk the partition holding the earliest rules first: its match
    // lets the walker skip partitions whose rules all come later.
    parts.sort_by_key(|p| p.entries.first().copied());
    if parts.is_empty() {
        parts.push(Partition::whole("all entries", Vec::new()));
    }
    parts
}
