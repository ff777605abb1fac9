//! The one network-namespace test bed of parapet's kernel tests and
//! benchmarks.
//!
//! Everything here happens inside namespaces this process creates: a
//! [`Netns`] is named `pp-<tag>-<pid>-<seq>[-<side>]` (unique per process
//! and per bed, so test binaries and helpers can run side by side) and is
//! deleted when dropped — also when a test panics — and deleting a
//! namespace deletes its veth end, its addresses and every filter object
//! made in it. A [`Pair`] is two namespaces joined by one veth pair with
//! addresses, fixed MACs and static neighbour entries (no ARP: a busy
//! machine can drop it in a per-CPU backlog, losing test datagrams).
//!
//! Kernel tests are `#[ignore = "needs root"]` and call [`require_root`]
//! first, so a run without root reports them as ignored and a run with
//! `--include-ignored` but without root fails instead of passing quietly.

use std::fs::File;
use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

pub mod owner;
pub mod router;

/// Prefix of every namespace a bed creates.
pub const NS_PREFIX: &str = "pp";

static SEQ: AtomicU32 = AtomicU32::new(0);

/// True when running as root.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// `Err(reason)` unless this process can build beds: root and iproute2.
pub fn check_root() -> Result<(), String> {
    if !is_root() {
        return Err("needs root (network namespaces, BPF, netfilter)".into());
    }
    Command::new("ip")
        .arg("-V")
        .output()
        .map_err(|e| format!("needs iproute2 (`ip`): {e}"))?;
    Ok(())
}

/// Panics unless [`check_root`] holds. Root-only tests are
/// `#[ignore = "needs root"]`; one that is run anyway without root must
/// fail, not pass.
pub fn require_root() {
    if let Err(why) = check_root() {
        panic!("{why}: this test is ignored unless run as root with --include-ignored");
    }
}

