//! Ethernet source addresses (`-m mac --mac-source`, nft `ether saddr`):
//! their text and their value in [`crate::Field::MacSrc`].
//!
//! The field carries a presence bit above the 48 address bits because the
//! kernel's matches fail when there is no Ethernet header to read (xt_mac:
//! no `ARPHRD_ETHER` device or no MAC header; nft: no link-layer header),
//! whether the match is negated or not. With the bit, "absent" is the value
//! 0, which neither a point `1 << 48 | mac` nor its complement within the
//! present values contains.

/// The presence bit of [`crate::Field::MacSrc`].
pub const PRESENT: u128 = 1 << 48;

/// The key value of a packet's source MAC (0 without one).
pub fn key_value(mac: Option<u64>) -> u128 {
    mac.map_or(0, |m| PRESENT | (m as u128 & (PRESENT - 1)))
}

/// The MAC of a key value, `None` for the absent value.
pub fn from_key_value(v: u128) -> Option<u64> {
    (v & PRESENT != 0).then_some((v & (PRESENT - 1)) as u64)
}

/// The values `--mac-source MAC` matches (one), or with `negate` the ones
/// `! --mac-source MAC` matches: every other present address.
pub fn match_values(mac: u64, negate: bool) -> crate::IntervalSet {
    let v = key_value(Some(mac));
    let point = crate::IntervalSet::point(v);
    if negate {
        crate::IntervalSet::range(PRESENT, 2 * PRESENT - 1).difference(&point)
    } else {
        point
    }
}

/// `XX:XX:XX:XX:XX:XX` (hex digits, either case, one or two per byte as
/// `ether_aton` and nft read them) as a 48-bit number.
pub fn parse(s: &str) -> Option<u64> {
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() != 6 {
        return None;
    }
    parts.iter().try_fold(0u64, |acc, p| {
        if p.is_empty() || p.len() > 2 {
            return None;
        }
        Some(acc << 8 | u8::from_str_radix(p, 16).ok()? as u64)
    })
}

/// A 48-bit MAC as `xx:xx:xx:xx:xx:xx` (what iptables-save and nft print).
pub fn format(mac: u64) -> String {
    (0..6)
        .rev()
        .map(|k| format!("{:02x}", (mac >> (8 * k)) as u8))
        .collect::<Vec<_>>()
        .join(":")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_values() {
        assert_eq!(parse("00:1A:2b:3c:4d:5e"), Some(0x001a_2b3c_4d5e));
        assert_eq!(parse("0:1:2:3:4:5"), Some(0x0001_0203_0405));
        assert_eq!(parse("00:11:22:33:44"), None);
        assert_eq!(parse("00:11:22:33:44:5g"), None);
        assert_eq!(format(0x001a_2b3c_4d5e), "00:1a:2b:3c:4d:5e");
        let m = 0x0200_0000_0001;
        assert!(match_values(m, false).contains(key_value(Some(m))));
        assert!(!match_values(m, true).contains(key_value(Some(m))));
        assert!(match_values(m, true).contains(key_value(Some(m + 1))));
        // no Ethernet header: neither the match nor its negation
        assert!(!match_values(m, false).contains(key_value(None)));
        assert!(!match_values(m, true).contains(key_value(None)));
        assert_eq!(from_key_value(key_value(Some(m))), Some(m));
    }
}
