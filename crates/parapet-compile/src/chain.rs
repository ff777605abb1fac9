//! One chain of a ruleset compiled into a classifier: flatten (jumps,
//! returns, policies into one decision list), then build. The one sequence
//! `parapet run`, the offline engines and `parapetd` share.

use crate::{BuildOptions, Classifier};
use parapet_model::{
    flatten, flatten_marks_unresolved, join_at_hook, ChainId, Family, Hook, Ruleset, TableFamily,
    Verdict, DEFAULT_MAX_ENTRIES,
};

/// Compiles `chain` of `rs`: the classifier and the chain's policy (the
/// verdict when no rule decides). Errors are the flattener's or the
/// builder's message.
pub fn compile_chain(
    rs: &Ruleset,
    chain: ChainId,
    opts: &BuildOptions,
) -> Result<(Classifier, Verdict), String> {
    let list = flatten(rs, chain).map_err(|e| e.to_string())?;
    let classifier = Classifier::build(&list, opts).map_err(|e| e.to_string())?;
    Ok((classifier, list.policy))
}

/// The base chains of `rs` that share a hook with another, per hook, each
/// group in the order the kernel runs them: by priority, ties in file
/// order. Hooks with one base chain are not listed.
pub fn shared_hooks(rs: &Ruleset) -> Vec<(Hook, Vec<ChainId>)> {
    let mut groups: Vec<(Hook, Vec<(i32, ChainId)>)> = Vec::new();
    let ids = rs
        .tables
        .iter()
        .enumerate()
        .flat_map(|(table, t)| (0..t.chains.len()).map(move |chain| ChainId { table, chain }));
    for id in ids {
        let Some(base) = rs.chain(id).base.as_ref() else {
            continue;
        };
        match groups.iter_mut().find(|(h, _)| *h == base.hook) {
            Some((_, g)) => g.push((base.priority, id)),
            None => groups.push((base.hook, vec![(base.priority, id)])),
        }
    }
    groups
        .into_iter()
        .filter(|(_, g)| g.len() > 1)
        .map(|(h, mut g)| {
            g.sort_by_key(|(p, _)| *p);
            (h, g.into_iter().map(|(_, id)| id).collect())
        })
        .collect()
}

/// Compiles base chains that share one hook (`chains`, in the order the
/// kernel runs them) into one classifier that decides as the kernel's
/// sequence of them ([`parapet_model::join_at_hook`]), and its policy.
pub fn compile_hook_chains(
    rs: &Ruleset,
    chains: &[ChainId],
    opts: &BuildOptions,
) -> Result<(Classifier, Verdict), String> {
    let one_family = chains
        .iter()
        .all(|id| rs.tables[id.table].family == rs.tables[chains[0].table].family);
    let mut lists = Vec::new();
    for id in chains {
        // a mark one chain sets is the mark the next reads: the joined
        // list's mark changes are rewritten once, below
        let list =
            flatten_marks_unresolved(rs, *id, DEFAULT_MAX_ENTRIES).map_err(|e| e.to_string())?;
        let family = match rs.tables[id.table].family {
            _ if one_family => None,
            TableFamily::Ip => Some(Family::V4),
            TableFamily::Ip6 => Some(Family::V6),
            TableFamily::Inet => None,
        };
        lists.push((list, family));
    }
    let mut list = join_at_hook(lists);
    list.resolve_marks(DEFAULT_MAX_ENTRIES)
        .map_err(|e| e.to_string())?;
    list.prune_shadowed();
    let classifier = Classifier::build(&list, opts).map_err(|e| e.to_string())?;
    Ok((classifier, list.policy))
}
