//! Which program runs at a chain's XDP attachments ([`choose`],
//! [`choose_with_image`]): the walker, the straight-line program
//! (`attached.rs`) or the tree form (`tree/counted.rs`). docs/dataplane.md,
//! "Generated programs".

use std::str::FromStr;

use parapet_image::Image;
use parapet_model::DecisionList;

use super::asm::Asm;
use super::rules::{self, ineligible};
use super::tree::tree_ineligible;

/// The most entries a list may have for `--engine auto` to generate its
/// tree program (when the linear one would be slower): ClassBench at 100k
/// (92–100k entries) takes the split form (`tree/split.rs`, 7–8
/// programs, 11–30 s to verify). parapetd loads the tree form in the
/// background, without its state lock, while the walker enforces the new
/// ruleset (docs/daemon.md, "XDP engine"); the generation is bounded by
/// `MAX_TREE_TOTAL_INSNS` and `MAX_TREE_PROGRAMS` whatever the size.
pub const AUTO_MAX_TREE_ENTRIES: usize = 131_072;

/// The most conditional jumps a decision list's rules may take for
/// `--engine auto` to generate its program. A packet's path meets each
/// of them at most once (the rules only jump forward), so this bounds its
/// comparisons. §57 (docs/benchmarks.md): the generated program costs
/// 10 ns above the floor at one rule and 2–3 ns per worst-case rule of
/// eight comparisons, the walker 116–200 ns whatever the rules; they
/// cross between 60 and 100 such rules, 480–800 jumps. 512 (64 of them)
/// keeps to the generated side of the crossing; §60 measures both at 25.
pub const AUTO_MAX_JUMPS: usize = 512;

/// The program that runs at an XDP attachment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XdpEngine {
    /// The main program: the image walker.
    Walker,
    /// A program generated from the chain's decision list.
    Generated,
    /// The tree form: generated from the chain's compiled trees.
    GeneratedTree,
}

impl XdpEngine {
    /// Its name in `stats` (`walker`, `generated`, `generated-tree`).
    pub fn name(self) -> &'static str {
        match self {
            XdpEngine::Walker => "walker",
            XdpEngine::Generated => "generated",
            XdpEngine::GeneratedTree => "generated-tree",
        }
    }
}

/// The engine asked for (parapetd's `--engine`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EngineWant {
    /// The generated program when the list is eligible and short enough
    /// ([`AUTO_MAX_JUMPS`]), the walker otherwise.
    #[default]
    Auto,
    /// Always the walker.
    Walker,
    /// The generated program whenever the list is eligible.
    Generated,
    /// The tree form whenever the list and its image are eligible.
    GeneratedTree,
}

impl EngineWant {
    /// Its flag value.
    pub fn name(self) -> &'static str {
        match self {
            EngineWant::Auto => "auto",
            EngineWant::Walker => "walker",
            EngineWant::Generated => "generated",
            EngineWant::GeneratedTree => "generated-tree",
        }
    }
}

impl FromStr for EngineWant {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "auto" => Ok(EngineWant::Auto),
            "walker" => Ok(EngineWant::Walker),
            "generated" => Ok(EngineWant::Generated),
            "generated-tree" => Ok(EngineWant::GeneratedTree),
            other => Err(format!(
                "unknown engine `{other}` (expected auto, walker, generated or generated-tree)"
            )),
        }
    }
}

/// The engine [`choose`] picked, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Choice {
    /// The engine.
    pub engine: XdpEngine,
    /// Why, for `stats` and the log.
    pub reason: String,
}

/// The conditional jumps of `list`'s rules (no counters): the most
/// comparisons a packet meets in its generated program after the parser.
pub fn rule_jumps(list: &DecisionList) -> usize {
    let mut dry = Asm::default();
    let start = dry.label();
    rules::emit_rules(&mut dry, list, start, None);
    dry.branches()
}

/// The engine for the chain at an XDP attachment: the walker when asked
/// for, or when `list` is not eligible ([`ineligible`]); the generated
/// program when asked for, or under `auto` when its rules take at most
/// [`AUTO_MAX_JUMPS`] conditional jumps.
pub fn choose(list: &DecisionList, want: EngineWant) -> Choice {
    choose_with_image(list, None, want)
}

/// [`choose`] knowing the list's compiled `image`: the tree form when
/// asked for, or under `auto` when the linear program is not taken (too
/// many comparisons, or more entries than it holds) and the list and
/// image are eligible for the tree form ([`tree_ineligible`]) with at
/// most [`AUTO_MAX_TREE_ENTRIES`] entries.
pub fn choose_with_image(list: &DecisionList, image: Option<&Image>, want: EngineWant) -> Choice {
    let walker = |reason: String| Choice {
        engine: XdpEngine::Walker,
        reason,
    };
    let tree = |linear: String| {
        let Some(image) = image else {
            return walker(format!("{linear}; no compiled image for the tree form"));
        };
        if let Some(why) = tree_ineligible(list, image) {
            return walker(format!("{linear}; not eligible for the tree form: {why}"));
        }
        let n = list.entries.len();
        if want == EngineWant::Auto && n > AUTO_MAX_TREE_ENTRIES {
            return walker(format!(
                "{linear}; {n} entries, more than the {AUTO_MAX_TREE_ENTRIES} auto takes the tree form for (--xdp-engine generated-tree takes it)"
            ));
        }
        Choice {
            engine: XdpEngine::GeneratedTree,
            reason: format!("{linear}; the tree form ({n} entries)"),
        }
    };
    match want {
        EngineWant::Walker => return walker("engine walker requested".into()),
        EngineWant::GeneratedTree => return tree("engine generated-tree requested".into()),
        _ => {}
    }
    if let Some(why) = ineligible(list) {
        let linear = format!("not eligible for a generated program: {why}");
        return match want {
            EngineWant::Auto => tree(linear),
            _ => walker(linear),
        };
    }
    let jumps = rule_jumps(list);
    if want == EngineWant::Auto && jumps > AUTO_MAX_JUMPS {
        return tree(format!(
            "{jumps} comparisons on the longest path, more than the {AUTO_MAX_JUMPS} \
             below which a generated program is faster"
        ));
    }
    Choice {
        engine: XdpEngine::Generated,
        reason: match want {
            EngineWant::Generated => format!("engine generated requested ({jumps} comparisons)"),
            _ => format!(
                "{} entries, {jumps} comparisons on the longest path (at most {AUTO_MAX_JUMPS})",
                list.entries.len()
            ),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use parapet_model::Verdict;

    fn empty(policy: Verdict) -> DecisionList {
        DecisionList {
            entries: Vec::new(),
            policy,
            set_ref_count: 0,
        }
    }

    #[test]
    fn engine_flag_values_round_trip() {
        for w in [
            EngineWant::Auto,
            EngineWant::Walker,
            EngineWant::Generated,
            EngineWant::GeneratedTree,
        ] {
            assert_eq!(w.name().parse::<EngineWant>(), Ok(w));
        }
        assert!("tree".parse::<EngineWant>().is_err());
    }

    #[test]
    fn the_choice_follows_the_request_and_eligibility() {
        let list = empty(Verdict::Drop);
        assert_eq!(choose(&list, EngineWant::Auto).engine, XdpEngine::Generated);
        assert_eq!(choose(&list, EngineWant::Walker).engine, XdpEngine::Walker);
        let reject = empty(Verdict::Reject {
            with: Default::default(),
        });
        let c = choose(&reject, EngineWant::Generated);
        assert_eq!(c.engine, XdpEngine::Walker);
        assert!(c.reason.contains("REJECT"), "{}", c.reason);
    }
}
