//! Network-namespace test beds shared by the end-to-end tests: two fresh
//! namespaces joined by a veth pair, removed again by a Drop guard.

#![allow(dead_code)]

use std::process::Command;

pub mod host;

/// The peer side's first address (more may be added per test).
pub const A_ADDR: [u8; 4] = [10, 203, 0, 1];
/// The filtered side's address.
pub const B_ADDR: [u8; 4] = [10, 203, 0, 2];

/// Deletes its namespaces when dropped.
pub struct Netns(Vec<String>);

impl Drop for Netns {
    fn drop(&mut self) {
        for ns in &self.0 {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

/// Runs a command; its stderr on failure.
pub fn sh(args: &[&str]) -> Result<(), String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|e| format!("{}: {e}", args[0]))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// A test bed: namespace `a` (the peer, sending from `va`) and namespace
/// `b` (the filter, receiving on `vb`).
pub struct Bed {
    /// Removes both namespaces (and with them the veth pair).
    pub guard: Netns,
    /// The peer namespace.
    pub a: String,
    /// The filtered namespace.
    pub b: String,
    /// The peer's veth.
    pub va: String,
    /// The filtered veth.
    pub vb: String,
}

fn ip4(a: [u8; 4]) -> String {
    format!("{}.{}.{}.{}", a[0], a[1], a[2], a[3])
}

/// Two namespaces joined by a veth pair; IPv6 off so no neighbour
/// discovery noise reaches the counters; static neighbours so nothing but
/// the test's packets cross the wire. `extra` are more peer addresses in
/// 10.203.0.0/24 (each gets a static neighbour entry on the filtered side
/// too, so TCP answers need no ARP either). Names carry `tag` and the pid.
pub fn testbed(tag: &str, extra: &[[u8; 4]]) -> Result<Bed, String> {
    let pid = std::process::id();
    let (a, b) = (format!("pr{tag}a{pid}"), format!("pr{tag}b{pid}"));
    let (va, vb) = (
        format!("pr{tag}va{}", pid % 10000),
        format!("pr{tag}vb{}", pid % 10000),
    );
    // Deleting a namespace that was never made is harmless, so the guard
    // can own both names from the start.
    let guard = Netns(vec![a.clone(), b.clone()]);
    sh(&["ip", "netns", "add", &a])?;
    sh(&["ip", "netns", "add", &b])?;
    sh(&[
        "ip", "link", "add", &va, "netns", &a, "type", "veth", "peer", "name", &vb, "netns", &b,
    ])?;
    for (ns, dev, addr) in [(&a, &va, A_ADDR), (&b, &vb, B_ADDR)] {
        for key in [
            "net.ipv6.conf.all.disable_ipv6=1",
            "net.ipv6.conf.default.disable_ipv6=1",
        ] {
            sh(&["ip", "netns", "exec", ns, "sysctl", "-qw", key])?;
        }
        let cidr = format!("{}/24", ip4(addr));
        sh(&["ip", "-n", ns, "addr", "add", &cidr, "dev", dev])?;
        sh(&["ip", "-n", ns, "link", "set", dev, "up"])?;
        sh(&["ip", "-n", ns, "link", "set", "lo", "up"])?;
    }
    for e in extra {
        sh(&[
            "ip",
            "-n",
            &a,
            "addr",
            "add",
            &format!("{}/24", ip4(*e)),
            "dev",
            &va,
        ])?;
    }
    let mac = |ns: &str, dev: &str| -> String {
        let out = Command::new("ip")
            .args(["-n", ns, "-o", "link", "show", dev])
            .output()
            .unwrap();
        let s = String::from_utf8_lossy(&out.stdout).to_string();
        s.split("link/ether ")
            .nth(1)
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap()
            .to_string()
    };
    let (mac_a, mac_b) = (mac(&a, &va), mac(&b, &vb));
    let neigh = |ns: &str, addr: [u8; 4], mac: &str, dev: &str| {
        sh(&[
            "ip",
            "-n",
            ns,
            "neigh",
            "replace",
            &ip4(addr),
            "lladdr",
            mac,
            "dev",
            dev,
            "nud",
            "permanent",
        ])
    };
    neigh(&a, B_ADDR, &mac_b, &va)?;
    neigh(&b, A_ADDR, &mac_a, &vb)?;
    for e in extra {
        neigh(&b, *e, &mac_a, &vb)?;
    }
    Ok(Bed {
        guard,
        a,
        b,
        va,
        vb,
    })
}

/// Says why a test did not run; the test then passes.
pub fn skip(why: &str) {
    eprintln!("skipped: {why}");
}

/// True when running as root.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Runs `body` inside network namespace `ns` on a fresh thread.
pub fn in_netns<T: Send + 'static>(ns: &str, body: impl FnOnce() -> T + Send + 'static) -> T {
    let path = format!("/var/run/netns/{ns}");
    std::thread::spawn(move || {
        let f = std::fs::File::open(&path).expect("open netns");
        // SAFETY: setns on this thread only; the fd is valid for the call.
        let rc = unsafe { libc::setns(std::os::fd::AsRawFd::as_raw_fd(&f), libc::CLONE_NEWNET) };
        assert_eq!(rc, 0, "setns failed");
        body()
    })
    .join()
    .unwrap()
}
