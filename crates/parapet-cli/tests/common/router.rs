//! A router bed for the netfilter-hook oracles: host L, router R with
//! forwarding on, host H (IPv4 and IPv6), crafted UDP probes through it and
//! what became of each, and a real parapetd in R.

use super::daemon::{parapet, parapetd};
use parapet_testbed::{in_netns, Netns};
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// How long a packet may take to arrive before it counts as dropped.
pub const WAIT: Duration = Duration::from_millis(1000);

/// How long a TCP connect may take before its SYN counts as dropped:
/// under the kernel's first SYN retransmission (1 s), or a dropped SYN
/// may be sent and counted twice in one twin and once in the other (a
/// CI run saw `{12: 2}` against `{12: 1}` when this was [`WAIT`]).
const CONNECT_WAIT: Duration = Duration::from_millis(700);

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Side {
    L,
    R,
    H,
}

#[allow(unused_imports)]
pub use parapet_testbed::router::{Family as Addrs, V4, V6};

/// The router bed ([`parapet_testbed::router::Router`]: `l`, `r`, `h`)
/// whose teardown checks that nothing was left pinned on the host's bpffs
/// by a daemon in one of its namespaces: pin directories are named by the
/// netns inode ([`parapet_dataplane::default_pin_dir`]), and a namespace's
/// inode is its own while it lives, so the check races no other test. A
/// test that starts parapetd pinned drops a [`RemovePins`] before the bed.
pub struct Topo(parapet_testbed::router::Router);

impl std::ops::Deref for Topo {
    type Target = parapet_testbed::router::Router;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl Topo {
    /// The pin directories of daemons in the bed's namespaces.
    fn pin_dirs(&self) -> Vec<std::path::PathBuf> {
        [&self.l, &self.r, &self.h]
            .into_iter()
            .flat_map(pin_dirs_in)
            .collect()
    }
}

impl Drop for Topo {
    fn drop(&mut self) {
        let left = self.pin_dirs();
        for d in &left {
            let _ = parapet_dataplane::remove_pins(d);
        }
        // a failing test's pins are removed above; a passing test must
        // have removed its own
        if !left.is_empty() && !std::thread::panicking() {
            panic!("pins left on the host's bpffs by the router bed's daemons: {left:?}");
        }
    }
}

/// The inode of a namespace (its `/run/netns` file).
fn netns_inode(ns: &Netns) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(format!("/run/netns/{}", ns.name()))
        .unwrap_or_else(|e| panic!("netns {}: {e}", ns.name()))
        .ino()
}

