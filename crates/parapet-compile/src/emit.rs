//! Compile stage 4, emitting: the entry records, the trees and the verdicts
//! laid out as the flat image of `docs/image-format.md`.

use crate::api::{CompileError, CompileOptions};
use crate::lower::{field_of, EntryBox, FIELDS};
use crate::tree::Forest;
use parapet_image::{self as image, hw, kind};
use parapet_model::{
    BucketKey, DecisionList, Dynset, DynsetOp, DynsetPort, EntryKind, Hashlimit, Limit,
    LimitFlavor, Quota, Recent, Statistic, StatisticMode, TimeUnit, TimeWindow, Verdict,
    DYNSET_MAX_LIMIT_BURST, DYNSET_MAX_LIMIT_RATE,
};
use std::collections::HashMap;

/// The entry records of an image and the verdict table they index: the
/// part of the image that does not depend on the trees.
pub(crate) struct EntryRecords {
    /// Verdict table: the policy first, then each distinct verdict.
    pub verdicts: Vec<Verdict>,
    /// The records, one after the other.
    pub records: Vec<u32>,
    /// Per entry: the offset of its record in `records`.
    pub entry_table: Vec<u32>,
    /// Most ranges of one constraint.
    pub max_ranges: usize,
    /// Longest record in words.
    pub max_record_words: usize,
    /// The stateful table's rows, back to back (one per rule with a limit).
    pub stateful: Vec<u32>,
}

impl EntryRecords {
    /// Words the image takes besides its trees (nodes, fanout, leaves),
    /// with `partitions` partitions: what the tree budget is left from.
    pub fn fixed_words(&self, partitions: usize) -> usize {
        image::HEADER_WORDS
            + partitions * image::PARTITION_WORDS
            + self.entry_table.len()
            + self.records.len()
            + self.verdicts.len() * image::VERDICT_WORDS
            + self.stateful.len()
            + 64
    }
}

