//! Decision lists a generated program takes (src/codegen), made from the
//! random rulesets of `parapet-gen`.

use parapet_model::{DecisionList, EntryKind, Field, Verdict};

/// `list` made eligible: interface and conntrack constraints dropped,
/// REJECT made DROP, LOG made a counter entry.
pub fn eligible(mut list: DecisionList) -> DecisionList {
    for e in &mut list.entries {
        e.matches = e.matches.without(Field::InIface).without(Field::CtState);
        match &e.kind {
            EntryKind::Decide(Verdict::Reject { .. }) => e.kind = EntryKind::Decide(Verdict::Drop),
            EntryKind::Log => e.kind = EntryKind::Count,
            _ => {}
        }
    }
    if matches!(list.policy, Verdict::Reject { .. }) {
        list.policy = Verdict::Drop;
    }
    list
}
