//! Compile stage 1, lowering: each decision-list entry becomes a box the
//! later stages cut and lay out — per field its ranges (and their hull),
//! plus a set-membership mask — and the RETURN ranges say which entries a
//! RETURN can skip.

use crate::api::CompileError;
use parapet_image::patterns::{self, Pattern};
use parapet_model::{DecisionList, EntryKind, Field};

/// Number of fixed fields a tree can cut (field ids 0..=28).
pub(crate) const FIELDS: usize = Field::FIXED.len();

/// A region of the packet space: per fixed field, an inclusive range.
pub(crate) type Region = [(u128, u128); FIELDS];

/// What lowering produces: the entries as boxes, and which of them a
/// RETURN can skip.
pub(crate) struct Lowered {
    /// One box per entry, in list order.
    pub boxes: Vec<EntryBox>,
    /// Per entry: whether a RETURN before it can resume past it.
    pub skippable: Vec<bool>,
    /// The distinct `-m string` searches: row `i` is bit `i` of the
    /// pattern hits (`parapet_image::patterns`).
    pub patterns: Vec<Pattern>,
}

/// One entry as a box, for the compiler.
#[derive(Clone, Debug)]
pub(crate) struct EntryBox {
    /// Per fixed field: the ranges, or `None` when unconstrained.
    pub ranges: [Option<Vec<(u128, u128)>>; FIELDS],
    /// Per fixed field: the hull of the ranges, or the whole field.
    pub hull: [(u128, u128); FIELDS],
    /// Set membership: bits that must equal `set_want`.
    pub set_mask: u64,
    pub set_want: u64,
    /// Some constraint is empty: never matches.
    pub never: bool,
    /// A Decide entry.
    pub decide: bool,
    /// It has a stateful condition or a masked comparison: it never covers
    /// a region, since the packets it matches may still go on to later
    /// entries.
    pub stateful: bool,
    /// Masked comparisons `(field id, mask, value, negate)`, checked at the
    /// leaf only: the trees treat the field as a wildcard for this entry.
    pub masked: Vec<(usize, u128, u128, bool)>,
}

impl EntryBox {
    /// Does the entry overlap `[lo, hi]` on field `f`?
    pub fn overlaps(&self, f: usize, lo: u128, hi: u128) -> bool {
        match &self.ranges[f] {
            None => true,
            Some(r) => r.iter().any(|&(a, b)| a <= hi && b >= lo),
        }
    }

    /// Does the entry match every packet of the region?
    pub fn covers(&self, region: &Region) -> bool {
        if self.never || self.set_mask != 0 || self.stateful {
            return false;
        }
        (0..FIELDS).all(|f| match &self.ranges[f] {
            None => true,
            Some(r) => r.iter().any(|&(a, b)| a <= region[f].0 && region[f].1 <= b),
        })
    }
}

/// The fixed field with id `id`.
pub(crate) fn field_of(id: usize) -> Field {
    Field::FIXED[id]
}

/// The whole packet space: every field over all its values.
pub(crate) fn whole_space() -> Region {
    std::array::from_fn(|f| (0, field_of(f).max_value()))
}

fn field_id(f: Field) -> Option<usize> {
    Field::FIXED.iter().position(|&x| x == f)
}

/// Lowers every entry of `list` to a box.
pub(crate) fn lower(list: &DecisionList) -> Result<Lowered, CompileError> {
    let mut patterns = Vec::new();
    Ok(Lowered {
        boxes: boxes(list, &mut patterns)?,
        skippable: skippable(list),
        patterns,
    })
}

/// Entry `e`'s `-m string` matches as one masked test of the pattern
/// hits (a bit per distinct search, `!` wanting it clear), added to
/// `rows` as needed; `None` when a search is both wanted and refused
/// (the entry never matches: the caller writes a test no packet passes).
fn pattern_test(
    e: &parapet_model::Entry,
    rows: &mut Vec<Pattern>,
) -> Result<Option<(u128, u128)>, CompileError> {
    let (mut mask, mut want, mut refused) = (0u128, 0u128, 0u128);
    for m in e.matches.payload() {
        let p = Pattern::of(m);
        let i = match rows.iter().position(|r| *r == p) {
            Some(i) => i,
            None if rows.len() < patterns::MAX_ROWS => {
                rows.push(p);
                rows.len() - 1
            }
            None => {
                return Err(CompileError::HostField {
                    rule_id: e.rule_id,
                    field: "string-rows".into(),
                })
            }
        };
        mask |= 1 << i;
        if m.invert {
            refused |= 1 << i;
        } else {
            want |= 1 << i;
        }
    }
    Ok((want & refused == 0).then_some((mask, want)))
}