/// Writes the record of every entry of `list` (`boxes` are its lowered
/// entries) and collects the verdict table.
pub(crate) fn entry_records(
    list: &DecisionList,
    boxes: &[EntryBox],
) -> Result<EntryRecords, CompileError> {
    let mut verdicts: Vec<Verdict> = vec![list.policy.clone()];
    let mut verdict_index = |v: &Verdict| -> u32 {
        match verdicts.iter().position(|x| x == v) {
            Some(i) => i as u32,
            None => {
                verdicts.push(v.clone());
                (verdicts.len() - 1) as u32
            }
        }
    };
    let mut records: Vec<u32> = Vec::new();
    let mut entry_table: Vec<u32> = Vec::with_capacity(list.entries.len());
    let mut max_ranges = 0usize;
    let mut max_record_words = 0usize;
    // Bucket → its row: every entry of one rule (and every rule naming one
    // nft limit object) shares one bucket.
    let mut rows: Vec<u32> = Vec::new();
    // Keyed by the condition's kind too: a rule with several conditions
    // (`-m recent … -m limit …`, flattened into one guard per condition)
    // has a row per condition.
    let mut row_of: HashMap<(BucketKey, u8), u32> = HashMap::new();
    // A time window is a row of its own, and an entry names one row: a
    // rule with a window and another stateful condition is refused rather
    // than compiled with one of the two dropped.
    if let Some(e) = list
        .entries
        .iter()
        .find(|e| e.time.is_some() && has_other_condition(e))
    {
        return Err(CompileError::TimeWindow { rule_id: e.rule_id });
    }
    // The row keeps a hit count in a byte, and the BPF ring 256 stamps.
    if let Some((e, r)) = list
        .entries
        .iter()
        .filter_map(|e| Some((e, e.recent.as_ref()?)))
        .find(|(_, r)| r.hitcount > image::stateful::RECENT_MAX_HITCOUNT)
    {
        return Err(CompileError::RecentHitcount {
            rule_id: e.rule_id,
            hitcount: r.hitcount,
        });
    }
    for (e, c) in list.entries.iter().zip(boxes) {
        entry_table.push(records.len() as u32);
        let start = records.len();
        let (k, verdict, resume) = match &e.kind {
            EntryKind::Decide(v) => (kind::DECIDE, verdict_index(v), 0),
            EntryKind::Log => (kind::LOG, 0, 0),
            EntryKind::Count => (kind::COUNT, 0, 0),
            EntryKind::Jump => (kind::JUMP, 0, 0),
            EntryKind::Return { resume, counted } => (
                kind::RETURN | if *counted { kind::COUNTED_BIT } else { 0 },
                0,
                *resume,
            ),
        };
        records.extend([e.rule_id, 0, resume, 0]);
        // Constraints most likely to fail first: the smallest fraction of
        // the field's values; the walker stops at the first failing one.
        let mut order: Vec<usize> = (0..FIELDS).filter(|&f| c.ranges[f].is_some()).collect();
        let fraction = |f: usize| {
            let card: u128 = c.ranges[f]
                .as_ref()
                .map(|r| {
                    r.iter().fold(0u128, |s, &(a, b)| {
                        s.saturating_add(b - a).saturating_add(1)
                    })
                })
                .unwrap_or(u128::MAX);
            // Compare as a fraction of the field's span (log scale is
            // enough).
            128 - card.leading_zeros() as i64 - field_of(f).width() as i64
        };
        order.sort_by_key(|&f| (fraction(f), f));
        let mut nc = 0u32;
        for f in order {
            let r = c.ranges[f].as_ref().expect("constrained");
            if r.len() > image::MAX_RANGES {
                return Err(CompileError::TooManyRanges { rule_id: e.rule_id });
            }
            max_ranges = max_ranges.max(r.len());
            let wide = r.iter().any(|&(_, b)| b > u32::MAX as u128);
            records
                .push(f as u32 | if wide { image::WIDE_BIT } else { 0 } | ((r.len() as u32) << 16));
            for &(a, b) in r {
                if wide {
                    for v in [a, b] {
                        records.extend((0..4).map(|k| (v >> (32 * k)) as u32));
                    }
                } else {
                    records.extend([a as u32, b as u32]);
                }
            }
            nc += 1;
        }
        for &(f, mask, value, negate) in &c.masked {
            // the pattern hits are always read as 4 words
            let wide = mask > u32::MAX as u128
                || value > u32::MAX as u128
                || f == image::patterns::FIELD as usize;
            records.push(
                f as u32
                    | image::MASKED_BIT
                    | if wide { image::WIDE_BIT } else { 0 }
                    | if negate { image::MASK_NEGATE_BIT } else { 0 },
            );
            for v in [mask, value] {
                if wide {
                    records.extend((0..4).map(|k| (v >> (32 * k)) as u32));
                } else {
                    records.push(v as u32);
                }
            }
            nc += 1;
        }
        if c.set_mask != 0 {
            records.extend([
                image::SET_FIELD | (1 << 16),
                c.set_mask as u32,
                (c.set_mask >> 32) as u32,
                c.set_want as u32,
                (c.set_want >> 32) as u32,
            ]);
            nc += 1;
        }
        // A recent condition's state is its table's (in the BPF map), so
        // its row is the rule's own.
        let shared_state = e.recent.is_some()
            || e.hashlimit.is_some()
            || e.dynset.is_some()
            || e.quota.is_some()
            || e.statistic.is_some()
            || e.time.is_some();
        let bucket = match (&e.limit, shared_state) {
            (Some(l), _) => Some(BucketKey::of(e.rule_id, l)),
            (None, true) => Some(BucketKey::Rule(e.rule_id)),
            (None, false) => None,
        };
        // which condition the row is of (a time window alone: 5)
        let condition = [
            e.limit.is_some(),
            e.recent.is_some(),
            e.hashlimit.is_some(),
            e.dynset.is_some(),
            e.quota.is_some(),
        ]
        .iter()
        .position(|&c| c)
        .unwrap_or(5) as u8;
        // A dynamic set's lookup before the rule's statement on one
        // (`Rule::dynset_lookup`) is a row of its own: 6 for every lookup.
        let condition = match &e.dynset {
            Some(d) if d.op == DynsetOp::Lookup => 6,
            _ => condition,
        };
        let stateful = match bucket {
            None => 0,
            Some(key) => {
                let next = row_of.len() as u32;
                let row = *row_of.entry((key, condition)).or_insert(next);
                if row == next {
                    if next as usize >= image::stateful::MAX_ROWS {
                        return Err(CompileError::TooManyStateful(next as usize + 1));
                    }
                    rows.extend(match (&e.limit, &e.recent, &e.hashlimit) {
                        (Some(l), _, _) => stateful_row(e.rule_id, l),
                        (None, Some(r), _) => recent_row(e.rule_id, r),
                        (None, None, Some(h)) => hashlimit_row(e.rule_id, h),
                        (None, None, None) => match (&e.dynset, &e.quota, &e.statistic) {
                            (Some(d), _, _) => dynset_row(e.rule_id, d),
                            (None, Some(q), _) => quota_row(e.rule_id, q),
                            (None, None, Some(s)) => statistic_row(e.rule_id, s),
                            (None, None, None) => match &e.time {
                                Some(w) => time_row(e.rule_id, w),
                                None => unreachable!("a bucket without a condition"),
                            },
                        },
                    });
                }
                kind::STATEFUL_BIT | row << kind::STATEFUL_ROW_SHIFT
            }
        };
        records[start + 1] = k | stateful | (verdict << 8) | (nc << 16);
        records[start + 3] = (records.len() - start) as u32;
        max_record_words = max_record_words.max(records.len() - start);
    }
    Ok(EntryRecords {
        verdicts,
        records,
        entry_table,
        max_ranges,
        max_record_words,
        stateful: rows,
    })
}

