//! User and group names of the socket owner matches (`-m owner
//! --uid-owner/--gid-owner`, nft `meta skuid/skgid`), resolved at load as
//! iptables and nft resolve them: through the host's `/etc/passwd` and
//! `/etc/group` (iptables calls `getpwnam`/`getgrnam`; parapet reads the
//! files, so names only a directory service knows are not found).

/// Which database a name is looked up in.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum OwnerKind {
    /// `/etc/passwd`: uids.
    User,
    /// `/etc/group`: gids.
    Group,
}

impl OwnerKind {
    fn file(self) -> &'static str {
        match self {
            OwnerKind::User => "/etc/passwd",
            OwnerKind::Group => "/etc/group",
        }
    }

    /// "user" or "group", for messages.
    pub(crate) fn noun(self) -> &'static str {
        match self {
            OwnerKind::User => "user",
            OwnerKind::Group => "group",
        }
    }
}

/// The id of `name` in the host's passwd or group file (the third field
/// of its line), if it has one.
pub(crate) fn lookup(kind: OwnerKind, name: &str) -> Option<u32> {
    let text = std::fs::read_to_string(kind.file()).ok()?;
    text.lines().find_map(|l| {
        let mut f = l.split(':');
        (f.next()? == name).then_some(())?;
        f.nth(1)?.parse().ok()
    })
}

/// A number as libxtables reads it (`strtoul` base 0: decimal, `0x` hex,
/// leading `0` octal).
fn number(s: &str) -> Option<u32> {
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u32::from_str_radix(h, 16).ok()
    } else if s.len() > 1 && s.starts_with('0') {
        u32::from_str_radix(&s[1..], 8).ok()
    } else {
        s.parse().ok()
    }
}

/// `--uid-owner`/`--gid-owner`'s value: a name (looked up first, as
/// libxt_owner does), else `N`, `N-M` or `N:M`. A reversed range loads and
/// matches no id, as in the kernel.
pub(crate) fn xt_range(kind: OwnerKind, v: &str) -> Result<(u32, u32), String> {
    if let Some(id) = lookup(kind, v) {
        return Ok((id, id));
    }
    let (a, b) = match v.split_once(['-', ':']) {
        Some((a, b)) => (number(a), number(b)),
        None => (number(v), number(v)),
    };
    match (a, b) {
        (Some(a), Some(b)) => Ok((a, b)),
        _ => Err(format!(
            "unknown {} '{v}': not in {} and not an id or an id range N-M",
            kind.noun(),
            kind.file()
        )),
    }
}

/// `meta skuid`/`skgid`'s value: a name, else `N` or `A-B` (`A <= B`).
pub(crate) fn nft_range(kind: OwnerKind, v: &str) -> Result<(u32, u32), String> {
    let one = |s: &str| lookup(kind, s).or_else(|| number(s).filter(|n| *n <= u32::MAX - 2));
    let (lo, hi) = match v.split_once('-') {
        Some((a, b)) if lookup(kind, v).is_none() => (one(a), one(b)),
        _ => (one(v), one(v)),
    };
    match (lo, hi) {
        (Some(lo), Some(hi)) if lo <= hi => Ok((lo, hi)),
        _ => Err(format!(
            "unknown {} '{v}': not in the host's {} and not an id or a range A-B",
            kind.noun(),
            kind.file()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_and_names() {
        assert_eq!(xt_range(OwnerKind::User, "1000"), Ok((1000, 1000)));
        assert_eq!(xt_range(OwnerKind::User, "10-20"), Ok((10, 20)));
        assert_eq!(xt_range(OwnerKind::User, "0x10:0x20"), Ok((16, 32)));
        assert_eq!(xt_range(OwnerKind::User, "root"), Ok((0, 0)));
        assert_eq!(xt_range(OwnerKind::Group, "root"), Ok((0, 0)));
        let e = xt_range(OwnerKind::User, "no-such-user-here").unwrap_err();
        assert!(e.contains("unknown user"), "{e}");
    }
}
