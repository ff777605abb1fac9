//! A small test-side assembler for classifier images (docs/image-format.md)
//! and a reference evaluator that scans the decision list linearly, the way
//! the spec defines the result. The BPF walker (trees + leaf merge) must
//! agree with the linear scan on every packet.

#![allow(dead_code)]

use parapet_dataplane::PacketKey;
use parapet_image::{
    checksum, hw, kind, KeyWords, FIXED_FIELDS, KEY_OFF, KEY_SETS, KEY_WIDE, KEY_WORDS, MAGIC,
    SET_FIELD, VERSION,
};
use parapet_model::IfName;

pub const KIND_DECIDE: u32 = kind::DECIDE;
pub const KIND_LOG: u32 = kind::LOG;
pub const KIND_COUNT: u32 = kind::COUNT;
pub const KIND_JUMP: u32 = kind::JUMP;
pub const KIND_RETURN: u32 = kind::RETURN;
const HW_TOTAL_WORDS: usize = hw::TOTAL_WORDS;
const HW_CHECKSUM: usize = hw::CHECKSUM;

/// Field id -> (first key word, is 128-bit).
pub fn field_layout(f: u32) -> (usize, bool) {
    assert!(f < FIXED_FIELDS, "no field {f}");
    (KEY_OFF[f as usize], KEY_WIDE[f as usize])
}

/// The image key of a parsed IP packet that arrived on `iif`, as the BPF
/// walker builds it (set bits 0: the kernel fills them from its set maps).
pub fn image_key(key: &PacketKey, iif: &str) -> [u32; KEY_WORDS] {
    let iif = IfName::new(iif).expect("an interface name");
    let pkt = key.to_packet(iif).expect("an IP packet");
    KeyWords::new(&pkt, 0).to_words()
}

pub fn key_value(key: &[u32; KEY_WORDS], f: u32) -> u128 {
    let (at, wide) = field_layout(f);
    let n = if wide { 4 } else { 1 };
    (0..n).fold(0u128, |v, k| v | u128::from(key[at + k]) << (32 * k))
}

#[derive(Clone, Debug)]
pub enum Constraint {
    /// A fixed field (0..FIXED_FIELDS), closed sorted disjoint ranges; `wide` selects 8-word
    /// ranges (otherwise every bound must fit in 32 bits).
    Ranges {
        field: u32,
        wide: bool,
        ranges: Vec<(u128, u128)>,
    },
    /// The set field: (sets & mask) == want.
    Sets { mask: u64, want: u64 },
}

impl Constraint {
    pub fn matches(&self, key: &[u32; KEY_WORDS]) -> bool {
        match self {
            Constraint::Ranges { field, ranges, .. } => {
                let v = key_value(key, *field);
                ranges.iter().any(|&(lo, hi)| lo <= v && v <= hi)
            }
            Constraint::Sets { mask, want } => {
                let sets = u64::from(key[KEY_SETS]) | u64::from(key[KEY_SETS + 1]) << 32;
                sets & mask == *want
            }
        }
    }

    /// Could a value of `field` in `[a, b]` satisfy this?
    pub fn could_in(&self, field: u32, a: u128, b: u128) -> bool {
        match self {
            Constraint::Ranges {
                field: f, ranges, ..
            } if *f == field => ranges.iter().any(|&(lo, hi)| lo <= b && hi >= a),
            _ => true,
        }
    }

    /// Could a value <= cut (left) / > cut (right) of `field` satisfy this?
    pub fn could(&self, field: u32, cut: u128, left: bool) -> bool {
        match self {
            Constraint::Ranges {
                field: f, ranges, ..
            } if *f == field => ranges
                .iter()
                .any(|&(lo, hi)| if left { lo <= cut } else { hi > cut }),
            _ => true,
        }
    }
}

#[derive(Clone, Debug)]
pub struct Entry {
    pub rule_id: u32,
    pub kind: u32,
    pub counted: bool,
    pub verdict: u32,
    pub resume: u32,
    pub constraints: Vec<Constraint>,
}

impl Entry {
    pub fn matches(&self, key: &[u32; KEY_WORDS]) -> bool {
        self.constraints.iter().all(|c| c.matches(key))
    }
}

#[derive(Clone, Debug)]
pub enum Tree {
    Leaf(Vec<u32>),
    Node {
        field: u32,
        cut: u128,
        le: Box<Tree>,
        gt: Box<Tree>,
    },
    /// Multi-way node: child `min((v - lo) mod 2^32 >> shift, 2^bits - 1)`
    /// of the field's low word.
    Multi {
        field: u32,
        lo: u32,
        bits: u32,
        shift: u32,
        children: Vec<Tree>,
    },
}