/// The stateful-table row of rule `rule_id`'s limit (see
/// `parapet_image::stateful`).
fn stateful_row(rule_id: u32, l: &Limit) -> [u32; image::stateful::ROW_WORDS] {
    match l.flavor {
        LimitFlavor::Xt => [
            rule_id,
            image::stateful::XT_LIMIT,
            l.xt_avg(),
            l.burst,
            0,
            0,
            0,
            0,
        ],
        LimitFlavor::Nft => {
            let (cost, max) = (l.nft_cost(), l.nft_tokens_max());
            [
                rule_id,
                image::stateful::NFT_LIMIT | if l.over { image::stateful::F_OVER } else { 0 },
                cost as u32,
                (cost >> 32) as u32,
                max as u32,
                (max >> 32) as u32,
                0,
                0,
            ]
        }
    }
}

/// The stateful-table row of rule `rule_id`'s `-m recent` (see
/// `parapet_image::stateful`).
fn recent_row(rule_id: u32, r: &Recent) -> [u32; image::stateful::ROW_WORDS] {
    use image::stateful as st;
    let flags = r.command.code() << st::RECENT_CMD_SHIFT
        | if r.rdest { st::F_RDEST } else { 0 }
        | if r.invert { st::F_INVERT } else { 0 }
        | if r.reap { st::F_REAP } else { 0 }
        | if r.rttl { st::F_RTTL } else { 0 };
    [
        rule_id,
        st::RECENT | flags,
        r.table_id(),
        r.seconds,
        r.hitcount | (r.mask_v6.min(128) as u32) << 8,
        r.mask_v4,
        0,
        0,
    ]
}

/// The stateful-table row of rule `rule_id`'s `-m hashlimit` (see
/// `parapet_image::stateful`).
fn hashlimit_row(rule_id: u32, h: &Hashlimit) -> [u32; image::stateful::ROW_WORDS] {
    use image::stateful as st;
    let avg = h.avg();
    [
        rule_id,
        st::HASHLIMIT
            | (h.mode as u32 & 0xf) << st::HASHLIMIT_MODE_SHIFT
            | if h.above { st::F_ABOVE } else { 0 }
            | (h.srcmask as u32) << st::HASHLIMIT_SRCMASK_SHIFT
            | (h.dstmask as u32) << st::HASHLIMIT_DSTMASK_SHIFT,
        h.table_id(),
        avg as u32,
        (avg >> 32) as u32 & 0xff | h.burst << st::HASHLIMIT_BURST_SHIFT,
        h.expire,
        0,
        0,
    ]
}

