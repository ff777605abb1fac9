//! The socket owner of a packet this host sends: iptables `-m owner`
//! (`xt_owner.c`) and nft `meta skuid`/`skgid` (`nft_meta.c`). Both read
//! the credentials of the file behind the packet's socket
//! (`sk->sk_socket->file->f_cred->fsuid/fsgid`).
//!
//! [`Field::SkUid`](crate::Field::SkUid) and
//! [`Field::SkGid`](crate::Field::SkGid) pack the id and whether there is a
//! socket into one 32-bit value:
//! - [`NO_SOCKET`] (0): no full socket of this namespace (forwarded and
//!   received packets, a reset the kernel sends for no socket);
//! - [`NO_FILE`] (1): a socket without a file (the kernel's own sockets);
//! - `id + 2`: a socket whose file's credentials have that id.
//!
//! So `--uid-owner 1000-1999` is `[1002, 2001]`, `--socket-exists` is
//! `[1, max]`, and xt_owner's answer without a socket (every given option
//! must be negated, `owner_mt`'s `(match ^ invert) == 0`) falls out of the
//! complements: a negated option's set holds 0 and 1, a plain one holds
//! neither. nft's `meta skuid` breaks the rule without a socket or file,
//! `!=` included: its sets never hold 0 or 1.

use crate::interval::IntervalSet;

/// No full socket of the packet's namespace.
pub const NO_SOCKET: u128 = 0;
/// A socket without a file.
pub const NO_FILE: u128 = 1;
/// The largest id the packing holds (`u32::MAX - 2`; the kernel's ids are
/// below `u32::MAX`, which is "no id").
pub const MAX_ID: u32 = u32::MAX - 2;

/// The key value of a socket whose file has owner id `id`.
pub fn key_value(id: u32) -> u128 {
    id.min(MAX_ID) as u128 + 2
}

/// The ids `lo..=hi` as key values.
pub fn ids(lo: u32, hi: u32) -> IntervalSet {
    IntervalSet::range(key_value(lo), key_value(hi))
}

/// xt_owner's `--uid-owner`/`--gid-owner lo[-hi]`, `!` when `negated`.
pub fn xt_ids(lo: u32, hi: u32, negated: bool) -> IntervalSet {
    let s = ids(lo, hi);
    if negated {
        s.complement(u32::MAX as u128)
    } else {
        s
    }
}

/// xt_owner's `[!] --socket-exists` (on the uid field, which every socket
/// sets).
pub fn xt_socket_exists(negated: bool) -> IntervalSet {
    if negated {
        IntervalSet::point(NO_SOCKET)
    } else {
        IntervalSet::range(NO_FILE, u32::MAX as u128)
    }
}

/// nft's set of owner ids `s` (a socket with a file whose id is in it);
/// `!=` when `negated`: still a socket with a file.
pub fn nft_ids(s: &IntervalSet, negated: bool) -> IntervalSet {
    let any = IntervalSet::range(2, u32::MAX as u128);
    let shifted = IntervalSet::from_ranges(
        s.ranges()
            .iter()
            .filter(|r| r.0 <= MAX_ID as u128)
            .map(|r| (r.0 + 2, r.1.min(MAX_ID as u128) + 2)),
    );
    if negated {
        any.intersect(&shifted.complement(u32::MAX as u128))
    } else {
        shifted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packing() {
        assert_eq!(key_value(0), 2);
        assert_eq!(key_value(1000), 1002);
        let s = xt_ids(1000, 1999, false);
        assert!(s.contains(1002) && s.contains(2001) && !s.contains(2002));
        assert!(!s.contains(NO_SOCKET) && !s.contains(NO_FILE));
        let n = xt_ids(1000, 1000, true);
        assert!(n.contains(NO_SOCKET) && n.contains(NO_FILE) && !n.contains(1002));
        assert!(xt_socket_exists(false).contains(NO_FILE));
        assert!(!xt_socket_exists(false).contains(NO_SOCKET));
        let nft = nft_ids(&IntervalSet::point(1000), true);
        assert!(!nft.contains(NO_SOCKET) && !nft.contains(NO_FILE));
        assert!(nft.contains(2) && !nft.contains(1002));
    }
}