pub struct ImageSpec {
    pub entries: Vec<Entry>,
    /// Verdict codes: 0 ACCEPT, 1 DROP, 2 REJECT.
    pub verdicts: Vec<u32>,
    pub policy: u32,
    pub partitions: Vec<Tree>,
}

/// The linear reference: (rule id, verdict code, non-terminal rule ids).
pub fn reference(spec: &ImageSpec, key: &[u32; KEY_WORDS]) -> (u32, u32, Vec<u32>) {
    let mut nonterm = Vec::new();
    let mut i = 0usize;
    while i < spec.entries.len() {
        let e = &spec.entries[i];
        i += 1;
        if !e.matches(key) {
            continue;
        }
        match e.kind {
            KIND_DECIDE => return (e.rule_id, spec.verdicts[e.verdict as usize], nonterm),
            KIND_RETURN => {
                if e.counted {
                    nonterm.push(e.rule_id);
                }
                i = e.resume as usize;
            }
            _ => nonterm.push(e.rule_id),
        }
    }
    (0, spec.verdicts[spec.policy as usize], nonterm)
}

fn push128(out: &mut Vec<u32>, v: u128) {
    for k in 0..4 {
        out.push((v >> (32 * k)) as u32);
    }
}

/// Assemble the image words (valid header, checksum included).
/// Whether a constraint or a tree node of `spec` reads an address type
/// (field ids 20, 21): the header flag the walker types addresses on.
fn reads_addr_types(spec: &ImageSpec) -> bool {
    fn tree(t: &Tree) -> bool {
        match t {
            Tree::Leaf(_) => false,
            Tree::Node { field, le, gt, .. } => matches!(field, 20 | 21) || tree(le) || tree(gt),
            Tree::Multi {
                field, children, ..
            } => matches!(field, 20 | 21) || children.iter().any(tree),
        }
    }
    spec.entries
        .iter()
        .flat_map(|e| &e.constraints)
        .any(|c| matches!(c, Constraint::Ranges { field: 20 | 21, .. }))
        || spec.partitions.iter().any(tree)
}