fn boxes(list: &DecisionList, rows: &mut Vec<Pattern>) -> Result<Vec<EntryBox>, CompileError> {
    list.entries
        .iter()
        .map(|e| -> Result<EntryBox, CompileError> {
            let mut c = EntryBox {
                ranges: Default::default(),
                hull: whole_space(),
                set_mask: 0,
                set_want: 0,
                never: false,
                decide: e.kind.is_terminal(),
                stateful: e.is_conditional(),
                masked: Vec::new(),
            };
            // `-m string`: a masked test of the pattern hits, which the
            // walkers fill from the packet's bytes; checked at the leaf
            // only, like the TCP options below
            if e.matches.has_payload() {
                match pattern_test(e, rows)? {
                    Some((mask, want)) => {
                        c.masked.push((patterns::FIELD as usize, mask, want, false));
                    }
                    None => {
                        // `(hits & 0) == 1`: a test no packet passes
                        c.masked.push((patterns::FIELD as usize, 0, 1, false));
                        c.never = true;
                    }
                }
                c.stateful = true;
            }
            for m in e.matches.masked() {
                let id =
                    field_id(m.field).ok_or(CompileError::MaskedField { rule_id: e.rule_id })?;
                c.masked.push((id, m.mask, m.value, m.negate));
            }
            // `--tcp-option N` tests, per bitmap field: the kinds' bits
            // and the bits that must be set (one masked test per half)
            let mut options = [(0u128, 0u128); 2];
            for (field, set) in e.matches.iter() {
                if set.is_empty() {
                    c.never = true;
                }
                match field {
                    Field::TcpOption(kind) => {
                        // Over the one-bit domain the set is {0}, {1} or
                        // empty (full constraints are not stored).
                        let (key_field, bit) = parapet_model::tcp_option::key_bit(*kind);
                        let half = &mut options[(key_field == Field::TcpOptionsHigh) as usize];
                        half.0 |= bit;
                        if set.contains(1) {
                            half.1 |= bit;
                        }
                    }
                    Field::Set(n) => {
                        let bit = 1u64
                            .checked_shl(*n as u32)
                            .ok_or(CompileError::TooManySets(*n as usize + 1))?;
                        // Over the one-bit domain the set is {0}, {1} or
                        // empty (full constraints are not stored).
                        c.set_mask |= bit;
                        if set.contains(1) {
                            c.set_want |= bit;
                        }
                    }
                    f => {
                        // A field the key has no word for, or an address
                        // type set the dataplane cannot tell apart:
                        // refused, never compiled as if every packet
                        // matched it.
                        let typed = !matches!(f, Field::SrcType | Field::DstType)
                            || parapet_model::dataplane_typed(e.matches.get(Field::Family), set);
                        let id = field_id(*f).filter(|_| typed).ok_or_else(|| {
                            CompileError::HostField {
                                rule_id: e.rule_id,
                                field: f.name(),
                            }
                        })?;
                        let r = set.ranges().to_vec();
                        if let (Some(first), Some(last)) = (r.first(), r.last()) {
                            c.hull[id] = (first.0, last.1);
                        }
                        c.ranges[id] = Some(r);
                    }
                }
            }
            for (key_field, (mask, value)) in [Field::TcpOptionsLow, Field::TcpOptionsHigh]
                .into_iter()
                .zip(options)
            {
                if mask != 0 {
                    let id = field_id(key_field).expect("a fixed field");
                    c.masked.push((id, mask, value, false));
                    // checked at the leaf only: the entry covers no region
                    c.stateful = true;
                }
            }
            Ok(c)
        })
        .collect()
}

/// For each entry, whether a RETURN before it can resume past it: then an
/// earlier entry covering a region does not make the later ones
/// unreachable… unless it is itself not skippable. See
/// `tree::Builder::prune`.
fn skippable(list: &DecisionList) -> Vec<bool> {
    let n = list.entries.len();
    // A RETURN at r with resume s skips (r, s). Mark with a difference array.
    let mut diff = vec![0i64; n + 1];
    for (r, e) in list.entries.iter().enumerate() {
        if let EntryKind::Return { resume, .. } = e.kind {
            let s = (resume as usize).min(n);
            if r + 1 < s {
                diff[r + 1] += 1;
                diff[s] -= 1;
            }
        }
    }
    let mut acc = 0;
    (0..n)
        .map(|i| {
            acc += diff[i];
            acc > 0
        })
        .collect()
}