/// The stateful-table row of rule `rule_id`'s nft dynamic set (see
/// `parapet_image::stateful`). The parser keeps an element limit's rate
/// and burst within the row's bits.
fn dynset_row(rule_id: u32, d: &Dynset) -> [u32; image::stateful::ROW_WORDS] {
    use image::stateful as st;
    let c = d.check();
    let mut flags = c.op.code() << st::DYNSET_OP_SHIFT
        | if d.daddr { st::F_RDEST } else { 0 }
        | if d.invert { st::F_INVERT } else { 0 }
        | match d.port {
            None => 0,
            Some(DynsetPort::Src) => 1 << st::DYNSET_PORT_SHIFT,
            Some(DynsetPort::Dst) => 2 << st::DYNSET_PORT_SHIFT,
            Some(DynsetPort::Const(p)) => {
                3 << st::DYNSET_PORT_SHIFT | (p as u32) << st::DYNSET_PORT_CONST_SHIFT
            }
        };
    let mut limit = 0;
    if let Some(l) = &d.limit {
        flags |= st::F_DYNSET_LIMIT | if l.over { st::F_DYNSET_OVER } else { 0 };
        let unit = match l.per {
            TimeUnit::Second => 0,
            TimeUnit::Minute => 1,
            TimeUnit::Hour => 2,
            TimeUnit::Day => 3,
        };
        limit = l.rate.min(DYNSET_MAX_LIMIT_RATE)
            | unit << st::DYNSET_UNIT_SHIFT
            | l.burst.clamp(1, DYNSET_MAX_LIMIT_BURST) << st::DYNSET_BURST_SHIFT;
    }
    [
        rule_id,
        st::DYNSET | flags,
        c.set,
        c.timeout_ms,
        c.size.max(1),
        limit,
        0,
        0,
    ]
}

/// Whether entry `e` has a stateful condition besides its time window.
fn has_other_condition(e: &parapet_model::Entry) -> bool {
    e.limit.is_some()
        || e.recent.is_some()
        || e.hashlimit.is_some()
        || e.dynset.is_some()
        || e.quota.is_some()
        || e.statistic.is_some()
}

/// The stateful-table row of rule `rule_id`'s time window (see
/// `parapet_image::stateful::TIME`). Dates outside `0..=u32::MAX` are
/// clamped: the clock never reads a time before 1970 or after 2106, so the
/// window is the same.
pub(crate) fn time_row(rule_id: u32, w: &TimeWindow) -> [u32; image::stateful::ROW_WORDS] {
    use image::stateful as st;
    let date = |d: i64| d.clamp(0, u32::MAX as i64) as u32;
    [
        rule_id,
        st::TIME
            | if w.kernel_tz { st::F_KERNEL_TZ } else { 0 }
            | if w.contiguous { st::F_CONTIGUOUS } else { 0 }
            | w.daytime_stop << st::TIME_DAYTIME_STOP_SHIFT,
        date(w.date_start),
        date(w.date_stop),
        w.daytime_start | (w.weekdays as u32) << st::TIME_WEEKDAYS_SHIFT,
        w.monthdays,
        0,
        0,
    ]
}

/// The stateful-table row of rule `rule_id`'s nft `quota`.
fn quota_row(rule_id: u32, q: &Quota) -> [u32; image::stateful::ROW_WORDS] {
    use image::stateful as st;
    [
        rule_id,
        st::QUOTA | if q.over { st::F_OVER } else { 0 },
        q.bytes as u32,
        (q.bytes >> 32) as u32,
        q.used as u32,
        (q.used >> 32) as u32,
        0,
        0,
    ]
}

/// The stateful-table row of rule `rule_id`'s `-m statistic`.
fn statistic_row(rule_id: u32, s: &Statistic) -> [u32; image::stateful::ROW_WORDS] {
    use image::stateful as st;
    let invert = if s.invert { st::F_INVERT } else { 0 };
    let (kind, p0, p1) = match s.mode {
        StatisticMode::Nth { every, packet } => (st::STATISTIC_NTH, every, packet),
        StatisticMode::Random { threshold } => (st::STATISTIC_RANDOM, threshold, 0),
    };
    [rule_id, kind | invert, p0, p1, 0, 0, 0, 0]
}

