//! What the dataplane needs to know about classifier images
//! (`docs/image-format.md`, owned by `parapet-compile`): the header checks
//! done before an image is written to a slot, and the packet key as the
//! image's 26 words, exactly as the BPF walker builds it.
//!
//! The full structural validation lives in `parapet_compile::Image`; callers
//! should hand [`crate::Dataplane::write_image`] images that passed it. The
//! BPF walker does not trust the image either way: every read is bounds
//! checked and every loop is capped, so a bad image costs a fallback, never
//! safety.

use crate::abi::{PacketKey, FRAG_LATER};

/// `PRPT` as a little-endian u32.
pub const MAGIC: u32 = 0x5450_5250;
/// Format version the walker understands.
pub const VERSION: u32 = 1;
/// Header words.
pub const HEADER_WORDS: usize = 32;
/// Words of the packet key.
pub const KEY_WORDS: usize = 26;
/// Header word: total length in words.
pub const HW_TOTAL_WORDS: usize = 4;
/// Header word: FNV-1a checksum.
pub const HW_CHECKSUM: usize = 5;
/// The key's ctstate at XDP / tc ingress, where no conntrack has run.
pub const CT_UNTRACKED: u32 = 4;
/// ctstate INVALID (conntrack lookup on: refused by conntrack's checks).
pub const CT_INVALID: u32 = 0;
/// ctstate NEW.
pub const CT_NEW: u32 = 1;
/// ctstate ESTABLISHED.
pub const CT_ESTABLISHED: u32 = 2;
/// ctstate RELATED.
pub const CT_RELATED: u32 = 3;

/// Why bytes were refused as an image.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("not a usable classifier image: {0}")]
pub struct BadImage(pub String);

/// FNV-1a (32-bit) over the image bytes with the checksum word read as 0.
pub fn checksum(words: &[u32]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for (i, &w) in words.iter().enumerate() {
        let w = if i == HW_CHECKSUM { 0 } else { w };
        for b in w.to_le_bytes() {
            h ^= u32::from(b);
            h = h.wrapping_mul(0x0100_0193);
        }
    }
    h
}

/// Little-endian words of an image.
pub fn words(bytes: &[u8]) -> Result<Vec<u32>, BadImage> {
    if !bytes.len().is_multiple_of(4) {
        return Err(BadImage("length is not a multiple of 4".into()));
    }
    Ok(bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

/// The checks that need no knowledge of the regions: magic, version,
/// length and checksum. Catches truncation and corruption in transit.
pub fn check_header(bytes: &[u8]) -> Result<(), BadImage> {
    let w = words(bytes)?;
    if w.len() < HEADER_WORDS {
        return Err(BadImage("shorter than the header".into()));
    }
    if w[0] != MAGIC {
        return Err(BadImage("bad magic".into()));
    }
    if w[1] != VERSION {
        return Err(BadImage(format!("unsupported version {}", w[1])));
    }
    if w[HW_TOTAL_WORDS] as usize != w.len() {
        return Err(BadImage("total_words does not match the length".into()));
    }
    if w[HW_CHECKSUM] != checksum(&w) {
        return Err(BadImage("checksum mismatch".into()));
    }
    Ok(())
}

/// Big-endian u32 of 4 bytes: addresses and names are numbers whose first
/// byte is the most significant.
fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// The image key of a parsed packet, as the BPF walker builds it:
/// 128-bit values least significant word first, IPv4 addresses as the
/// 32-bit number in the first word, `iif` the interface name as a
/// big-endian number (NUL padded), no `oif` at ingress, `ctstate`
/// UNTRACKED, `fragment` 1 for non-first fragments. The set bits (words
/// 24–25) are left 0: the kernel computes them from its set maps (see
/// [`crate::Dataplane::define_set_ref`]).
pub fn key_words(key: &PacketKey, iif: Option<&str>) -> [u32; KEY_WORDS] {
    let mut w = [0u32; KEY_WORDS];
    let mut name = [0u8; 16];
    if let Some(n) = iif {
        let n = n.as_bytes();
        let len = n.len().min(16);
        name[..len].copy_from_slice(&n[..len]);
    }
    for k in 0..4 {
        let at = 12 - 4 * k;
        w[1 + k] = be32(&key.src[at..]);
        w[5 + k] = be32(&key.dst[at..]);
        w[14 + k] = be32(&name[at..]);
    }
    w[0] = key.family.into();
    w[9] = key.proto.into();
    w[10] = key.sport.into();
    w[11] = key.dport.into();
    w[12] = u32::from(key.icmp_type) << 8 | u32::from(key.icmp_code);
    w[13] = key.tcp_flags.into();
    w[22] = CT_UNTRACKED;
    w[23] = u32::from(key.frag & FRAG_LATER != 0);
    w
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::FAMILY_IPV4;

    #[test]
    fn key_words_follow_the_spec() {
        let mut k = PacketKey {
            family: FAMILY_IPV4,
            proto: 6,
            sport: 1000,
            dport: 22,
            tcp_flags: 0x12,
            frag: FRAG_LATER | 1,
            ..PacketKey::default()
        };
        k.src[12..].copy_from_slice(&[10, 0, 0, 1]);
        let w = key_words(&k, Some("eth0"));
        assert_eq!(w[0], 4);
        assert_eq!(&w[1..5], &[0x0a00_0001, 0, 0, 0]);
        assert_eq!((w[9], w[10], w[11], w[13]), (6, 1000, 22, 0x12));
        // "eth0" -> 0x65746830_00..00, least significant word first
        assert_eq!(&w[14..18], &[0, 0, 0, 0x6574_6830]);
        assert_eq!((w[22], w[23]), (CT_UNTRACKED, 1));
    }

    #[test]
    fn header_checks_catch_corruption() {
        let mut w = vec![0u32; HEADER_WORDS];
        w[0] = MAGIC;
        w[1] = VERSION;
        w[HW_TOTAL_WORDS] = HEADER_WORDS as u32;
        w[HW_CHECKSUM] = checksum(&w);
        let bytes: Vec<u8> = w.iter().flat_map(|x| x.to_le_bytes()).collect();
        assert_eq!(check_header(&bytes), Ok(()));
        let mut bad = bytes.clone();
        bad[100] ^= 1;
        assert!(check_header(&bad).is_err());
        assert!(check_header(&bytes[..bytes.len() - 4]).is_err());
        assert!(check_header(&bytes[..bytes.len() - 1]).is_err());
    }
}
