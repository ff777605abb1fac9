//! The packet key: the 57 words a walker compares (`docs/image-format.md`,
//! `PARAPET_KW_*` in `bpf/image.h`), and the one builder that makes them
//! from a [`Packet`].

use crate::{KEY_WORDS, MAX_SET_REFS};
use parapet_model::{Field, Packet};

/// Key word offset of each field id (the order of [`Field::FIXED`]).
/// The fields added after the set bitmask (ttl, dscp, length, ct status,
/// mark, ct mark, ct original destination port, ct protocol) follow it, so
/// the first 26 words keep their places. Words 34..=36 are the address
/// and packet types (field ids 20..=22), 37..=40 the source MAC (id 23),
/// 41 the first IPv6 routing header (id 24, `parapet_model::routing`), 42
/// and 43 the socket owner's uid and gid (ids 25, 26), 44..=51 the TCP
/// option kinds the segment's option area holds, two 128-bit bitmaps
/// (ids 27, 28; `parapet_model::tcp_option::kinds`); 52..=55 the
/// pattern hits (field id 30, [`crate::patterns`]: not a model field,
/// filled by the walkers); 56 the reverse-path outcome (field id 29,
/// `parapet_model::rev_path`, image version 13).
pub const KEY_OFF: [usize; 30] = [
    0, 1, 5, 9, 10, 11, 12, 13, 14, 18, 22, 23, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 41,
    42, 43, 44, 48, 56,
];
/// Whether each field id takes 4 key words (128-bit fields, and the
/// source MAC: 49 bits with its presence bit, words 37..=40, the upper two
/// always 0, so the walkers read it as they read addresses; the TCP
/// option bitmaps).
pub const KEY_WIDE: [bool; 30] = [
    false, true, true, false, false, false, false, false, true, true, false, false, false, false,
    false, false, false, false, false, false, false, false, false, true, false, false, false, true,
    true, false,
];
/// Key word offset of the set-membership bitmask (2 words).
pub const KEY_SETS: usize = 24;

/// A packet as the walkers see it: exactly the 57-word key of
/// `docs/image-format.md` (every fixed field, 128-bit values least
/// significant word first, then the set-membership bitmask). Compact on
/// purpose: a batch of keys streams through the cache.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct KeyWords {
    /// The key words.
    pub w: [u32; KEY_WORDS],
}

// Arrays longer than 32 have no derived `Default`.
impl Default for KeyWords {
    fn default() -> KeyWords {
        KeyWords { w: [0; KEY_WORDS] }
    }
}

impl KeyWords {
    /// The key of a packet with membership bitmask `sets`.
    #[inline]
    pub fn new(pkt: &Packet, sets: u64) -> KeyWords {
        let mut w = [0u32; KEY_WORDS];
        for (f, &field) in Field::FIXED.iter().enumerate() {
            let v = pkt.value(field);
            let at = KEY_OFF[f];
            if KEY_WIDE[f] {
                for k in 0..4 {
                    w[at + k] = (v >> (32 * k)) as u32;
                }
            } else {
                w[at] = v as u32;
            }
        }
        w[KEY_SETS] = sets as u32;
        w[KEY_SETS + 1] = (sets >> 32) as u32;
        KeyWords { w }
    }

    /// The key of a packet with membership as `DecisionList::classify`
    /// takes it (bit `n` = `set_bits[n]`; at most 64).
    pub fn from_bits(pkt: &Packet, set_bits: &[bool]) -> KeyWords {
        let sets = set_bits
            .iter()
            .take(MAX_SET_REFS)
            .enumerate()
            .fold(0u64, |m, (i, &b)| m | ((b as u64) << i));
        KeyWords::new(pkt, sets)
    }

    /// The value of field id `f` (0..=29).
    #[inline(always)]
    pub fn value(&self, f: usize) -> u128 {
        let at = KEY_OFF[f];
        if KEY_WIDE[f] {
            u128_at(&self.w[at..at + 4])
        } else {
            self.w[at] as u128
        }
    }

    /// The least significant word of field id `f` (what multi-way nodes
    /// read).
    #[inline(always)]
    pub fn low_word(&self, f: usize) -> u32 {
        self.w[KEY_OFF[f]]
    }

    /// The pattern hits (key words 52..=55, [`crate::patterns`]).
    #[inline(always)]
    pub fn patterns(&self) -> u128 {
        u128_at(&self.w[crate::patterns::KEY_WORD..crate::patterns::KEY_WORD + 4])
    }

