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

/// `list` made a pure first-match list of the header fields: interface
/// and conntrack constraints dropped, REJECT made DROP, every entry that
/// is not a decision (RETURN, LOG, counter, jump) left out.
pub fn pure(mut list: DecisionList) -> DecisionList {
    list.entries.retain(|e| e.kind.is_terminal());
    for e in &mut list.entries {
        e.matches = e.matches.without(Field::InIface).without(Field::CtState);
        if let EntryKind::Decide(Verdict::Reject { .. }) = e.kind {
            e.kind = EntryKind::Decide(Verdict::Drop);
        }
    }
    if matches!(list.policy, Verdict::Reject { .. }) {
        list.policy = Verdict::Drop;
    }
    list
}
