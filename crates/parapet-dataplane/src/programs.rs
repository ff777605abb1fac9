//! The dataplane's programs as sets named by what uses them, and what a
//! later loader process hands over (`src/late_load.rs` loads them at
//! their first use). A leaf: the modules that ask for programs import
//! these types without importing the loading.

use std::os::fd::OwnedFd;
use std::sync::Arc;

use aya::programs::Program;

use crate::error::Result;

/// A set of the dataplane's programs, named by what uses them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Programs {
    /// `parapet_xdp`: attachments at XDP.
    pub xdp: bool,
    /// `parapet_tc`: attachments at tc ingress.
    pub tc: bool,
    /// The tc placement's four (`src/tc_hooks.rs`).
    pub tc_hooks: bool,
    /// The netfilter program (`src/netfilter.rs`).
    pub netfilter: bool,
}

/// The words of [`Programs::render`], in order.
const WORDS: [&str; 4] = ["xdp", "tc", "tc-hooks", "netfilter"];

impl Programs {
    /// Every program.
    pub const ALL: Programs = Programs {
        xdp: true,
        tc: true,
        tc_hooks: true,
        netfilter: true,
    };

    fn bits(self) -> [bool; 4] {
        [self.xdp, self.tc, self.tc_hooks, self.netfilter]
    }

    pub(crate) fn from_bits(b: [bool; 4]) -> Programs {
        Programs {
            xdp: b[0],
            tc: b[1],
            tc_hooks: b[2],
            netfilter: b[3],
        }
    }

    /// The programs in either.
    pub fn union(self, other: Programs) -> Programs {
        let (a, b) = (self.bits(), other.bits());
        Programs::from_bits(std::array::from_fn(|i| a[i] || b[i]))
    }

    /// The programs of `self` not in `other`.
    pub fn minus(self, other: Programs) -> Programs {
        let (a, b) = (self.bits(), other.bits());
        Programs::from_bits(std::array::from_fn(|i| a[i] && !b[i]))
    }

    /// Whether a program is in both.
    pub fn intersects(self, other: Programs) -> bool {
        !self.minus(self.minus(other)).is_empty()
    }

    /// No program.
    pub fn is_empty(self) -> bool {
        self == Programs::default()
    }

    /// `xdp,tc,tc-hooks,netfilter` (the programs present; `none` for no
    /// program): the loader process's flag and report.
    pub fn render(self) -> String {
        let words: Vec<&str> = WORDS
            .iter()
            .zip(self.bits())
            .filter_map(|(w, on)| on.then_some(*w))
            .collect();
        if words.is_empty() {
            "none".to_string()
        } else {
            words.join(",")
        }
    }

    /// Reads [`Programs::render`]'s text back.
    pub fn parse(text: &str) -> std::result::Result<Programs, String> {
        let mut b = [false; 4];
        for word in text.split(',').map(str::trim) {
            match WORDS.iter().position(|w| *w == word) {
                Some(i) => b[i] = true,
                None if word == "none" => {}
                None => {
                    return Err(format!(
                        "unknown program `{word}` (expected {} or none)",
                        WORDS.join(", ")
                    ))
                }
            }
        }
        Ok(Programs::from_bits(b))
    }
}

/// Programs a later loader process verified and pinned, opened
/// ([`Dataplane::open_late_handover`]); [`Dataplane::add_late_programs`]
/// makes them the dataplane's.
pub struct LatePrograms {
    pub(crate) progs: Vec<(&'static str, Program, OwnedFd)>,
    /// The netfilter program, or why there is none, when it was asked for.
    pub(crate) nf: Option<std::result::Result<OwnedFd, String>>,
}

impl std::fmt::Debug for LatePrograms {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.progs.iter().map(|(n, _, _)| *n).collect();
        f.debug_struct("LatePrograms")
            .field("progs", &names)
            .field("nf", &self.nf.as_ref().map(|r| r.as_ref().map(|_| ())))
            .finish()
    }
}

/// Loads programs of a dataplane after its load, on its pinned maps: a
/// loader process started by whoever started the first one.
pub type LateLoader = Arc<dyn Fn(Programs) -> Result<LatePrograms> + Send + Sync>;