    /// Sets the pattern hits (the Rust engines fill them from the
    /// packet's bytes with [`crate::patterns::hits`]).
    #[inline]
    pub fn set_patterns(&mut self, hits: u128) {
        for k in 0..4 {
            self.w[crate::patterns::KEY_WORD + k] = (hits >> (32 * k)) as u32;
        }
    }

    /// The set-membership bitmask.
    #[inline(always)]
    pub fn sets(&self) -> u64 {
        (self.w[KEY_SETS] as u64) | (self.w[KEY_SETS + 1] as u64) << 32
    }

    /// The key as the 57 words of `docs/image-format.md`, for the BPF walker
    /// and its tests.
    pub fn to_words(&self) -> [u32; KEY_WORDS] {
        self.w
    }
}

/// The 128-bit value of 4 words, least significant first (how the image
/// stores wide cuts and bounds, and the key wide fields).
#[inline(always)]
pub fn u128_at(w: &[u32]) -> u128 {
    (w[0] as u128) | (w[1] as u128) << 32 | (w[2] as u128) << 64 | (w[3] as u128) << 96
}

#[cfg(test)]
mod tests {
    use super::*;
    use parapet_model::{CtState, Family, IfName};

    #[test]
    fn key_words_follow_the_spec() {
        let mut p = Packet::v4(0x0a00_0001, 0, 6, 1000, 22);
        p.tcp_flags = 0x12;
        p.iif = IfName::new("eth0").unwrap();
        p.ct_state = CtState::Untracked;
        p.fragment = true;
        p.ct_status = 0x28;
        p.ct_orig_dport = 25;
        p.ct_proto = 6;
        (p.mark, p.ct_mark) = (0xdead_beef, 7);
        let w = KeyWords::new(&p, 1 << 33 | 1).w;
        assert_eq!(w[0], 4);
        assert_eq!(&w[1..5], &[0x0a00_0001, 0, 0, 0]);
        assert_eq!((w[9], w[10], w[11], w[13]), (6, 1000, 22, 0x12));
        // "eth0" -> 0x65746830_00..00, least significant word first
        assert_eq!(&w[14..18], &[0, 0, 0, 0x6574_6830]);
        assert_eq!((w[22], w[23]), (crate::ct::UNTRACKED, 1));
        assert_eq!((w[24], w[25]), (1, 2));
        assert_eq!((w[26], w[27], w[28], w[29]), (64, 0, 64, 0x28));
        assert_eq!((w[30], w[31], w[32], w[33]), (0xdead_beef, 7, 25, 6));
        assert_eq!((w[37], w[38]), (0, 0), "no Ethernet header: absent");
        p.mac_src = Some(0x0200_5e00_00fb);
        let k = KeyWords::new(&p, 0);
        assert_eq!(&k.w[37..41], &[0x5e00_00fb, 0x1_0200, 0, 0]);
        assert_eq!(k.value(23), 1 << 48 | 0x0200_5e00_00fb);
        assert_eq!(&k.w[41..44], &[0, 0, 0], "no socket: 0, rt reserved: 0");
        (p.sk_uid, p.sk_gid) = (1002, 1);
        let k = KeyWords::new(&p, 0);
        assert_eq!((k.w[42], k.w[43]), (1002, 1));
        assert_eq!((k.value(25), k.value(26)), (1002, 1));
        assert_eq!(&k.w[44..52], &[0; 8], "not TCP: no option kinds");
        // MSS, NOP, window scale, kind 200 (length 2): kinds 2, 1, 3 and
        // 200, least significant word first
        let mut t = Packet::v4(0x0a00_0001, 0, 6, 1000, 22);
        t.tcp_options = Some(vec![2, 4, 5, 0xb4, 1, 3, 3, 7, 200, 2, 0, 0].into_boxed_slice());
        let k = KeyWords::new(&t, 0);
        assert_eq!(&k.w[44..52], &[0b1111, 0, 0, 0, 0, 0, 1 << 8, 0]);
        assert_eq!(k.w[56], 0, "the route back through the input interface");
        t.rev_path = parapet_model::rev_path::NONE;
        assert_eq!(KeyWords::new(&t, 0).w[56], 2);
        assert_eq!(KeyWords::new(&t, 0).value(29), 2);
        let v6 = Packet::new(Family::V6, 1 << 100 | 7, 0, 17, 1, 2);
        let k = KeyWords::new(&v6, 0);
        assert_eq!(k.value(1), 1 << 100 | 7);
        assert_eq!(k.low_word(1), 7);
    }
}
