//! What a structure built from a list (a classifier from rules, a set
//! backend from elements) optimizes for: nft's `policy performance|memory`.

use std::fmt;

/// Performance or memory: the meta-engine's and the set backends' choice.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Policy {
    /// Fastest lookups (within the memory budget, for classifiers).
    #[default]
    Performance,
    /// Smallest memory (classifiers: the smallest image that still avoids
    /// a full linear scan on big lists).
    Memory,
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Policy::Performance => "performance",
            Policy::Memory => "memory",
        })
    }
}
