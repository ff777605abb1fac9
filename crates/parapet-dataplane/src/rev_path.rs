//! The host side of the reverse-path lookups (bpf/lib/rev_path.h): the
//! XDP and tc ingress entries ask `bpf_fib_lookup` for the route back to
//! each packet's source, from loopback as nft's `fib saddr` does
//! (`flowi_iif = LOOPBACK_IFINDEX`). The helper answers only when
//! forwarding is on at the device it is given (`FWD_DISABLED` otherwise,
//! net/core/filter.c), so an install whose ruleset has the check turns
//! forwarding on at `lo` — `net.ipv4.conf.lo.forwarding` and
//! `net.ipv6.conf.lo.forwarding` in parapetd's namespace — which routes
//! nothing a host receives on its wires (only packets that arrive on `lo`
//! itself could be forwarded, and those are the host's own).
//!
//! Writing `net.ipv4.ip_forward` (or `…conf.all.forwarding`) later sets
//! every device's value, `lo`'s too: while it is off there, the lookups
//! fail and the walker abandons every image that reads the outcome
//! (never a guess; docs/dataplane.md, "Reverse path"), until the next
//! apply turns it on again — or parapetd's address watcher, which hears
//! the change (the netconf groups) and turns it on again at once
//! (`Dataplane::reads_rev_path` says whether it must).

use crate::{Error, Result};

/// The sysctl files this module writes.
const LO_FORWARDING: [&str; 2] = [
    "/proc/sys/net/ipv4/conf/lo/forwarding",
    "/proc/sys/net/ipv6/conf/lo/forwarding",
];

/// Turns forwarding on at `lo` for both families (a host without IPv6
/// has no IPv6 file: skipped). Idempotent.
pub fn lo_forwarding() -> Result<()> {
    for path in LO_FORWARDING {
        if !std::path::Path::new(path).exists() && path.contains("ipv6") {
            continue;
        }
        if std::fs::read_to_string(path).is_ok_and(|v| v.trim() == "1") {
            continue;
        }
        std::fs::write(path, "1\n").map_err(|e| {
            Error::RevPath(format!(
                "turning forwarding on at lo ({path}) for bpf_fib_lookup: {e}"
            ))
        })?;
    }
    Ok(())
}

/// Whether forwarding is on at `lo` for both families (the lookups
/// answer; a host without IPv6 needs IPv4's only).
pub fn lo_forwarding_on() -> bool {
    LO_FORWARDING
        .iter()
        .all(|path| match std::fs::read_to_string(path) {
            Ok(v) => v.trim() == "1",
            Err(_) => path.contains("ipv6") && !std::path::Path::new(path).exists(),
        })
}
