//! What `parapet lint` reports: findings and warnings about rules and
//! chains, with what `--explain` shows about each. Shared by the modules
//! that find them (`lint.rs`, `chain_findings.rs`, `correlation.rs`).

use crate::packet::Packet;
use crate::region::Cube;

/// What is wrong with a rule.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum FindingKind {
    /// No packet reaches it.
    Unreachable,
    /// Removing it changes no packet's verdict.
    Redundant,
    /// Its conditions contradict each other: no packet matches it.
    EmptyMatch,
    /// A user chain that no packet enters (`rule`: its first rule).
    UnreachedChain,
    /// Warning: every packet entering a user chain comes back undecided
    /// (`rule`: a jump into it that packets reach).
    ReturningChain,
    /// Warning: the rule partly overlaps the earlier rule `by` with another
    /// verdict (`by` takes the shared packets first).
    Correlation,
    /// Warning: the rule needs the packet's key in a set that is empty now:
    /// it matches nothing until the set is filled (depends on the set's
    /// current contents: `sets`).
    EmptySet,
}

impl FindingKind {
    /// The name used in output (`unreachable`, `redundant`).
    pub fn name(self) -> &'static str {
        match self {
            FindingKind::Unreachable => "unreachable",
            FindingKind::Redundant => "redundant",
            FindingKind::EmptyMatch => "empty-match",
            FindingKind::UnreachedChain => "unreached-chain",
            FindingKind::ReturningChain => "returning-chain",
            FindingKind::Correlation => "correlation",
            FindingKind::EmptySet => "empty-set",
        }
    }
}

/// One finding about one rule.
#[derive(Clone, Debug, PartialEq)]
pub struct Finding {
    /// What kind.
    pub kind: FindingKind,
    /// The rule's id.
    pub rule: u32,
    /// Unreachable: the earlier rules that take or skip every packet it
    /// matches (one rule when one suffices). Redundant: the rule that
    /// decides the witness once it is gone (0: the policy).
    pub by: Vec<u32>,
    /// Redundant: a packet the rule decides, which keeps its verdict
    /// without it.
    pub witness: Option<Packet>,
    /// Unreachable without any entry: why (`empty match`, `chain never
    /// reached`).
    pub note: Option<&'static str>,
    /// Chain findings: the chain, as TABLE/CHAIN.
    pub chain: Option<String>,
    /// What `--explain` shows: the boxes concerned and a packet in them.
    pub explain: Explain,
    /// The sets whose current contents the finding depends on (empty: it
    /// holds whatever the sets hold).
    pub sets: Vec<String>,
}

/// The region behind a finding, for `--explain`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Explain {
    /// The packets concerned, as boxes of [`LintReport::dims`]: an
    /// unreachable or redundant rule's match; the packets two correlated
    /// rules share.
    pub boxes: Vec<Cube>,
    /// log2 of the number of points of `boxes` (correlations are ranked
    /// by it).
    pub points_log2: Option<f64>,
    /// A packet of `boxes` whose trace shows the finding: decided by a rule
    /// of `by` (unreachable), by the rule itself (redundant, correlation:
    /// the earlier rule).
    pub witness: Option<Packet>,
    /// Empty match: the fields no value satisfies.
    pub empty_fields: Vec<crate::field::Field>,
    /// Which of the linted lists (base chains) the boxes and witness are of.
    pub list: Option<usize>,
    /// The set memberships the witness stands for (set reference, member
    /// or not): a `--packet` carries none, so its key must be in (or out of)
    /// these sets for its trace to show the finding.
    pub witness_sets: Vec<(u16, bool)>,
}

/// The set memberships every point of `cube` has (sides of one value).
pub(crate) fn fixed_memberships(space: &crate::region::Space, cube: &Cube) -> Vec<(u16, bool)> {
    space
        .dims()
        .iter()
        .zip(cube.sides())
        .filter_map(|(f, side)| match (f, side.ranges()) {
            (crate::field::Field::Set(n), [(lo, hi)]) if lo == hi => Some((*n, *lo == 1)),
            _ => None,
        })
        .collect()
}

impl Finding {
    /// A finding without explanation.
    pub fn new(kind: FindingKind, rule: u32, by: Vec<u32>) -> Finding {
        Finding {
            kind,
            rule,
            by,
            witness: None,
            note: None,
            chain: None,
            explain: Explain::default(),
            sets: Vec::new(),
        }
    }

    /// True for kinds that do not change the exit code.
    pub fn is_warning(&self) -> bool {
        matches!(
            self.kind,
            FindingKind::ReturningChain | FindingKind::Correlation | FindingKind::EmptySet
        )
    }
}
