//! `-m tcp [!] --tcp-option N` (xt_tcpudp.c, `tcp_find_option`): whether
//! option kind N is among a TCP segment's options, as the kernel's walk
//! finds it: the value of [`crate::Field::TcpOption`]`(N)`, 1 present, 0
//! absent.
//!
//! The kernel's walk is not a validating parser, and a rule's answer on a
//! malformed option area is the walk's, so it is kept step for step: at
//! each position the byte is compared with N *before* it is read as a
//! kind; End of Option List (0) and No-Operation (1) advance one byte
//! (the walk does not stop at End of Option List: a kind after it is
//! found); any other kind advances by its length byte, or by one byte when
//! that length is 0 (a length of 1 makes the length byte the next kind);
//! a length running past the area ends the walk. A segment without options
//! (data offset 5) has none of them.
//!
//! What the packet model does not describe: a data offset below 5, or an
//! option area longer than the captured segment. The kernel drops such a
//! segment when the rule's earlier matches hold ("hotdrop"); parapet's
//! parsers refuse a data offset below 5 as malformed (docs/syntax.md).

/// The longest option area: a data offset of 15 words, less the 20 bytes
/// of the fixed header.
pub const MAX_LEN: usize = 40;

/// True when the kernel's walk over `options` (the bytes after the fixed
/// 20-byte header, `data offset × 4 − 20` of them) meets a byte equal to
/// `kind` at a position it reads as a kind.
pub fn present(options: &[u8], kind: u8) -> bool {
    kinds_read(options).any(|k| k == kind)
}

/// Every byte the kernel's walk over `options` reads as a kind, in order.
/// Where the walk goes never depends on the kind it looks for (it compares
/// before it steps), so the kinds one walk reads answer every
/// `--tcp-option N` at once: what [`kinds`] and the dataplane's bitmap rely
/// on.
fn kinds_read(options: &[u8]) -> impl Iterator<Item = u8> + '_ {
    let mut i = 0;
    // Every step moves on by at least one byte: at most `options.len()`
    // steps.
    std::iter::from_fn(move || {
        let &k = options.get(i)?;
        i += match (k, options.get(i + 1)) {
            (0 | 1, _) => 1,
            // the kernel reads the byte after the area here (whatever it
            // is, the walk ends: a step of at least one byte from the
            // last position)
            (_, None) | (_, Some(0)) => 1,
            (_, Some(&len)) => len as usize,
        };
        Some(k)
    })
}

/// The kinds the walk over `options` reads, as two 128-bit bitmaps: bit
/// `n` of the first is kind `n`, bit `n` of the second kind `128 + n`
/// ([`crate::Field::TcpOptionsLow`], [`crate::Field::TcpOptionsHigh`]).
/// `present(options, k)` is exactly bit `k` of this.
pub fn kinds(options: &[u8]) -> [u128; 2] {
    let mut bits = [0u128; 2];
    for k in kinds_read(options) {
        bits[(k >> 7) as usize] |= 1 << (k & 0x7f);
    }
    bits
}

/// The key field and the one-bit mask that hold kind `kind` in [`kinds`]'
/// bitmaps: what `TcpOption(kind)` is tested against in the compiled
/// engines.
pub fn key_bit(kind: u8) -> (crate::Field, u128) {
    let field = if kind < 128 {
        crate::Field::TcpOptionsLow
    } else {
        crate::Field::TcpOptionsHigh
    };
    (field, 1 << (kind & 0x7f))
}

#[cfg(test)]
mod tests {
    use super::{key_bit, kinds, present};

    #[test]
    fn the_walk_follows_lengths_and_single_byte_kinds() {
        // MSS 1460, NOP, NOP, SACK permitted
        let syn = [2, 4, 5, 0xb4, 1, 1, 4, 2];
        assert!(present(&syn, 2) && present(&syn, 1) && present(&syn, 4));
        // 5 and 0xb4 are inside the MSS option: never read as kinds
        assert!(!present(&syn, 5) && !present(&syn, 0xb4));
        // End of Option List does not stop the walk
        assert!(present(&[0, 0, 8, 2], 8));
        // a length of 0 moves one byte on, so the length byte is read as a kind
        assert!(present(&[30, 0, 9, 0], 0));
        // a length of 1 makes the length byte the next kind
        assert!(present(&[30, 1, 7, 0], 1) && present(&[30, 1, 7, 0], 7));
        // a length past the area ends the walk
        assert!(!present(&[30, 200, 7, 0], 7));
        // a kind in the last byte is found; its missing length ends the walk
        assert!(present(&[1, 1, 1, 77], 77));
        assert!(!present(&[], 1));
    }

    /// The bitmap answers every kind as the walk does, on random option
    /// areas of every length 0..=40 (malformed ones included: random
    /// lengths, NOP padding, End of Option List anywhere) and on the
    /// boundary kinds.
    #[test]
    fn the_bitmap_answers_every_kind_as_the_walk() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for round in 0..4000 {
            let len = (next() % 41) as usize;
            let area: Vec<u8> = (0..len)
                .map(|_| match next() % 8 {
                    0 => 0,
                    1 => 1,
                    2 => 2 + (next() % 6) as u8,
                    3 => [127, 128, 255][(next() % 3) as usize],
                    _ => next() as u8,
                })
                .collect();
            let bits = kinds(&area);
            for k in 0..=255u8 {
                let (field, mask) = key_bit(k);
                let half = (field == crate::Field::TcpOptionsHigh) as usize;
                assert_eq!(
                    bits[half] & mask != 0,
                    present(&area, k),
                    "round {round}, kind {k}, area {area:?}"
                );
            }
        }
        assert_eq!(kinds(&[]), [0, 0]);
        assert_eq!(
            kinds(&[0, 1, 127, 2, 128, 2, 255]),
            [1 | 2 | 1 << 127, 1 | 1 << 127]
        );
    }
}
