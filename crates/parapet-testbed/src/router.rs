//! A router bed: host L, router R with forwarding on, host H, each in its
//! own namespace, joined by two veth pairs, addressed in both families.
//!
//! ```text
//!  L: lv 10.71.1.2/24 fd71:1::2/64 <veth> rl 10.71.1.1 fd71:1::1   R
//!  R: rh 10.71.2.1/24 fd71:2::1/64 <veth> hv 10.71.2.2 fd71:2::2   H
//! ```
//!
//! L and H route everything through R. Static neighbours and no duplicate
//! address detection: no neighbour discovery delays a packet.

use crate::Netns;

/// Host L, router R, host H: three namespaces, deleted on drop.
#[derive(Debug)]
pub struct Router {
    /// Host L (`lv`), routing through R.
    pub l: Netns,
    /// The router: `rl` towards L, `rh` towards H.
    pub r: Netns,
    /// Host H (`hv`), routing through R.
    pub h: Netns,
}

/// Addresses of one family: (L, R towards L, R towards H, H).
#[derive(Debug)]
pub struct Family {
    /// L's address.
    pub l: &'static str,
    /// R's address on `rl`.
    pub rl: &'static str,
    /// R's address on `rh`.
    pub rh: &'static str,
    /// H's address.
    pub h: &'static str,
    /// Prefix length of both subnets.
    pub len: u8,
    /// IPv6 (else IPv4).
    pub v6: bool,
}

/// The IPv4 addresses.
pub const V4: Family = Family {
    l: "10.71.1.2",
    rl: "10.71.1.1",
    rh: "10.71.2.1",
    h: "10.71.2.2",
    len: 24,
    v6: false,
};
/// The IPv6 addresses.
pub const V6: Family = Family {
    l: "fd71:1::2",
    rl: "fd71:1::1",
    rh: "fd71:2::1",
    h: "fd71:2::2",
    len: 64,
    v6: true,
};

/// Fixed MACs (static neighbour entries name them).
pub const MAC_L: &str = "02:71:00:00:00:01";
pub const MAC_RL: &str = "02:71:00:00:00:02";
pub const MAC_RH: &str = "02:71:00:00:00:03";
pub const MAC_H: &str = "02:71:00:00:00:04";

impl Router {
    /// L -- R -- H, both families addressed, forwarding on in R. Static
    /// neighbours and no duplicate address detection: no neighbour discovery
    /// delays a probe (what ICMPv6 remains lands on rules the test ignores).
    pub fn create(tag: &str) -> Result<Router, String> {
        let t = Router {
            l: Netns::create(&format!("{tag}l"))?,
            r: Netns::create(&format!("{tag}r"))?,
            h: Netns::create(&format!("{tag}h"))?,
        };
        for ns in [&t.l, &t.r, &t.h] {
            ns.exec(&["sysctl", "-qw", "net.ipv6.conf.default.accept_dad=0"])?;
            ns.exec(&["sysctl", "-qw", "net.ipv6.conf.all.accept_dad=0"])?;
        }
        t.l.ip(&[
            "link",
            "add",
            "lv",
            "address",
            MAC_L,
            "type",
            "veth",
            "peer",
            "name",
            "rl",
            "address",
            MAC_RL,
            "netns",
            t.r.name(),
        ])?;
        t.h.ip(&[
            "link",
            "add",
            "hv",
            "address",
            MAC_H,
            "type",
            "veth",
            "peer",
            "name",
            "rh",
            "address",
            MAC_RH,
            "netns",
            t.r.name(),
        ])?;
        for a in [&V4, &V6] {
            let fam = if a.v6 { "-6" } else { "-4" };
            let with = |x: &str| format!("{x}/{}", a.len);
            let dad: &[&str] = if a.v6 { &["nodad"] } else { &[] };
            for (ns, dev, addr) in [
                (&t.l, "lv", a.l),
                (&t.r, "rl", a.rl),
                (&t.r, "rh", a.rh),
                (&t.h, "hv", a.h),
            ] {
                let cidr = with(addr);
                let mut args = vec![fam, "addr", "add", &cidr, "dev", dev];
                args.extend_from_slice(dad);
                ns.ip(&args)?;
            }
        }
        for (ns, dev) in [(&t.l, "lv"), (&t.r, "rl"), (&t.r, "rh"), (&t.h, "hv")] {
            ns.ip(&["link", "set", dev, "up"])?;
        }
        for a in [&V4, &V6] {
            let fam = if a.v6 { "-6" } else { "-4" };
            t.l.ip(&[fam, "route", "add", "default", "via", a.rl])?;
            t.h.ip(&[fam, "route", "add", "default", "via", a.rh])?;
            for (ns, addr, mac, dev) in [
                (&t.l, a.rl, MAC_RL, "lv"),
                (&t.r, a.l, MAC_L, "rl"),
                (&t.r, a.h, MAC_H, "rh"),
                (&t.h, a.rh, MAC_RH, "hv"),
            ] {
                ns.static_neighbour(addr, mac, dev)?;
            }
        }
        for (ns, addr) in [(&t.l, V6.l), (&t.r, V6.rl), (&t.r, V6.rh), (&t.h, V6.h)] {
            ns.wait_local_route(addr)?;
        }
        t.r.exec(&["sysctl", "-qw", "net.ipv4.ip_forward=1"])?;
        t.r.exec(&["sysctl", "-qw", "net.ipv6.conf.all.forwarding=1"])?;
        Ok(t)
    }
}
