//! nft set text out: `set NAME { type …; flags …; elements = { … } }`.

use super::format_duration;
use crate::key::fmt_range;
use crate::store::SetStore;
use parapet_model::Policy;
use std::fmt::Write;

pub(crate) fn save(store: &SetStore, only: Option<&str>, now: u64) -> String {
    let mut out = String::new();
    let names: Vec<&str> = match only {
        Some(n) => vec![n],
        None => store.names(),
    };
    for name in names {
        let Some(set) = store.get(name) else { continue };
        let d = set.desc();
        let _ = writeln!(out, "set {name} {{");
        let _ = writeln!(out, "\ttype {}", d.type_name());
        let mut flags = Vec::new();
        if d.interval {
            flags.push("interval");
        }
        if d.timeouts {
            flags.push("timeout");
        }
        if !flags.is_empty() {
            let _ = writeln!(out, "\tflags {}", flags.join(","));
        }
        if d.timeouts && d.default_timeout > 0 {
            let _ = writeln!(out, "\ttimeout {}", format_duration(d.default_timeout));
        }
        if let Some(m) = d.maxelem {
            let _ = writeln!(out, "\tsize {m}");
        }
        if d.policy == Policy::Memory {
            let _ = writeln!(out, "\tpolicy memory");
        }
        if d.counters {
            let _ = writeln!(out, "\tcounter");
        }
        if let Some(c) = &d.set_comment {
            let _ = writeln!(out, "\tcomment \"{c}\"");
        }
        let mut els = set.elements(now);
        // bitmap/hash-stored interval sets: merge runs of points back into ranges
        if d.interval
            && d.dims.len() == 1
            && matches!(
                set.backend(),
                crate::BackendKind::Bitmap
                    | crate::BackendKind::HashFixed
                    | crate::BackendKind::HashGrowable
            )
        {
            let mut merged: Vec<crate::StoredElement> = Vec::with_capacity(els.len());
            for e in els {
                if let Some(last) = merged.last_mut() {
                    let (a, b) = (&last.element, &e.element);
                    if a.ranges[0].1.checked_add(1) == Some(b.ranges[0].0)
                        && last.remaining == e.remaining
                        && a.comment == b.comment
                        && a.counters.is_none()
                        && b.counters.is_none()
                    {
                        last.element.ranges[0].1 = b.ranges[0].1;
                        continue;
                    }
                }
                merged.push(e);
            }
            els = merged;
        }
        if !els.is_empty() {
            out.push_str("\telements = { ");
            for (i, se) in els.iter().enumerate() {
                let el = &se.element;
                if i > 0 {
                    out.push_str(",\n\t\t     ");
                }
                let key: Vec<String> = el
                    .ranges()
                    .iter()
                    .zip(&d.dims)
                    .map(|(&(l, h), &k)| fmt_range(k, l, h))
                    .collect();
                out.push_str(&key.join(" . "));
                if let Some(t) = el.timeout {
                    let _ = write!(out, " timeout {}", format_duration(t));
                }
                if let Some(r) = se.remaining {
                    let _ = write!(out, " expires {}", format_duration(r));
                }
                if let Some(c) = &el.comment {
                    let _ = write!(out, " comment \"{c}\"");
                }
                if d.counters {
                    let (p, b) = el.counters.unwrap_or((0, 0));
                    let _ = write!(out, " counter packets {p} bytes {b}");
                }
            }
            out.push_str(" }\n");
        }
        out.push_str("}\n");
    }
    // nft has no set of sets: say so rather than leave the list out.
    let lists = match only {
        Some(n) => vec![n],
        None => store.list_names(),
    };
    for name in lists {
        if let Some(list) = store.list(name) {
            let members: Vec<&str> = list.live(now).map(|m| m.name.as_str()).collect();
            let _ = writeln!(
                out,
                "# list:set {name} (members: {}) has no nft equivalent",
                members.join(", ")
            );
        }
    }
    out
}