/// The pin directories `/sys/fs/bpf/parapet/<inode of ns>-…`.
fn pin_dirs_in(ns: &Netns) -> Vec<std::path::PathBuf> {
    let root = Path::new(parapet_dataplane::pin::BPFFS).join("parapet");
    let prefix = format!("{}-", netns_inode(ns));
    std::fs::read_dir(&root)
        .map(|r| {
            r.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

/// The namespace of one side of the bed.
fn ns(t: &Topo, s: Side) -> &Netns {
    match s {
        Side::L => &t.l,
        Side::R => &t.r,
        Side::H => &t.h,
    }
}

/// A fresh router bed named after `tag`.
pub fn topo(tag: &str) -> Topo {
    let t = Topo(
        parapet_testbed::router::Router::create(tag)
            .unwrap_or_else(|e| panic!("router bed {tag}: {e}")),
    );
    // a namespace's inode is reused once it is gone: pins named by it
    // now were left by a dead namespace's daemon (links already gone
    // with its interfaces), not by this bed
    for d in t.pin_dirs() {
        let _ = parapet_dataplane::remove_pins(&d);
    }
    t
}

/// One crafted packet: UDP from `from` (source port `sport`) to `to:port`,
/// expected (if delivered) at `at` on `at_port` (differs under DNAT).
/// `reply_of`: instead, the receiver of that earlier probe answers its
/// sender (a conntrack reply).
#[derive(Clone, Copy, Debug)]
pub struct Probe {
    pub from: Side,
    pub sport: u16,
    pub to: &'static str,
    pub port: u16,
    pub at: Side,
    pub at_port: u16,
    pub reply_of: Option<usize>,
    /// A TCP connect instead (from an ephemeral port; kept open to the
    /// end, so only refused, rejected or dropped ones count cleanly).
    pub tcp: bool,
}

pub const fn p(from: Side, sport: u16, to: &'static str, port: u16, at: Side) -> Probe {
    Probe {
        from,
        sport,
        to,
        port,
        at,
        at_port: port,
        reply_of: None,
        tcp: false,
    }
}

/// A TCP connect from `from` to `to:port`, expected at `at`.
pub const fn tcp(from: Side, to: &'static str, port: u16, at: Side) -> Probe {
    Probe {
        tcp: true,
        ..p(from, 0, to, port, at)
    }
}

/// parapetd in `ns`, killed on drop.
pub struct Daemon(pub Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Removes the pins (links, maps, programs) of a daemon started pinned
/// ([`start_daemon_pinned`]) on drop: they outlive the daemon (host
/// bpffs), also when an assertion fails. Made before the daemon starts,
/// from where its pins will be (its namespace and state directory), so
/// no step of the test can come before it; dropped after the daemon
/// (declared before it) and before the bed, whose drop checks that
/// nothing was left.
pub struct RemovePins {
    netns: u64,
    state_dir: std::path::PathBuf,
}

impl RemovePins {
    /// The pins of a daemon in `ns` with its state under `dir` (the
    /// `dir` given to [`start_daemon_pinned`]).
    pub fn of(ns: &Netns, dir: &Path) -> RemovePins {
        RemovePins {
            netns: netns_inode(ns),
            state_dir: dir.join("state"),
        }
    }

    /// The daemon's pin directory (its `stats` say the same once loaded).
    pub fn dir(&self) -> std::path::PathBuf {
        parapet_dataplane::pin_dir_in_netns(self.netns, &self.state_dir)
    }

    /// Asserts that the daemon on `sock` (loaded) pins where this guard
    /// removes: its `stats` name the same directory.
    pub fn assert_daemon_pins_here(&self, sock: &Path) {
        let s = super::daemon::stats(sock);
        assert_eq!(
            s["dataplane"]["pin_dir"]
                .as_str()
                .map(std::path::PathBuf::from),
            Some(self.dir()),
            "the pins removed at the end are the daemon's: {s}"
        );
    }
}

impl Drop for RemovePins {
    fn drop(&mut self) {
        let _ = parapet_dataplane::remove_pins(&self.dir());
    }
}

/// parapetd in `ns` with its state under `dir`, once it answers on `sock`.
pub fn start_daemon(ns: &Netns, dir: &Path, sock: &Path) -> Daemon {
    start_daemon_with(ns, dir, sock, &[])
}

/// [`start_daemon`] with more parapetd flags.
pub fn start_daemon_with(ns: &Netns, dir: &Path, sock: &Path, flags: &[&str]) -> Daemon {
    spawn_daemon(ns.command(parapetd(dir)), dir, sock, flags)
}

/// [`start_daemon_with`], entering only the network namespace (`nsenter
/// --net`): `ip netns exec` gives the daemon a private mount namespace,
/// so its pins under bpffs would die with it; these outlive it, as on a
/// host.
#[allow(dead_code)]
pub fn start_daemon_pinned(ns: &Netns, dir: &Path, sock: &Path, flags: &[&str]) -> Daemon {
    let mut c = std::process::Command::new("nsenter");
    c.arg(format!("--net=/run/netns/{}", ns.name()))
        .arg(parapetd(dir));
    spawn_daemon(c, dir, sock, flags)
}

fn spawn_daemon(mut c: std::process::Command, dir: &Path, sock: &Path, flags: &[&str]) -> Daemon {
    let log = std::fs::File::create(dir.join("parapetd.log")).unwrap();
    let child = c
        .arg("--socket")
        .arg(sock)
        .arg("--state-dir")
        .arg(dir.join("state"))
        .args(["--no-fsync", "--max-rules", "100"])
        .args(flags)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let d = Daemon(child);
    let t0 = Instant::now();
    // a restart with pinned links loads and verifies the BPF programs
    // before it serves: seconds on a quiet machine, 38 s measured at a
    // load of 16 on 2 cores
    while !parapet(sock, &["stats", "--json"]).status.success() {
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "parapetd did not come up: {}",
            std::fs::read_to_string(dir.join("parapetd.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    d
}

/// `bind` again while a fixed `port` is still in use, for at most two
/// seconds. Why it can be: the socket a previous round closed may live on
/// for a moment in a child that another test thread forked and has not
/// yet exec'd (close-on-exec closes it only at exec); CI saw it once on a
/// loaded machine.
fn retry_in_use<T>(port: u16, bind: impl Fn() -> std::io::Result<T>) -> std::io::Result<T> {
    let t0 = Instant::now();
    loop {
        match bind() {
            Err(e)
                if port != 0
                    && e.kind() == std::io::ErrorKind::AddrInUse
                    && t0.elapsed() < Duration::from_secs(2) =>
            {
                std::thread::sleep(Duration::from_millis(20))
            }
            r => return r,
        }
    }
}

/// A UDP socket on `port` (0: any) in `ns`, reading with a [`WAIT`] timeout.
pub fn bind(ns: &Netns, v6: bool, port: u16) -> UdpSocket {
    let any: IpAddr = if v6 {
        "::".parse().unwrap()
    } else {
        "0.0.0.0".parse().unwrap()
    };
    let s = retry_in_use(port, || {
        in_netns(ns.name(), || UdpSocket::bind(SocketAddr::new(any, port)))
    })
    .unwrap_or_else(|e| panic!("bind {port} in {}: {e}", ns.name()));
    s.set_read_timeout(Some(WAIT)).unwrap();
    s
}

/// Whether `s` receives `tag` within [`WAIT`] (other datagrams are
/// skipped); returns the sender.
pub fn received(s: &UdpSocket, tag: &[u8]) -> Option<SocketAddr> {
    let t0 = Instant::now();
    let mut buf = [0u8; 64];
    while t0.elapsed() < WAIT {
        match s.recv_from(&mut buf) {
            Ok((n, from)) if &buf[..n] == tag => return Some(from),
            Ok(_) => continue,
            Err(_) => return None,
        }
    }
    None
}

/// Whether an ICMP error came back to the connected socket `s`.
fn refused(s: &UdpSocket) -> bool {
    s.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 64];
    let r = s.recv(&mut buf);
    s.set_nonblocking(false).unwrap();
    matches!(r, Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused)
}

/// A TCP listener on `port` in `ns`.
pub fn listen(ns: &Netns, v6: bool, port: u16) -> std::net::TcpListener {
    let any: IpAddr = if v6 {
        "::".parse().unwrap()
    } else {
        "0.0.0.0".parse().unwrap()
    };
    retry_in_use(port, || {
        in_netns(ns.name(), || {
            std::net::TcpListener::bind(SocketAddr::new(any, port))
        })
    })
    .unwrap_or_else(|e| panic!("listen {port} in {}: {e}", ns.name()))
}

/// What became of a probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Fate {
    Delivered,
    Dropped,
    /// The sender's own OUTPUT hook dropped it: sendto() says EPERM.
    Refused,
    /// A reply to a probe that was not delivered: nothing was sent.
    NotSent,
    /// Answered: a TCP reset or an ICMP error came back (ECONNREFUSED).
    Rejected,
}

/// One probe's fate and counter deltas (rule id -> packets).
pub type ProbeOutcome = (Fate, BTreeMap<u32, u64>);

/// (fate, counter deltas) per probe.
pub type Outcome = Vec<ProbeOutcome>;

/// A probe's sender socket, its receiver's (side, port), and the sender's
/// address as the receiver saw it (when delivered).
type Sent = (UdpSocket, Option<(Side, u16)>, Option<SocketAddr>);

/// Sends every probe in order; `counters` reads the twin's counters.
pub fn run_probes(
    t: &Topo,
    v6: bool,
    probes: &[Probe],
    counters: &dyn Fn() -> BTreeMap<u32, u64>,
) -> Outcome {
    let mut out: Outcome = Vec::new();
    // one receiver per (side, port): probes may share them (each probe's
    // datagram carries its own tag)
    let mut rxs: BTreeMap<(Side, u16), UdpSocket> = BTreeMap::new();
    let mut lsn: BTreeMap<(Side, u16), std::net::TcpListener> = BTreeMap::new();
    let mut streams = Vec::new();
    // per probe: sender socket, its receiver, the sender as received
    let mut socks: Vec<Sent> = Vec::new();
    let mut before = counters();
    for (i, pr) in probes.iter().enumerate() {
        let tag = format!("probe {i}");
        let delivered = if let Some(j) = pr.reply_of {
            // the receiver of probe j answers where the probe came from
            // (nothing to answer when probe j did not arrive)
            let (tx, key, peer) = &socks[j];
            let rx = &rxs[&key.expect("a reply answers a probe, not a reply")];
            let fate = match peer.map(|peer| rx.send_to(tag.as_bytes(), peer)) {
                None => Fate::NotSent,
                Some(Err(_)) => Fate::Refused,
                Some(Ok(_)) if received(tx, tag.as_bytes()).is_some() => Fate::Delivered,
                Some(Ok(_)) => Fate::Dropped,
            };
            socks.push((bind(ns(t, pr.from), v6, 0), None, None));
            fate
        } else if pr.tcp {
            let key = (pr.at, pr.at_port);
            lsn.entry(key)
                .or_insert_with(|| listen(ns(t, pr.at), v6, pr.at_port));
            let to = SocketAddr::new(pr.to.parse().unwrap(), pr.port);
            let r = in_netns(ns(t, pr.from).name(), || {
                std::net::TcpStream::connect_timeout(&to, CONNECT_WAIT)
            });
            socks.push((bind(ns(t, pr.from), v6, 0), None, None));
            match r {
                Ok(s) => {
                    streams.push(s);
                    Fate::Delivered
                }
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => Fate::Rejected,
                Err(e) if e.raw_os_error() == Some(1) => Fate::Refused,
                Err(_) => Fate::Dropped,
            }
        } else {
            let tx = bind(ns(t, pr.from), v6, pr.sport);
            let key = (pr.at, pr.at_port);
            let rx = rxs
                .entry(key)
                .or_insert_with(|| bind(ns(t, pr.at), v6, pr.at_port));
            let to: SocketAddr = SocketAddr::new(pr.to.parse().unwrap(), pr.port);
            // connected: an ICMP error for it is reported (ECONNREFUSED)
            tx.connect(to).unwrap();
            let sent = tx.send(tag.as_bytes());
            let got = sent
                .as_ref()
                .ok()
                .and_then(|_| received(rx, tag.as_bytes()));
            let fate = match (&sent, got) {
                (Err(e), _) => {
                    // EPERM: netfilter dropped it at the sender's OUTPUT
                    assert_eq!(e.raw_os_error(), Some(1), "probe {i}: {e}");
                    Fate::Refused
                }
                (Ok(_), Some(_)) => Fate::Delivered,
                (Ok(_), None) if refused(&tx) => Fate::Rejected,
                (Ok(_), None) => Fate::Dropped,
            };
            socks.push((tx, Some(key), got));
            fate
        };
        let after = counters();
        let delta: BTreeMap<u32, u64> = after
            .iter()
            .filter_map(|(id, n)| {
                let d = n - before.get(id).copied().unwrap_or(0);
                (d > 0).then_some((*id, d))
            })
            .collect();
        before = after;
        out.push((delivered, delta));
        // a late arrival would be counted with the next probe
        std::thread::sleep(Duration::from_millis(20));
    }
    out
}

/// A parapetd with a ruleset applied and attached without an interface
/// (at the netfilter hooks, or at tc in the tc placement): what the
/// kernel-oracle twins compare with the kernel's own filters.
pub struct AttachedDaemon {
    /// Dropped first: the daemon stops before its directory goes (a test
    /// may stop it earlier, to restart it on the same state).
    pub daemon: Option<Daemon>,
    /// The daemon's socket.
    pub sock: std::path::PathBuf,
    /// What `parapet attach` printed.
    pub attached: String,
    /// State directory, socket and ruleset file.
    pub dir: tempfile::TempDir,
}

/// A parapetd with a ruleset applied, not attached yet ([`applied`]).
pub struct AppliedDaemon {
    /// Dropped first: the daemon stops before its directory goes.
    pub daemon: Option<Daemon>,
    /// The daemon's socket.
    pub sock: std::path::PathBuf,
    /// State directory, socket and ruleset file.
    pub dir: tempfile::TempDir,
}

impl AppliedDaemon {
    /// `parapet attach ARGS…`: its output, whether it succeeded or not.
    pub fn attach(&self, args: &[&str]) -> std::process::Output {
        let mut all = vec!["attach"];
        all.extend_from_slice(args);
        parapet(&self.sock, &all)
    }
}

/// Starts parapetd in `ns` with `flags` and applies `rules` (read as
/// `format` when given, else by its contents); panics with parapet's
/// message when the apply fails.
pub fn applied(ns: &Netns, rules: &str, format: Option<&str>, flags: &[&str]) -> AppliedDaemon {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("parapetd.sock");
    let file = dir.path().join("rules");
    std::fs::write(&file, rules).unwrap();
    let daemon = start_daemon_with(ns, dir.path(), &sock, flags);
    let mut apply = vec!["apply", file.to_str().unwrap()];
    if let Some(f) = format {
        apply.extend_from_slice(&["--format", f]);
    }
    super::daemon::ok(&sock, &apply);
    AppliedDaemon {
        daemon: Some(daemon),
        sock,
        dir,
    }
}

/// [`applied`], then attached without an interface; panics with
/// parapet's message when either step fails.
pub fn applied_and_attached(
    ns: &Netns,
    rules: &str,
    format: Option<&str>,
    flags: &[&str],
) -> AttachedDaemon {
    let d = applied(ns, rules, format, flags);
    let o = d.attach(&[]);
    assert!(
        o.status.success(),
        "parapet attach: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    AttachedDaemon {
        daemon: d.daemon,
        sock: d.sock,
        attached: String::from_utf8_lossy(&o.stdout).to_string(),
        dir: d.dir,
    }
}

/// Packets counted by rules 1..=`n`, in order, from `parapet stats`.
pub fn rule_counts(sock: &Path, n: u32) -> Vec<u64> {
    let c = super::daemon::stat_counters(&super::daemon::stats(sock));
    (1..=n).map(|r| c.get(&r).copied().unwrap_or(0)).collect()
}
