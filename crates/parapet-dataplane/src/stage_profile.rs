//! The stage profile (issue 15): the program stopped after one stage of
//! its work, for `parapet bench dataplane --stages`. A bench-only object
//! (`parapet_stages.bpf.o`: the `may_goto` object compiled with
//! `-DPARAPET_STAGE_PROFILE`, `bpf/lib/stage_stop.h`) returns "pass" after
//! the stage named at load time in its frozen `.rodata`; the verifier
//! removes the code after that stop, so the time of each stop minus the
//! time of the one before it is the price of a stage. The production
//! objects are compiled without the stops: their code is unchanged.

use crate::error::{Error, Result};
use crate::load::{Dataplane, Features, LoadOptions};
use crate::set_mirror::SetSizing;

/// The stage-profile object: [`crate::BPF_OBJECT`] with the early returns
/// of `bpf/lib/stage_stop.h`. Never loaded by parapetd.
pub static BPF_OBJECT_STAGES: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/parapet_stages.bpf.o"));

/// Where a stage-profile program returns "pass", in the order the program
/// reaches them (the numbers are `bpf/lib/stage_stop.h`'s
/// `PARAPET_STOP_*`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stage {
    /// After the parser: the key zeroed, the frame parsed.
    Parse = 1,
    /// At the start of the image walk: the conntrack switch, the key
    /// extension, the call of `parapet_decide`, its statistics, the
    /// generation and scratch lookups.
    Decide = 2,
    /// After the image header is read and the image key built (address
    /// types and set bits when the image uses them).
    Key = 3,
    /// After every partition's tree is walked to its leaf.
    Descent = 4,
    /// After the merge of the leaves' candidates. The full program adds
    /// the verdict row, the rule counter, non-terminal matches and the
    /// hook statistics.
    Merge = 5,
}

impl Stage {
    /// Every stop, in program order.
    pub const ALL: [Stage; 5] = [
        Stage::Parse,
        Stage::Decide,
        Stage::Key,
        Stage::Descent,
        Stage::Merge,
    ];

    /// The stop's name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Parse => "parse",
            Stage::Decide => "decide",
            Stage::Key => "key",
            Stage::Descent => "descent",
            Stage::Merge => "merge",
        }
    }

    /// The stop named `name` ([`Stage::name`]).
    pub fn from_name(name: &str) -> Result<Stage> {
        Stage::ALL
            .into_iter()
            .find(|s| s.name() == name)
            .ok_or_else(|| {
                Error::Object(format!(
                    "no stage {name:?} (parse, decide, key, descent, merge)"
                ))
            })
    }
}

impl Dataplane {
    /// [`Dataplane::load_with`] of the stage-profile object, its XDP and
    /// tc programs returning "pass" after `stage`. For benchmarks: the
    /// verdicts it gives are not the ruleset's. Needs a kernel with
    /// `may_goto` (Linux >= 6.9): the profile prices the object such a
    /// kernel runs.
    pub fn load_stopping_after(
        opts: &LoadOptions,
        sizing: &SetSizing,
        features: &Features,
        stage: Stage,
    ) -> Result<Self> {
        Self::load_object(
            BPF_OBJECT_STAGES,
            Some(stage as u32),
            opts,
            sizing,
            features,
            None,
        )
    }
}
