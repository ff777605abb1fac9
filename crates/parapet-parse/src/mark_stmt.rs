//! The packet-mark change in both syntaxes: nft's `meta mark set VALUE`
//! and `meta mark set mark and A xor B` (or `or B`, `xor B`, in any
//! sequence: nft_bitwise reduces them to `(mark & A) ^ B`), iptables'
//! `-j MARK --set-xmark V/M` (its other forms are read in
//! `iptables/targets.rs`). The model's [`MarkSet`] is the kernel's
//! `(mark & ~mask) ^ value` either way.

use parapet_model::MarkSet;

fn number(s: &str) -> Option<u32> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u32::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// The change the words after `meta mark set` make, when they are a
/// number or the mark itself combined with numbers by `and`/`or`/`xor`
/// (`&`, `|`, `^`); `None` for any other value (`ip dscp << 2`), which
/// parapet leaves to the kernel.
pub(crate) fn mark_set_value(words: &[String]) -> Option<MarkSet> {
    let w: Vec<&str> = words.iter().map(String::as_str).collect();
    if let [n] = w.as_slice() {
        return number(n).map(|v| MarkSet::set(v, u32::MAX));
    }
    let ops = match w.as_slice() {
        ["meta", "mark", rest @ ..] | ["mark", rest @ ..] => rest,
        _ => return None,
    };
    if ops.is_empty() || ops.len() % 2 != 0 {
        return None;
    }
    let mut change = MarkSet::default();
    for pair in ops.chunks(2) {
        let n = number(pair[1])?;
        change = change.then(match pair[0] {
            "and" | "&" => MarkSet::and(n),
            "or" | "|" => MarkSet::or(n),
            "xor" | "^" => MarkSet::xor(n),
            _ => return None,
        });
    }
    Some(change)
}

/// nft's statement for `change`, as nft lists it.
pub(crate) fn nft_mark_set(change: MarkSet) -> String {
    match (change.mask, change.value) {
        (u32::MAX, v) => format!("meta mark set {v:#x}"),
        (0, v) => format!("meta mark set mark xor {v:#x}"),
        (m, 0) => format!("meta mark set mark and {:#x}", !m),
        (m, v) => format!("meta mark set mark and {:#x} xor {v:#x}", !m),
    }
}

/// iptables' target for `change`, as iptables-save writes it.
pub(crate) fn iptables_mark_target(change: MarkSet) -> String {
    format!("-j MARK --set-xmark {:#x}/{:#x}", change.value, change.mask)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn nft_values_and_their_listing_read_back() {
        for (text, old, new) in [
            ("0x10", 0xffu32, 0x10u32),
            (
                "mark and 0xffff0054 xor 0xab",
                0x1234_5678,
                (0x1234_5678 & 0xffff_0054) ^ 0xab,
            ),
            ("mark or 0xaf", 0x100, 0x1af),
            ("meta mark & 0xff00 | 0x1", 0x1234, 0x1201),
            ("mark xor 3", 5, 6),
        ] {
            let c = mark_set_value(&words(text)).expect(text);
            assert_eq!(c.apply(old), new, "{text}");
            let listed = nft_mark_set(c);
            let back = mark_set_value(&words(listed.trim_start_matches("meta mark set "))).unwrap();
            assert_eq!(back.apply(old), new, "{listed}");
        }
        assert_eq!(mark_set_value(&words("ip dscp << 2 | 0x10")), None);
        assert_eq!(mark_set_value(&words("mark and")), None);
    }
}