/// The trees of all partitions laid out together.
struct TreeLayout {
    /// Per partition: root ref, depth, node count, smallest entry index.
    part_words: Vec<u32>,
    /// Nodes of all trees, renumbered into one array.
    nodes: Vec<u32>,
    /// Child refs of multi-way nodes.
    fanout: Vec<u32>,
    /// The leaf pool: each leaf as its length, then its entry indices.
    pool: Vec<u32>,
    max_depth: usize,
    max_leaf: usize,
}

/// Nodes of all trees renumbered into one array; leaves shared when
/// identical (HyperSplit trees repeat the same short lists often).
fn lay_out_trees(forest: &Forest) -> TreeLayout {
    let mut nodes: Vec<u32> = Vec::new();
    let mut pool: Vec<u32> = Vec::new();
    let mut fanout: Vec<u32> = Vec::new();
    let mut pool_index: HashMap<Vec<u32>, u32> = HashMap::new();
    let mut part_words: Vec<u32> = Vec::new();
    let mut max_depth = 0usize;
    let mut max_leaf = 0usize;
    for tree in &forest.trees {
        let base = (nodes.len() / image::NODE_WORDS) as u32;
        let leaf_refs: Vec<u32> = tree
            .leaves
            .iter()
            .map(|l| {
                max_leaf = max_leaf.max(l.len());
                let off = *pool_index.entry(l.clone()).or_insert_with(|| {
                    let off = pool.len() as u32;
                    pool.push(l.len() as u32);
                    pool.extend_from_slice(l);
                    off
                });
                image::LEAF_BIT | off
            })
            .collect();
        let fix = |r: u32| {
            if r & image::LEAF_BIT != 0 {
                leaf_refs[(r & !image::LEAF_BIT) as usize]
            } else {
                r + base
            }
        };
        let fanout_base = fanout.len() as u32;
        fanout.extend(tree.fanout.iter().map(|&r| fix(r)));
        for node in &tree.nodes {
            if (node[0] >> 8) == image::NODE_MULTI {
                nodes.extend([node[0], node[1] + fanout_base]);
                nodes.extend_from_slice(&node[2..8]);
            } else {
                nodes.extend([node[0], fix(node[1]), fix(node[2]), 0]);
                nodes.extend_from_slice(&node[4..8]);
            }
        }
        max_depth = max_depth.max(tree.depth);
        // Word 3: the partition's smallest entry index, so the fast path can
        // skip a partition that cannot beat the match it already has.
        let min_entry = tree.leaves.iter().filter_map(|l| l.first()).min().copied();
        part_words.extend([
            fix(tree.root),
            tree.depth as u32,
            tree.nodes.len() as u32,
            min_entry.unwrap_or(u32::MAX),
        ]);
    }
    TreeLayout {
        part_words,
        nodes,
        fanout,
        pool,
        max_depth,
        max_leaf,
    }
}

/// The verdict table as image words, and the strings they point into
/// (padded to whole words) with their unpadded length in bytes.
fn verdict_words(verdicts: &[Verdict]) -> (Vec<u32>, Vec<u32>, usize) {
    let mut strings: Vec<u8> = Vec::new();
    let mut words: Vec<u32> = Vec::new();
    for v in verdicts {
        match v {
            Verdict::Accept => words.extend([0, 0, 0, 0]),
            Verdict::Drop => words.extend([1, 0, 0, 0]),
            Verdict::Reject { with: None } => words.extend([2, 0, 0, 0]),
            Verdict::Reject { with: Some(s) } => {
                let code = image::reject::reject_code(Some(s));
                words.extend([3, strings.len() as u32, s.len() as u32, code]);
                strings.extend_from_slice(s.as_bytes());
            }
        }
    }
    let strings_bytes = strings.len();
    while !strings.len().is_multiple_of(4) {
        strings.push(0);
    }
    let string_words: Vec<u32> = strings
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    (words, string_words, strings_bytes)
}

