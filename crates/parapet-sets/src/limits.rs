//! The limits every set obeys, in one place: the description checks them,
//! the storage sizes by them and the errors name them.

/// Default `maxelem` when none is given: 16,777,216 (not ipset's 65,536).
pub const DEFAULT_MAXELEM: usize = 1 << 24;

/// Largest `size`/`maxelem` for which the performance policy preallocates a
/// fixed hash table.
pub const FIXED_HASH_LIMIT: usize = 1 << 22;

/// Maximum points an exact (non-interval) set expands one range element into.
pub const MAX_EXPAND: u128 = 1 << 16;
