//! Per hook and interface statistics: what the program saw at each hook
//! (XDP, tc, the netfilter INPUT, FORWARD, OUTPUT, PREROUTING and
//! POSTROUTING hooks) on each
//! interface, named as this network namespace names them. `stats` shows
//! them as `dataplane.hooks`; the metrics as `parapet_hook_*_total`.

use parapet_dataplane::abi::{
    HOOK_NF_FORWARD, HOOK_NF_INPUT, HOOK_NF_OUTPUT, HOOK_NF_POSTROUTING, HOOK_NF_PREROUTING,
    HOOK_TC, HOOK_XDP,
};
use parapet_dataplane::Dataplane;
use serde_json::{json, Value};
use std::ffi::CStr;

/// The label of a hook in `stats` and the metrics.
fn hook_label(hook: u8) -> &'static str {
    match hook {
        HOOK_XDP => "xdp",
        HOOK_TC => "tc",
        HOOK_NF_INPUT => "input",
        HOOK_NF_FORWARD => "forward",
        HOOK_NF_OUTPUT => "output",
        HOOK_NF_PREROUTING => "prerouting",
        HOOK_NF_POSTROUTING => "postrouting",
        _ => "unknown",
    }
}

/// The interfaces of the caller's network namespace: (index, name).
/// `if_nameindex` asks the kernel over netlink, so it sees the namespace
/// of this thread, not whatever `/sys` shows.
fn interfaces() -> Vec<(u32, String)> {
    // SAFETY: if_nameindex returns an array ended by a zero entry, or
    // NULL; it is read before if_freenameindex frees it.
    unsafe {
        let list = libc::if_nameindex();
        if list.is_null() {
            return Vec::new();
        }
        let mut out = Vec::new();
        let mut p = list;
        while (*p).if_index != 0 && !(*p).if_name.is_null() {
            let name = CStr::from_ptr((*p).if_name).to_string_lossy().into_owned();
            out.push(((*p).if_index, name));
            p = p.add(1);
        }
        libc::if_freenameindex(list);
        out
    }
}

/// `dataplane.hooks` of `stats`: one object per hook and interface that
/// saw a packet, `interface` "other" for the column of interfaces with an
/// index of [`parapet_dataplane::HOOK_IFACES`] or more. An interface removed since is not
/// listed (its index is no longer asked for).
pub fn hooks_json(dp: &Dataplane) -> Value {
    let ifaces = interfaces();
    let indexes: Vec<u32> = ifaces.iter().map(|i| i.0).collect();
    let counts = dp.hook_counts(&indexes).unwrap_or_default();
    counts
        .iter()
        .map(|c| {
            let name = ifaces
                .iter()
                .find(|i| i.0 == c.ifindex && c.ifindex != 0)
                .map_or("other", |i| i.1.as_str());
            json!({
                "hook": hook_label(c.hook),
                "interface": name,
                "packets": c.packets,
                "bytes": c.bytes,
                "dropped": c.dropped,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_among_the_interfaces() {
        let ifs = interfaces();
        assert!(ifs.iter().any(|(i, n)| *i == 1 && n == "lo"), "{ifs:?}");
    }
}
