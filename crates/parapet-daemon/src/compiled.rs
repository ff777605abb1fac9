//! A ruleset ready for the daemon: parsed, with every base chain compiled,
//! and the [`Loader`] trait that makes one from text. Everything above it
//! (the loaders, the kernel glue, the state) imports this module; it
//! imports none of them.

use parapet_compile::Classifier;
use parapet_model::{ChainId, Ruleset};
use std::sync::Arc;

/// One compiled base chain.
#[derive(Clone, Debug)]
pub struct CompiledChain {
    /// `table/chain`.
    pub name: String,
    /// Where the chain is in the ruleset.
    pub chain: ChainId,
    /// The chain's policy (the kernel's fallback verdict).
    pub policy: parapet_model::Verdict,
    /// The classifier (shared with whoever walks it).
    pub classifier: Arc<Classifier>,
    /// When several base chains share one hook: all of them, in the order
    /// the kernel runs them (priority), compiled into this one classifier
    /// (`parapet_compile::compile_hook_chains`); `chain` is the first.
    /// Empty for a chain compiled alone.
    pub joined: Vec<ChainId>,
}

/// A parsed and compiled ruleset, ready to be swapped in.
#[derive(Clone)]
pub struct CompiledRuleset {
    /// The model, shared with readers and the kernel glue.
    pub ruleset: Arc<Ruleset>,
    /// The input format that was recognised (`iptables-save`, `nft`, `json`, …).
    pub format: String,
    /// Compiled base chains (empty for loaders that do not compile).
    pub compiled: Vec<CompiledChain>,
}

/// Parses and compiles ruleset text. Implementations must be deterministic:
/// the journal stores the text and replays it through the loader.
pub trait Loader: Send + Sync {
    /// Loads `text` (named `name` in messages). Errors are
    /// `FILE:LINE:COL: message` lines.
    fn load(
        &self,
        name: &str,
        text: &str,
        format: Option<&str>,
    ) -> Result<CompiledRuleset, Vec<String>>;
    /// Renders the ruleset in `format` (`iptables-save`, `nft`, `json`);
    /// `None` when the loader has no printer for that format.
    fn render(&self, _ruleset: &Ruleset, _format: &str) -> Option<Result<String, String>> {
        None
    }
}
