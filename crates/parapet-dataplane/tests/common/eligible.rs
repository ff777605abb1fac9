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

/// A random ruleset of `parapet-gen` (header fields only) and the
/// decision list its default chain makes.
pub struct RandomCase {
    pub seed: u64,
    pub rs: parapet_model::Ruleset,
    pub list: DecisionList,
}

/// Per seed in `seeds`: [`random_ruleset_with_header_fields`] with
/// `rules(seed)` rules, IPv6 in two seeds of three, its default chain
/// flattened and made a list a generated program takes by `make`
/// ([`pure`] or [`eligible`]).
///
/// [`random_ruleset_with_header_fields`]: parapet_gen::random_ruleset_with_header_fields
pub fn random_cases(
    seeds: impl IntoIterator<Item = u64>,
    rules: impl Fn(u64) -> usize,
    make: fn(DecisionList) -> DecisionList,
) -> impl Iterator<Item = RandomCase> {
    seeds.into_iter().map(move |seed| {
        let spec = parapet_gen::RandomSpec {
            rules: rules(seed),
            ipv6: seed % 3 != 0,
            ..parapet_gen::RandomSpec::default()
        };
        let rs = parapet_gen::random_ruleset_with_header_fields(seed, &spec);
        let list = make(parapet_model::flatten(&rs, rs.select_chain(None).unwrap()).unwrap());
        RandomCase { seed, rs, list }
    })
}

/// [`random_cases`] made [`pure`]: the random pure first-match lists the
/// tree form's tests decide.
pub fn random_pure_cases(
    seeds: impl IntoIterator<Item = u64>,
    rules: impl Fn(u64) -> usize,
) -> impl Iterator<Item = RandomCase> {
    random_cases(seeds, rules, pure)
}