pub fn assemble(spec: &ImageSpec) -> Vec<u32> {
    // Nodes in preorder, so children always follow their parent.
    let mut nodes: Vec<[u32; 8]> = Vec::new();
    let mut fanout: Vec<u32> = Vec::new();
    let mut leaves: Vec<u32> = Vec::new();
    let mut roots = Vec::new();
    let mut depths = Vec::new();
    let mut max_leaf = 0u32;

    fn emit(
        t: &Tree,
        nodes: &mut Vec<[u32; 8]>,
        fanout: &mut Vec<u32>,
        leaves: &mut Vec<u32>,
        max_leaf: &mut u32,
        depth: u32,
        max_depth: &mut u32,
    ) -> u32 {
        match t {
            Tree::Leaf(idx) => {
                let off = leaves.len() as u32;
                leaves.push(idx.len() as u32);
                leaves.extend(idx);
                *max_leaf = (*max_leaf).max(idx.len() as u32);
                off | 0x8000_0000
            }
            Tree::Node { field, cut, le, gt } => {
                *max_depth = (*max_depth).max(depth + 1);
                let me = nodes.len();
                nodes.push([0; 8]);
                let l = emit(le, nodes, fanout, leaves, max_leaf, depth + 1, max_depth);
                let r = emit(gt, nodes, fanout, leaves, max_leaf, depth + 1, max_depth);
                let mut n = [*field, l, r, 0, 0, 0, 0, 0];
                for k in 0..4 {
                    n[4 + k] = (cut >> (32 * k)) as u32;
                }
                nodes[me] = n;
                me as u32
            }
            Tree::Multi {
                field,
                lo,
                bits,
                shift,
                children,
            } => {
                assert_eq!(children.len(), 1 << bits);
                *max_depth = (*max_depth).max(depth + 1);
                let me = nodes.len();
                nodes.push([0; 8]);
                let off = fanout.len();
                fanout.extend(std::iter::repeat_n(0, children.len()));
                for (j, c) in children.iter().enumerate() {
                    fanout[off + j] =
                        emit(c, nodes, fanout, leaves, max_leaf, depth + 1, max_depth);
                }
                nodes[me] = [
                    field | 1 << 8,
                    off as u32,
                    bits | shift << 8,
                    *lo,
                    0,
                    0,
                    0,
                    0,
                ];
                me as u32
            }
        }
    }
    for t in &spec.partitions {
        let mut d = 0;
        roots.push(emit(
            t,
            &mut nodes,
            &mut fanout,
            &mut leaves,
            &mut max_leaf,
            0,
            &mut d,
        ));
        depths.push(d);
    }

    let mut table = Vec::new();
    let mut recs: Vec<u32> = Vec::new();
    let mut max_ranges = 0u32;
    for e in &spec.entries {
        table.push(recs.len() as u32);
        let mut body = Vec::new();
        for c in &e.constraints {
            match c {
                Constraint::Ranges {
                    field,
                    wide,
                    ranges,
                } => {
                    max_ranges = max_ranges.max(ranges.len() as u32);
                    body.push(field | if *wide { 0x8000 } else { 0 } | (ranges.len() as u32) << 16);
                    for &(lo, hi) in ranges {
                        if *wide {
                            push128(&mut body, lo);
                            push128(&mut body, hi);
                        } else {
                            body.push(u32::try_from(lo).expect("narrow bound"));
                            body.push(u32::try_from(hi).expect("narrow bound"));
                        }
                    }
                }
                Constraint::Sets { mask, want } => {
                    body.push(SET_FIELD | 1 << 16);
                    body.extend([*mask as u32, (*mask >> 32) as u32]);
                    body.extend([*want as u32, (*want >> 32) as u32]);
                }
            }
        }
        let w1 = e.kind
            | if e.counted { 0x10 } else { 0 }
            | (e.verdict & 0xff) << 8
            | (e.constraints.len() as u32) << 16;
        recs.extend([e.rule_id, w1, e.resume, 4 + body.len() as u32]);
        recs.extend(body);
    }

    let mut w = vec![0u32; 32];
    let all_decide = spec.entries.iter().all(|e| e.kind == KIND_DECIDE);
    w[0] = MAGIC;
    w[1] = VERSION;
    w[2] = u32::from(!nodes.is_empty());
    w[3] = u32::from(all_decide);
    if reads_addr_types(spec) {
        w[3] |= parapet_image::FLAG_ADDR_TYPES;
    }
    w[6] = spec.entries.len() as u32;
    w[7] = spec.partitions.len() as u32;
    w[8] = spec.policy;
    w[9] = depths.iter().copied().max().unwrap_or(0);
    w[10] = max_leaf;
    w[11] = max_ranges;
    let mut out = w;
    out[13] = out.len() as u32;
    for (r, d) in roots.iter().zip(&depths) {
        out.extend([*r, *d, 0, 0]);
    }
    out[14] = out.len() as u32;
    out[15] = nodes.len() as u32;
    for n in &nodes {
        out.extend(n);
    }
    out[25] = out.len() as u32;
    out[26] = fanout.len() as u32;
    out.extend(&fanout);
    out[16] = out.len() as u32;
    out[17] = leaves.len() as u32;
    out.extend(&leaves);
    out[18] = out.len() as u32;
    out.extend(&table);
    out[19] = out.len() as u32;
    out[20] = recs.len() as u32;
    out.extend(&recs);
    out[21] = out.len() as u32;
    out[22] = spec.verdicts.len() as u32;
    for &v in &spec.verdicts {
        out.extend([v, 0, 0, 0]);
    }
    out[23] = out.len() as u32;
    out[24] = 0;
    out[HW_TOTAL_WORDS] = out.len() as u32;
    out[HW_CHECKSUM] = checksum(&out);
    out
}

pub fn to_bytes(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// Re-seal after deliberate corruption, so only the walker's own checks
/// stand between the image and the packets.
pub fn reseal(words: &mut [u32]) {
    words[HW_CHECKSUM] = checksum(words);
}

/// A decide entry matching UDP (field 3 = 17) to destination port `port`
/// (field 5), with verdict index `verdict`.
pub fn udp_dport_entry(rule_id: u32, port: u16, verdict: u32) -> Entry {
    Entry {
        rule_id,
        kind: KIND_DECIDE,
        counted: false,
        verdict,
        resume: 0,
        constraints: vec![
            Constraint::Ranges {
                field: 3,
                wide: false,
                ranges: vec![(17, 17)],
            },
            Constraint::Ranges {
                field: 5,
                wide: false,
                ranges: vec![(u128::from(port), u128::from(port))],
            },
        ],
    }
}

/// An image declaring `refs` set references whose entry n (rule n + 1, for
/// n < `entries`) drops members of reference n; the policy accepts.
pub fn set_membership_image(entries: u32, refs: u32) -> Vec<u8> {
    let spec = ImageSpec {
        partitions: vec![Tree::Leaf((0..entries).collect())],
        entries: (0..entries)
            .map(|n| Entry {
                rule_id: n + 1,
                kind: KIND_DECIDE,
                counted: false,
                verdict: 1,
                resume: 0,
                constraints: vec![Constraint::Sets {
                    mask: 1 << n,
                    want: 1 << n,
                }],
            })
            .collect(),
        verdicts: vec![0, 1],
        policy: 0,
    };
    let mut words = assemble(&spec);
    words[hw::SET_REF_COUNT] = refs;
    reseal(&mut words);
    to_bytes(&words)
}
