//! Two network namespaces joined by a veth pair, for the end-to-end
//! tests. Only touches namespaces and links it creates (removed on drop,
//! also on failure); addresses are 10.250.0.0/30 inside those namespaces.

use std::fs::File;
use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::process::Command;

/// Address of the receiving end (`ppv-rx` in namespace `rx`).
pub const RX_ADDR: Ipv4Addr = Ipv4Addr::new(10, 250, 0, 1);
/// Address of the sending end (`ppv-tx` in namespace `tx`).
pub const TX_ADDR: Ipv4Addr = Ipv4Addr::new(10, 250, 0, 2);
const RX_MAC: &str = "02:70:70:00:00:01";
const TX_MAC: &str = "02:70:70:00:00:02";

/// Runs `ip ARGS` (iproute2); the error says which command failed and why.
pub fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip {args:?}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {args:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Two namespaces and a veth pair; deleting the namespaces on drop also
/// removes the veth ends inside them.
pub struct Netns {
    pub rx: String,
    pub tx: String,
}

impl Netns {
    pub fn create(tag: &str) -> Result<Self, String> {
        let pid = std::process::id();
        let ns = Netns {
            rx: format!("pp-{tag}-{pid}-rx"),
            tx: format!("pp-{tag}-{pid}-tx"),
        };
        // Guard exists from here on: a failure below still cleans up.
        ip(&["netns", "add", &ns.rx])?;
        ip(&["netns", "add", &ns.tx])?;
        ip(&[
            "link", "add", "ppv-rx", "netns", &ns.rx, "type", "veth", "peer", "name", "ppv-tx",
            "netns", &ns.tx,
        ])?;
        let ends = [
            (&ns.rx, "ppv-rx", RX_ADDR, RX_MAC, TX_ADDR, TX_MAC),
            (&ns.tx, "ppv-tx", TX_ADDR, TX_MAC, RX_ADDR, RX_MAC),
        ];
        for (n, dev, addr, mac, peer, peer_mac) in ends {
            ip(&["-n", n, "link", "set", "dev", dev, "address", mac])?;
            ip(&["-n", n, "addr", "add", &format!("{addr}/30"), "dev", dev])?;
            // Static neighbours: a shared, busy machine can drop ARP in its
            // per-CPU backlog, and a failed resolution would lose datagrams.
            ip(&[
                "-n",
                n,
                "neigh",
                "add",
                &peer.to_string(),
                "lladdr",
                peer_mac,
                "dev",
                dev,
                "nud",
                "permanent",
            ])?;
            ip(&["-n", n, "link", "set", "lo", "up"])?;
            ip(&["-n", n, "link", "set", dev, "up"])?;
        }
        Ok(ns)
    }

    /// Run `f` on a thread that has entered namespace `name`. Sockets and
    /// attachments made there stay bound to that namespace.
    pub fn run_in<T: Send>(name: &str, f: impl FnOnce() -> T + Send) -> T {
        std::thread::scope(|s| {
            s.spawn(|| {
                let file = File::open(format!("/run/netns/{name}")).expect("netns file");
                // SAFETY: setns on a valid namespace fd; it only changes
                // this (scoped, short-lived) thread's network namespace.
                let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
                assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
                f()
            })
            .join()
            .expect("netns thread panicked")
        })
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = ip(&["netns", "del", &self.rx]);
        let _ = ip(&["netns", "del", &self.tx]);
    }
}

pub fn can_make_netns() -> Result<(), String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("needs root for network namespaces".into());
    }
    Command::new("ip")
        .arg("-V")
        .output()
        .map_err(|e| format!("iproute2 `ip` not available: {e}"))?;
    Ok(())
}
