//! Masked comparisons: `field & mask == value` (or `!=`).
//!
//! Most masked comparisons are a few intervals (`ip saddr & 255.0.255.0 ==
//! 10.0.1.0` is 256 of them) and parsers lower them so. A mask with many
//! zero bits above its lowest one bit (`ip6 saddr & ::ffff:ffff:ffff:ffff
//! == ::1` is 2^64 intervals; `meta mark & 0x1 == 0x1` is 2^31) is kept as
//! this constraint instead: the linear engine and the leaf check of both
//! walkers test it bit by bit, and the decision trees treat the field as a
//! wildcard for that rule (sound, because the leaf re-checks). Analysis
//! treats a rule carrying one as conditional (see `lint.rs`, `diff.rs`).

use crate::field::Field;
use serde::{Deserialize, Serialize};

/// `field & mask == value`, or `!=` when `negate`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct MaskedMatch {
    /// The field compared (a fixed field, never a set).
    pub field: Field,
    /// The bits compared.
    pub mask: u128,
    /// What the masked bits must equal. Bits outside `mask` make the
    /// comparison never equal (as in the kernel's `nft_cmp` after
    /// `nft_bitwise`).
    pub value: u128,
    /// `!=`: the masked bits must differ from `value`.
    pub negate: bool,
}

impl MaskedMatch {
    /// Does a field value satisfy the comparison?
    #[inline]
    pub fn holds(&self, v: u128) -> bool {
        (v & self.mask == self.value) != self.negate
    }

    /// True when no value can satisfy it: an `==` whose value has bits
    /// outside the mask, or a `!=` on an empty mask (every value's masked
    /// bits are 0).
    pub fn is_unsatisfiable(&self) -> bool {
        if self.negate {
            self.mask == 0 && self.value == 0
        } else {
            self.value & !self.mask != 0
        }
    }
}