/// Runs `prog args…`; its stdout, or an error naming the command and
/// carrying its stderr.
pub fn run(prog: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(prog)
        .args(args)
        .output()
        .map_err(|e| format!("{prog} {}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{prog} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Runs `ip args…` (iproute2).
pub fn ip(args: &[&str]) -> Result<String, String> {
    run("ip", args)
}

/// Waits (at most 10 s) until `addr` has its route in the `local` table
/// of namespace `ns`. The kernel inserts an IPv6 address's local route
/// from the address's DAD work (also with `nodad`), after `ip addr add` or
/// `ip link set up` has returned; a packet to the address before that is
/// forwarded or unroutable, not local.
pub fn wait_local_route(ns: &str, addr: &str) -> Result<(), String> {
    let family = if addr.contains(':') { "-6" } else { "-4" };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let routes = ip(&["-n", ns, family, "route", "show", "table", "local", addr])?;
        if !routes.trim().is_empty() {
            return Ok(());
        }
        if std::time::Instant::now() > deadline {
            return Err(format!(
                "{ns}: no local route for {addr} 10 s after it was added"
            ));
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Runs `f` on a fresh thread that has entered namespace `name`. Network
/// namespaces are per thread: sockets made and processes spawned by `f`
/// live there, the rest of the program is unaffected.
pub fn in_netns<T: Send>(name: &str, f: impl FnOnce() -> T + Send) -> T {
    let file = File::open(format!("/run/netns/{name}"))
        .unwrap_or_else(|e| panic!("opening /run/netns/{name}: {e}"));
    std::thread::scope(|s| {
        s.spawn(move || {
            enter(&file).unwrap_or_else(|e| panic!("{name}: {e}"));
            f()
        })
        .join()
        .expect("thread inside the namespace panicked")
    })
}

/// Moves the calling thread into the namespace whose file is `file`.
pub fn enter(file: &File) -> Result<(), String> {
    // SAFETY: setns on a valid namespace fd; CLONE_NEWNET only changes the
    // calling thread's network namespace.
    let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc != 0 {
        return Err(format!("setns: {}", std::io::Error::last_os_error()));
    }
    Ok(())
}

/// A network namespace of this process; deleted on drop.
#[derive(Debug)]
pub struct Netns {
    name: String,
}

impl Netns {
    /// A new namespace `pp-<tag>-<pid>-<seq>` with its loopback up.
    pub fn create(tag: &str) -> Result<Netns, String> {
        Netns::create_side(tag, None)
    }

    fn create_side(tag: &str, side: Option<&str>) -> Result<Netns, String> {
        let seq = SEQ.fetch_add(1, Ordering::Relaxed);
        let mut name = format!("{NS_PREFIX}-{tag}-{}-{seq}", std::process::id());
        if let Some(side) = side {
            name = format!("{name}-{side}");
        }
        ip(&["netns", "add", &name])?;
        // The guard exists from here on: a failure below still cleans up.
        let ns = Netns { name };
        ns.ip(&["link", "set", "lo", "up"])?;
        // Tests bind fixed ports below 50000 (crafted source ports from
        // 40000 up); an ephemeral port taken by an earlier socket in the
        // same namespace must never collide with one (a CI run failed on
        // EADDRINUSE at 42091 so).
        ns.exec(&["sysctl", "-qw", "net.ipv4.ip_local_port_range=50000 60999"])?;
        Ok(ns)
    }

    /// The namespace's name (for `ip netns exec`, `ip -n`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs `ip -n NAME args…`.
    pub fn ip(&self, args: &[&str]) -> Result<String, String> {
        let mut all = vec!["-n", &self.name];
        all.extend_from_slice(args);
        ip(&all)
    }

    /// Waits until `addr` has its `local` route: [`wait_local_route`].
    pub fn wait_local_route(&self, addr: &str) -> Result<(), String> {
        wait_local_route(&self.name, addr)
    }

    /// Waits (at most 10 s) until no IPv6 address of the namespace is
    /// tentative and each of `addrs` (without a prefix length) has its
    /// `local` route: no address event of the namespace's own comes
    /// after, and packets to them are local.
    pub fn wait_ipv6_settled(&self, addrs: &[&str]) -> Result<(), String> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !self
            .ip(&["-6", "addr", "show", "tentative"])?
            .trim()
            .is_empty()
        {
            if std::time::Instant::now() > deadline {
                return Err(format!(
                    "{}: addresses still tentative after 10 s",
                    self.name
                ));
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        addrs.iter().try_for_each(|a| self.wait_local_route(a))
    }

    /// A permanent neighbour entry (`ip neigh replace ADDR lladdr MAC dev
    /// DEV nud permanent`), IPv4 or IPv6: no ARP or neighbour discovery
    /// delays or loses a test packet.
    pub fn static_neighbour(&self, addr: &str, mac: &str, dev: &str) -> Result<String, String> {
        self.ip(&[
            "neigh",
            "replace",
            addr,
            "lladdr",
            mac,
            "dev",
            dev,
            "nud",
            "permanent",
        ])
    }

    /// Runs `argv` inside the namespace (`ip netns exec NAME argv…`).
    pub fn exec(&self, argv: &[&str]) -> Result<String, String> {
        let mut all = vec!["netns", "exec", &self.name];
        all.extend_from_slice(argv);
        ip(&all)
    }

    /// A `Command` that runs `prog` inside the namespace, to add arguments
    /// to and spawn.
    pub fn command(&self, prog: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name]).arg(prog);
        c
    }

    /// Runs `f` on a thread inside the namespace ([`in_netns`]).
    pub fn run_in<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        in_netns(&self.name, f)
    }

    /// Moves the calling thread into the namespace for good.
    pub fn enter_current_thread(&self) -> Result<(), String> {
        let path = format!("/run/netns/{}", self.name);
        let file = File::open(&path).map_err(|e| format!("opening {path}: {e}"))?;
        enter(&file)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = ip(&["netns", "del", &self.name]);
    }
}

/// Deletes namespaces `pp-<tag>-<pid>-…` whose process is gone (killed
/// with SIGKILL, which no Drop survives). Returns the names removed.
pub fn remove_stale(tag: &str) -> Vec<String> {
    let prefix = format!("{NS_PREFIX}-{tag}-");
    let Ok(list) = ip(&["netns", "list"]) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for line in list.lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        let Some(rest) = name.strip_prefix(&prefix) else {
            continue;
        };
        let pid = rest.split('-').next().unwrap_or("");
        let alive = pid.parse::<u32>().is_ok() && std::path::Path::new("/proc").join(pid).exists();
        if !alive && ip(&["netns", "del", name]).is_ok() {
            removed.push(name.to_string());
        }
    }
    removed
}

/// Formats a MAC address as `aa:bb:…`.
pub fn mac_str(m: &[u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// How a [`Pair`]'s veth is wired: end `a` in the first namespace, end
/// `b` in the second, both in one subnet.
#[derive(Debug, Clone)]
pub struct Veth<'a> {
    /// Device name in namespace a.
    pub a_dev: &'a str,
    /// Device name in namespace b.
    pub b_dev: &'a str,
    /// Address of a's end.
    pub a_addr: Ipv4Addr,
    /// Address of b's end.
    pub b_addr: Ipv4Addr,
    /// Prefix length of both addresses.
    pub prefix_len: u8,
    /// MAC of a's end (locally administered).
    pub a_mac: [u8; 6],
    /// MAC of b's end.
    pub b_mac: [u8; 6],
    /// More addresses on a's end; b gets static neighbours for them too.
    pub a_extra: &'a [Ipv4Addr],
    /// Turn IPv6 off in both namespaces, so no neighbour discovery or
    /// router solicitation crosses the wire.
    pub disable_ipv6: bool,
}

impl Default for Veth<'_> {
    fn default() -> Self {
        Veth {
            a_dev: "pp-a",
            b_dev: "pp-b",
            a_addr: Ipv4Addr::new(10, 250, 0, 1),
            b_addr: Ipv4Addr::new(10, 250, 0, 2),
            prefix_len: 30,
            a_mac: [0x02, 0x70, 0x70, 0x00, 0x00, 0x01],
            b_mac: [0x02, 0x70, 0x70, 0x00, 0x00, 0x02],
            a_extra: &[],
            disable_ipv6: false,
        }
    }
}

/// Two namespaces joined by a veth pair; dropping it deletes both (and
/// with them the veth).
#[derive(Debug)]
pub struct Pair {
    /// Namespace of end a (`<tag>…-a`).
    pub a: Netns,
    /// Namespace of end b (`<tag>…-b`).
    pub b: Netns,
}

impl Pair {
    /// Builds the pair: namespaces, veth, MACs, addresses, static
    /// neighbours, links up.
    pub fn create(tag: &str, v: &Veth) -> Result<Pair, String> {
        let pair = Pair {
            a: Netns::create_side(tag, Some("a"))?,
            b: Netns::create_side(tag, Some("b"))?,
        };
        let (a, b) = (&pair.a, &pair.b);
        let (a_mac, b_mac) = (mac_str(&v.a_mac), mac_str(&v.b_mac));
        a.ip(&[
            "link",
            "add",
            v.a_dev,
            "address",
            &a_mac,
            "type",
            "veth",
            "peer",
            "name",
            v.b_dev,
            "address",
            &b_mac,
            "netns",
            b.name(),
        ])?;
        if v.disable_ipv6 {
            for ns in [a, b] {
                for key in [
                    "net.ipv6.conf.all.disable_ipv6=1",
                    "net.ipv6.conf.default.disable_ipv6=1",
                ] {
                    ns.exec(&["sysctl", "-qw", key])?;
                }
            }
        }
        let addrs = std::iter::once(&v.a_addr).chain(v.a_extra);
        for addr in addrs.clone() {
            a.ip(&[
                "addr",
                "add",
                &format!("{addr}/{}", v.prefix_len),
                "dev",
                v.a_dev,
            ])?;
        }
        let b_cidr = format!("{}/{}", v.b_addr, v.prefix_len);
        b.ip(&["addr", "add", &b_cidr, "dev", v.b_dev])?;
        let neigh = |ns: &Netns, addr: &Ipv4Addr, mac: &str, dev: &str| {
            ns.static_neighbour(&addr.to_string(), mac, dev)
        };
        neigh(a, &v.b_addr, &b_mac, v.a_dev)?;
        for addr in addrs {
            neigh(b, addr, &a_mac, v.b_dev)?;
        }
        a.ip(&["link", "set", v.a_dev, "up"])?;
        b.ip(&["link", "set", v.b_dev, "up"])?;
        Ok(pair)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_macs() {
        assert_eq!(mac_str(&[2, 0x70, 0, 0, 0, 0xab]), "02:70:00:00:00:ab");
    }

    #[test]
    #[ignore = "needs root"]
    fn a_pair_passes_traffic_and_is_deleted_on_drop() {
        require_root();
        let v = Veth::default();
        let pair = Pair::create("tb", &v).expect("pair");
        let (a, b) = (pair.a.name().to_string(), pair.b.name().to_string());
        let exists = |n: &str| std::path::Path::new("/run/netns").join(n).exists();
        assert!(exists(&a) && exists(&b));
        let rx = pair
            .b
            .run_in(|| std::net::UdpSocket::bind((v.b_addr, 0)).unwrap());
        rx.set_read_timeout(Some(std::time::Duration::from_secs(3)))
            .unwrap();
        let to = rx.local_addr().unwrap();
        pair.a.run_in(|| {
            let tx = std::net::UdpSocket::bind((v.a_addr, 0)).unwrap();
            tx.send_to(b"hello", to).unwrap();
        });
        let mut buf = [0u8; 8];
        assert_eq!(rx.recv(&mut buf).unwrap(), 5);
        drop(pair);
        assert!(!exists(&a) && !exists(&b), "namespaces left behind");
    }
}
