//! Rendering a [`Ruleset`] back to text: iptables-save, nft, JSON.
//!
//! Syntax is rebuilt from the lowered intervals: a single prefix becomes
//! `-s 10.0.0.0/8`, a range `-m iprange --src-range`, a set whose complement
//! is simpler gets `!`, several ports become `-m multiport`. A constraint the
//! target syntax cannot say is a [`RenderError`] naming the rule; nothing is
//! approximated. Parsing the output gives back an equal model (rule ids,
//! matches, actions, policies).
//!
//! One file per syntax (`iptables`, with its match modules in
//! `ipt_matches`; `nft`); `spelling` holds what both share: the error,
//! choosing between a set and its complement, and the spellings both
//! syntaxes agree on.

mod header;
mod ipt_matches;
mod iptables;
mod masked;
mod nft;
mod owner;
mod rt;
mod spelling;
mod stateful;
mod string;
mod tcp_option;

pub use iptables::iptables_save;
pub use nft::{nft, nft_with_sets};
pub use spelling::RenderError;

use parapet_model::Ruleset;

/// The ruleset as pretty-printed JSON (the model's serde form).
///
/// ```
/// let rs = parapet_model::Ruleset::default();
/// assert!(parapet_parse::render::json(&rs).contains("\"tables\""));
/// ```
pub fn json(rs: &Ruleset) -> String {
    serde_json::to_string_pretty(rs).expect("the model serializes")
}