/// The image words of `list` compiled with `opts`: header, partitions,
/// trees, entry records, verdicts and strings, checksummed.
pub(crate) fn image_words(
    list: &DecisionList,
    opts: &CompileOptions,
    entries: &EntryRecords,
    forest: &Forest,
    patterns: &[image::patterns::Pattern],
) -> Vec<u32> {
    let trees = lay_out_trees(forest);
    let (verdict_words, string_words, strings_bytes) = verdict_words(&entries.verdicts);
    let mut w = vec![0u32; image::HEADER_WORDS];
    let put = |w: &mut Vec<u32>, at: usize, data: &[u32]| {
        w[at] = w.len() as u32;
        w.extend_from_slice(data);
    };
    put(&mut w, hw::PARTITIONS_OFF, &trees.part_words);
    put(&mut w, hw::NODES_OFF, &trees.nodes);
    put(&mut w, hw::FANOUT_OFF, &trees.fanout);
    w[hw::FANOUT_WORDS] = trees.fanout.len() as u32;
    put(&mut w, hw::LEAVES_OFF, &trees.pool);
    put(&mut w, hw::ENTRY_TABLE_OFF, &entries.entry_table);
    put(&mut w, hw::ENTRIES_OFF, &entries.records);
    put(&mut w, hw::VERDICTS_OFF, &verdict_words);
    put(&mut w, hw::STRINGS_OFF, &string_words);
    put(&mut w, hw::STATEFUL_OFF, &entries.stateful);
    w[hw::N_STATEFUL] = (entries.stateful.len() / image::stateful::ROW_WORDS) as u32;
    let table = image::patterns::table_words(patterns, w.len());
    put(&mut w, hw::PATTERNS_OFF, &table);
    w[hw::N_PATTERNS] = patterns.len() as u32;
    w[hw::MAGIC] = image::MAGIC;
    w[hw::VERSION] = image::VERSION;
    w[hw::BACKEND] = opts.backend as u32;
    w[hw::FLAGS] = if list.is_pure_first_match() {
        image::FLAG_PURE_FIRST_MATCH
    } else {
        0
    };
    // the dataplane types the addresses only for images that read them
    if list.entries.iter().any(|e| {
        e.matches.iter().any(|(f, _)| {
            matches!(
                f,
                parapet_model::Field::SrcType | parapet_model::Field::DstType
            )
        })
    }) {
        w[hw::FLAGS] |= image::FLAG_ADDR_TYPES;
    }
    // and walks the TCP option area only for images that test a kind
    if list.entries.iter().any(|e| {
        e.matches
            .iter()
            .any(|(f, _)| matches!(f, parapet_model::Field::TcpOption(_)))
    }) {
        w[hw::FLAGS] |= image::FLAG_TCP_OPTIONS;
    }
    // and copies and searches the datagram only for images with patterns
    if !patterns.is_empty() {
        w[hw::FLAGS] |= image::FLAG_PATTERNS;
    }
    // and says which images read the route back to the source
    if list
        .entries
        .iter()
        .any(|e| e.matches.get(parapet_model::Field::RevPath).is_some())
    {
        w[hw::FLAGS] |= image::FLAG_REV_PATH;
    }
    w[hw::TOTAL_WORDS] = w.len() as u32;
    w[hw::N_ENTRIES] = list.entries.len() as u32;
    w[hw::N_PARTITIONS] = forest.trees.len() as u32;
    w[hw::POLICY] = 0;
    w[hw::MAX_DEPTH] = trees.max_depth as u32;
    w[hw::MAX_LEAF] = trees.max_leaf as u32;
    w[hw::MAX_RANGES] = entries.max_ranges as u32;
    w[hw::SET_REF_COUNT] = list.set_ref_count as u32;
    w[hw::N_NODES] = (trees.nodes.len() / image::NODE_WORDS) as u32;
    w[hw::LEAVES_WORDS] = trees.pool.len() as u32;
    w[hw::ENTRIES_WORDS] = entries.records.len() as u32;
    w[hw::N_VERDICTS] = entries.verdicts.len() as u32;
    w[hw::STRINGS_BYTES] = strings_bytes as u32;
    w[hw::CHECKSUM] = image::checksum(&w);
    w
}
