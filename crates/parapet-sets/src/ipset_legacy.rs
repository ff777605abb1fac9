//! ipset 4's spellings, which a current `ipset restore` still reads (ipset
//! 7.17 loads `-N test iphash --hashsize 128` / `-A test 10.0.0.1` /
//! `COMMIT` unchanged): the old type names are aliases of today's types, and
//! option words may carry a leading `--`. The commands themselves (`-N`,
//! `-A`, `-D`, `-F`, `-X`, `-W`, `-E`) are read by the loader next to their
//! long names.

/// Today's type name for an ipset 4 type name, as ipset's own type
/// aliases map it (`iptree`/`iptreemap` have no alias: ipset refuses them,
/// "typename 'iptree' is unknown", and so does the loader); any other name
/// is returned unchanged.
pub(crate) fn canonical_type(typ: &str) -> &str {
    match typ {
        "iphash" => "hash:ip",
        "nethash" => "hash:net",
        "ipporthash" => "hash:ip,port",
        "ipportiphash" => "hash:ip,port,ip",
        "ipportnethash" => "hash:ip,port,net",
        "ipmap" => "bitmap:ip",
        "macipmap" => "bitmap:ip,mac",
        "portmap" => "bitmap:port",
        "setlist" => "list:set",
        t => t,
    }
}

/// An option word without ipset 4's leading `--` (`--hashsize` is
/// `hashsize`; ipset refuses a single `-`, and so does the loader).
pub(crate) fn option_word(word: &str) -> &str {
    word.strip_prefix("--").unwrap_or(word)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_names_map_to_todays() {
        assert_eq!(canonical_type("iphash"), "hash:ip");
        assert_eq!(canonical_type("setlist"), "list:set");
        assert_eq!(canonical_type("hash:net"), "hash:net");
        assert_eq!(canonical_type("iptree"), "iptree");
        assert_eq!(option_word("--hashsize"), "hashsize");
        assert_eq!(option_word("-hashsize"), "-hashsize");
    }
}
