//! One chain of a ruleset compiled into a classifier: flatten (jumps,
//! returns, policies into one decision list), then build. The one sequence
//! `parapet run`, the offline engines and `parapetd` share.

use crate::{BuildOptions, Classifier};
use parapet_model::{flatten, ChainId, Ruleset, Verdict};

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
