//! CRC-32C (Castagnoli), table driven. Used to checksum every journal and
//! snapshot record, so that a torn or corrupted record is detected instead
//! of being replayed as garbage. Written here (a few lines) rather than
//! pulled in as a dependency.

const POLY: u32 = 0x82f6_3b78; // reflected Castagnoli polynomial

const fn make_table() -> [[u32; 256]; 4] {
    let mut t = [[0u32; 256]; 4];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { (c >> 1) ^ POLY } else { c >> 1 };
            k += 1;
        }
        t[0][i] = c;
        i += 1;
    }
    // Slicing-by-4 tables: t[k][i] is the CRC of byte i followed by k zero bytes.
    let mut i = 0;
    while i < 256 {
        let mut k = 1;
        while k < 4 {
            let prev = t[k - 1][i];
            t[k][i] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
            k += 1;
        }
        i += 1;
    }
    t
}

static TABLE: [[u32; 256]; 4] = make_table();

/// CRC-32C of `data`.
pub fn crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let x = crc ^ u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        crc = TABLE[3][(x & 0xff) as usize]
            ^ TABLE[2][((x >> 8) & 0xff) as usize]
            ^ TABLE[1][((x >> 16) & 0xff) as usize]
            ^ TABLE[0][(x >> 24) as usize];
    }
    for &b in chunks.remainder() {
        crc = (crc >> 8) ^ TABLE[0][((crc ^ b as u32) & 0xff) as usize];
    }
    !crc
}

#[cfg(test)]
mod tests {
    use super::crc32c;

    #[test]
    fn known_vectors() {
        // RFC 3720 (iSCSI) test vectors for CRC-32C.
        assert_eq!(crc32c(b""), 0);
        assert_eq!(crc32c(b"123456789"), 0xe306_9283);
        assert_eq!(crc32c(&[0u8; 32]), 0x8a91_36aa);
        assert_eq!(crc32c(&[0xffu8; 32]), 0x62a8_ab43);
    }

    #[test]
    fn detects_single_bit_flips() {
        let data: Vec<u8> = (0..97u8).collect();
        let good = crc32c(&data);
        for i in 0..data.len() * 8 {
            let mut d = data.clone();
            d[i / 8] ^= 1 << (i % 8);
            assert_ne!(crc32c(&d), good, "bit {i}");
        }
    }
}
