//! `-m string` (xt_string.c): a pattern searched in the packet's bytes.
//!
//! The kernel calls `skb_find_text(skb, from, to, config)`: at the
//! netfilter hooks `skb->data` is the network header, so offsets count
//! from the first byte of the IP header (headers included, not only the
//! payload); the search reads bytes `[from, min(to, length))` and a match
//! must lie wholly inside them (`ret + patlen <= to - from`). Boyer-Moore
//! (`bm`) and Knuth-Morris-Pratt (`kmp`) find the same occurrences in a
//! packet whose bytes are in one piece (the algorithm is kept for the
//! listing). `--icase` compares through the kernel's `toupper`, whose
//! table (lib/ctype.c) also folds Latin-1: 0xdf-0xf6 and 0xf8-0xff are
//! lower case.
//!
//! The packet model holds the bytes only when the packet says them
//! ([`crate::Packet::datagram`]); without them nothing is found, so a
//! rule's `--string` does not match and its `! --string` does.

use serde::{Deserialize, Serialize};

/// The longest pattern (`XT_STRING_MAX_PATTERN_SIZE`).
pub const MAX_PATTERN: usize = 128;

/// The kernel's text search algorithm (`--algo`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum StringAlgo {
    /// Boyer-Moore (`ts_bm`).
    Bm,
    /// Knuth-Morris-Pratt (`ts_kmp`).
    Kmp,
}

impl StringAlgo {
    /// The name `--algo` takes.
    pub fn name(self) -> &'static str {
        match self {
            StringAlgo::Bm => "bm",
            StringAlgo::Kmp => "kmp",
        }
    }
}

/// One `-m string` match (its `!` is the rule's: [`StringMatch::invert`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct StringMatch {
    /// The pattern, 1 to [`MAX_PATTERN`] bytes.
    pub pattern: Vec<u8>,
    /// `--algo`.
    pub algo: StringAlgo,
    /// `--from`: the first byte searched, from the network header.
    pub from: u16,
    /// `--to`: the search stops before this byte (65535 unless given).
    pub to: u16,
    /// `--icase`.
    pub icase: bool,
    /// `! --string`: the rule matches when the pattern is not found.
    pub invert: bool,
}

/// The kernel's `toupper` (lib/ctype.c: ASCII and Latin-1 lower case).
pub fn kernel_toupper(c: u8) -> u8 {
    match c {
        b'a'..=b'z' | 0xdf..=0xf6 | 0xf8..=0xff => c - 0x20,
        _ => c,
    }
}

impl StringMatch {
    /// True when the pattern lies wholly inside bytes `[from, min(to,
    /// len))` of `datagram` (the packet from its network header).
    pub fn found(&self, datagram: &[u8]) -> bool {
        let end = datagram.len().min(self.to as usize);
        let Some(region) = datagram.get(self.from as usize..end) else {
            return false;
        };
        let same = |a: u8, b: u8| {
            if self.icase {
                kernel_toupper(a) == kernel_toupper(b)
            } else {
                a == b
            }
        };
        !self.pattern.is_empty()
            && region
                .windows(self.pattern.len())
                .any(|w| w.iter().zip(&self.pattern).all(|(&a, &b)| same(a, b)))
    }

    /// Whether the match holds for a packet with these bytes (`None`: the
    /// packet does not say them, and nothing is found).
    pub fn holds(&self, datagram: Option<&[u8]>) -> bool {
        datagram.is_some_and(|d| self.found(d)) != self.invert
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(pattern: &[u8], from: u16, to: u16, icase: bool) -> StringMatch {
        StringMatch {
            pattern: pattern.to_vec(),
            algo: StringAlgo::Bm,
            from,
            to,
            icase,
            invert: false,
        }
    }

    #[test]
    fn the_pattern_must_lie_inside_from_to() {
        let d = b"0123456789abcdef";
        assert!(m(b"345", 0, 65535, false).found(d));
        assert!(m(b"345", 3, 6, false).found(d));
        assert!(!m(b"345", 4, 65535, false).found(d));
        assert!(!m(b"345", 0, 5, false).found(d));
        assert!(!m(b"f!", 0, 65535, false).found(d));
        assert!(!m(b"0", 20, 65535, false).found(d));
        assert!(m(b"ABC", 0, 65535, true).found(d));
        assert!(!m(b"ABC", 0, 65535, false).found(d));
        // Latin-1 folds as the kernel's table says
        assert!(m(&[0xc0], 0, 65535, true).found(&[0xe0]));
        assert!(!m(&[0xd7], 0, 65535, true).found(&[0xf7]));
        let mut not = m(b"zz", 0, 65535, false);
        not.invert = true;
        assert!(not.holds(Some(d)) && not.holds(None));
    }
}
