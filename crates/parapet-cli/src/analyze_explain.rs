//! `parapet lint --explain`: per finding, the rules responsible with their
//! FILE:LINE, the region concerned as boxes, a witness packet and the
//! `parapet trace` command that shows it.

use parapet_model::{format_set, Cube, Family, Field, Finding, FindingKind, Packet};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::path::Path;

/// At most this many boxes are printed per finding (the JSON has them all).
const BOXES_SHOWN: usize = 4;

/// Where each rule is: its line, by rule id.
pub struct RuleLines(HashMap<u32, u32>);

impl RuleLines {
    /// The lines of `rs`'s rules.
    pub fn of(rs: &parapet_model::Ruleset) -> RuleLines {
        RuleLines(rs.rules().map(|r| (r.id, r.origin.line)).collect())
    }

    /// Rule `id`'s line (0 when unknown, and for the policy).
    pub fn get(&self, id: u32) -> u32 {
        self.0.get(&id).copied().unwrap_or(0)
    }
}

/// The dimensions of explanation boxes, and the names of the sets behind
/// set-membership dimensions.
pub struct Dims<'a> {
    /// The analysis space's fields.
    pub fields: &'a [Field],
    /// Set reference n's set name.
    pub set_names: Vec<String>,
}

impl Dims<'_> {
    fn name(&self, f: Field) -> String {
        match f {
            Field::Set(n) => format!(
                "@{}",
                self.set_names.get(n as usize).map_or("?", String::as_str)
            ),
            _ => f.name(),
        }
    }
}

/// One box as `field values` pairs, leaving out the fields it does not
/// constrain (a set's side: `member` or `not a member`).
pub fn box_fields(d: &Dims, cube: &Cube) -> Vec<(String, String)> {
    let dims = d.fields;
    let family = match dims.iter().position(|f| *f == Field::Family) {
        Some(k) if cube.sides()[k].contains(6) && !cube.sides()[k].contains(4) => Family::V6,
        _ => Family::V4,
    };
    dims.iter()
        .zip(cube.sides())
        .filter(|(f, side)| {
            let full = match f {
                Field::SrcAddr | Field::DstAddr => {
                    side.is_full(parapet_model::width_mask(family.addr_bits()))
                }
                Field::CtState => side.is_full(parapet_model::CtState::Untracked as u128),
                _ => side.is_full(f.max_value()),
            };
            !full
        })
        .map(|(f, side)| {
            let text = if *f == Field::Family {
                if family == Family::V6 { "ipv6" } else { "ipv4" }.to_string()
            } else {
                format_set(*f, side, family)
            };
            (d.name(*f), text)
        })
        .collect()
}

/// Set memberships as text: `in @banned`, `not in @allowed`.
fn memberships(dims: &Dims, sets: &[(u16, bool)]) -> Vec<String> {
    sets.iter()
        .map(|&(n, member)| {
            format!(
                "{} {}",
                if member { "in" } else { "not in" },
                dims.name(Field::Set(n))
            )
        })
        .collect()
}

/// The command that shows a witness's fate.
pub fn trace_command(path: &Path, chain: Option<&str>, witness: &Packet) -> String {
    let chain = chain.map(|c| format!(" --chain {c}")).unwrap_or_default();
    format!(
        "parapet trace {}{chain} --packet '{witness}'",
        path.display()
    )
}

/// The rules an explanation names: `by`, and the rule itself.
fn responsible(f: &Finding) -> Vec<u32> {
    let mut ids = vec![f.rule];
    for &id in &f.by {
        if id != 0 && !ids.contains(&id) {
            ids.push(id);
        }
    }
    ids
}

/// The explanation as text lines (indented).
pub fn explain_text(
    f: &Finding,
    dims: &Dims,
    path: &Path,
    chain: Option<&str>,
    lines: &RuleLines,
) -> Vec<String> {
    let mut out = Vec::new();
    let rules: Vec<String> = responsible(f)
        .iter()
        .map(|&id| format!("rule {id} at {}:{}", path.display(), lines.get(id)))
        .collect();
    out.push(format!("    rules: {}", rules.join(", ")));
    if f.kind == FindingKind::EmptyMatch {
        let names: Vec<String> = f.explain.empty_fields.iter().map(|d| d.name()).collect();
        out.push(format!(
            "    no value of {} meets all of its conditions",
            names.join(", ")
        ));
    }
    let e = &f.explain;
    if !e.boxes.is_empty() {
        let points = e
            .points_log2
            .map(|p| format!(", 2^{p:.1} packets"))
            .unwrap_or_default();
        out.push(format!(
            "    region: {} box{}{points}",
            e.boxes.len(),
            if e.boxes.len() == 1 { "" } else { "es" }
        ));
        for cube in e.boxes.iter().take(BOXES_SHOWN) {
            let fields: Vec<String> = box_fields(dims, cube)
                .into_iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect();
            out.push(format!("      {}", fields.join("  ")));
        }
        if e.boxes.len() > BOXES_SHOWN {
            out.push(format!("      … {} more", e.boxes.len() - BOXES_SHOWN));
        }
    }
    if let Some(w) = &e.witness {
        out.push(format!("    witness: {w}"));
        if !e.witness_sets.is_empty() {
            out.push(format!(
                "    with its key {} (the trace shows the sets' current contents)",
                memberships(dims, &e.witness_sets).join(", ")
            ));
        }
        out.push(format!("    confirm: {}", trace_command(path, chain, w)));
    }
    out
}

/// The explanation as one JSON object.
pub fn explain_json(
    f: &Finding,
    dims: &Dims,
    path: &Path,
    chain: Option<&str>,
    lines: &RuleLines,
) -> Value {
    let rules: Vec<Value> = responsible(f)
        .iter()
        .map(|&id| json!({"rule": id, "line": lines.get(id)}))
        .collect();
    let boxes: Vec<Value> = f
        .explain
        .boxes
        .iter()
        .map(|c| {
            let o: Map<String, Value> = box_fields(dims, c)
                .into_iter()
                .map(|(k, v)| (k, Value::String(v)))
                .collect();
            Value::Object(o)
        })
        .collect();
    let mut o = json!({ "rules": rules, "boxes": boxes });
    if !f.explain.empty_fields.is_empty() {
        o["empty_fields"] = json!(f
            .explain
            .empty_fields
            .iter()
            .map(|d| d.name())
            .collect::<Vec<_>>());
    }
    if let Some(w) = &f.explain.witness {
        o["witness"] = json!(w.to_string());
        o["trace"] = json!(trace_command(path, chain, w));
        if !f.explain.witness_sets.is_empty() {
            o["witness_sets"] = json!(memberships(dims, &f.explain.witness_sets));
        }
    }
    o
}
