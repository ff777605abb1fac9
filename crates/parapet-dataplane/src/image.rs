//! What the dataplane checks of a classifier image before writing it to a
//! slot. The format is owned by `parapet-image` (`docs/image-format.md`):
//! these are its header checks, with the dataplane's error.
//!
//! The full structural validation is `parapet_image::Image`; callers should
//! hand [`crate::Dataplane::write_image`] images that passed it. The BPF
//! walker does not trust the image either way: every read is bounds checked
//! and every loop is capped, so a bad image costs a fallback, never safety.

/// Why bytes were refused as an image.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("not a usable classifier image: {0}")]
pub struct BadImage(pub String);

/// The checks that need no knowledge of the regions: magic, version,
/// length and checksum ([`parapet_image::check_header`]). Catches
/// truncation and corruption in transit.
pub fn check_header(bytes: &[u8]) -> Result<(), BadImage> {
    parapet_image::words_of_bytes(bytes)
        .and_then(|w| parapet_image::check_header(&w))
        .map_err(|e| BadImage(e.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use parapet_image::{checksum, hw, HEADER_WORDS, MAGIC, VERSION};

    #[test]
    fn header_checks_catch_corruption() {
        let mut w = vec![0u32; HEADER_WORDS];
        w[hw::MAGIC] = MAGIC;
        w[hw::VERSION] = VERSION;
        w[hw::TOTAL_WORDS] = HEADER_WORDS as u32;
        w[hw::CHECKSUM] = checksum(&w);
        let bytes: Vec<u8> = w.iter().flat_map(|x| x.to_le_bytes()).collect();
        assert_eq!(check_header(&bytes), Ok(()));
        let mut bad = bytes.clone();
        bad[100] ^= 1;
        assert!(check_header(&bad).is_err());
        assert!(check_header(&bytes[..bytes.len() - 4]).is_err());
        assert!(check_header(&bytes[..bytes.len() - 1]).is_err());
    }
}
