//! What the fail-closed tests share: a parapetd instance in a network
//! namespace (entered with `nsenter --net` only, so its pins outlive it)
//! with its own pin directory, and a flood of a dropped class with
//! accepted probes, counted at the receiver.

#![allow(dead_code)]

use parapet_daemon::Client;
use parapet_testbed::{Netns, Pair, Veth};
use serde_json::{json, Value};
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const DROPPED_PORT: u16 = 9;
pub const PROBE_PORT: u16 = 7000;
/// Drops port 9, and sources in the ban set (the banned peer's probes).
pub const RULES: &str = "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -p udp --dport 9 -j DROP\n\
                     -A INPUT -m set --match-set parapet-ban4 src -j DROP\nCOMMIT\n";
/// A second address of the peer, banned.
pub const BANNED: Ipv4Addr = Ipv4Addr::new(10, 250, 0, 5);

/// One instance: its state directory, socket and pin directory.
pub struct Instance {
    pub ns: String,
    pub dir: PathBuf,
    pub pins: PathBuf,
    pub log: PathBuf,
}

impl Instance {
    /// An instance in namespace `ns`, state in `dir`, pins in
    /// `/sys/fs/bpf/parapet-test/<pid>-<name>`.
    pub fn new(ns: &Netns, dir: &std::path::Path, name: &str) -> Instance {
        Instance {
            ns: ns.name().to_string(),
            dir: dir.to_path_buf(),
            pins: PathBuf::from(format!(
                "/sys/fs/bpf/parapet-test/{}-{name}",
                std::process::id()
            )),
            log: dir.join("parapetd.log"),
        }
    }

    pub fn args(&self, image_mib: u32) -> Vec<String> {
        vec![
            "--socket".into(),
            self.dir.join("sock").display().to_string(),
            "--state-dir".into(),
            self.dir.join("state").display().to_string(),
            "--pin-dir".into(),
            self.pins.display().to_string(),
            "--no-fsync".into(),
            "--max-rules".into(),
            "64".into(),
            "--image-mib".into(),
            image_mib.to_string(),
        ]
    }

    /// Starts parapetd in the namespace (network only) and waits for it.
    pub fn start(&self, extra: &[&str]) -> Proc {
        self.start_sized(extra, 1)
    }

    /// [`Instance::start`] with `--image-mib`.
    pub fn start_sized(&self, extra: &[&str], image_mib: u32) -> Proc {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let mut child = Command::new("nsenter")
            .arg(format!("--net=/run/netns/{}", self.ns))
            .arg(env!("CARGO_BIN_EXE_parapetd"))
            .args(self.args(image_mib))
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn nsenter parapetd");
        let t0 = Instant::now();
        loop {
            if let Ok(mut c) = Client::connect(&self.dir.join("sock")) {
                if c.call(json!({"cmd": "ping"})).is_ok() {
                    return Proc(Some(child));
                }
            }
            if let Some(st) = child.try_wait().unwrap() {
                panic!("parapetd exited with {st}: {}", self.log());
            }
            assert!(
                t0.elapsed() < Duration::from_secs(120),
                "parapetd not ready: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn call(&self, v: Value) -> Value {
        let mut c = Client::connect(&self.dir.join("sock")).expect("connect");
        match c.call(v.clone()) {
            Ok(r) => Value::Object(r.body),
            Err(e) => panic!("{v} failed: {e}\n{}", self.log()),
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The one attachment's (link id, program id) from `stats`.
    pub fn link(&self) -> (u64, u64) {
        let s = self.call(json!({"cmd": "stats"}));
        let a = &s["dataplane"]["attachments"];
        assert_eq!(a.as_array().map(Vec::len), Some(1), "{s}");
        assert_eq!(a[0]["pinned"], Value::from(true), "{s}");
        (
            a[0]["link_id"].as_u64().unwrap(),
            a[0]["prog_id"].as_u64().unwrap(),
        )
    }

    /// The netfilter attachment's links from `stats`: (chain, link id,
    /// program id, priority), each pinned.
    pub fn nf_links(&self) -> Vec<(String, u64, u64, i64)> {
        let s = self.call(json!({"cmd": "stats"}));
        let a = &s["dataplane"]["attachments"];
        assert_eq!(a.as_array().map(Vec::len), Some(1), "{s}");
        assert_eq!(a[0]["hook"], "netfilter", "{s}");
        a[0]["links"]
            .as_array()
            .unwrap_or_else(|| panic!("{s}"))
            .iter()
            .map(|l| {
                assert_eq!(l["pinned"], Value::from(true), "{s}");
                (
                    format!(
                        "{}-{}",
                        l["chain"].as_str().unwrap(),
                        l["family"].as_str().unwrap()
                    ),
                    l["link_id"].as_u64().unwrap(),
                    l["prog_id"].as_u64().unwrap(),
                    l["priority"].as_i64().unwrap(),
                )
            })
            .collect()
    }

    /// The link pins, by file name.
    pub fn link_pins(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(self.pins.join("links"))
            .map(|r| {
                r.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }

    /// Rule 1's kernel packet counter (`list --counters`).
    pub fn rule1_packets(&self) -> u64 {
        let r = self.call(json!({"cmd": "list", "counters": true, "format": "json"}));
        r["counters"][0]["packets"]
            .as_u64()
            .unwrap_or_else(|| panic!("{r}"))
    }

    /// The daemon reads the maps the attached program writes: rule 1's
    /// counter grows under the flood.
    pub fn counts_live(&self, what: &str) {
        let c1 = self.rule1_packets();
        std::thread::sleep(Duration::from_millis(200));
        let c2 = self.rule1_packets();
        assert!(
            c2 > c1,
            "{what}: rule 1's counter stays at {c1}: {}",
            self.log()
        );
    }

    /// `parapetd --remove-pinned` for this instance.
    pub fn remove_pinned(&self) {
        let o = Command::new("nsenter")
            .arg(format!("--net=/run/netns/{}", self.ns))
            .arg(env!("CARGO_BIN_EXE_parapetd"))
            .args(self.args(1))
            .arg("--remove-pinned")
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "--remove-pinned: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        let _ = parapet_dataplane::remove_pins(&self.pins);
    }
}

/// A parapetd, killed when dropped (a failed test leaves none behind).
pub struct Proc(pub Option<Child>);

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `kill -9` (nsenter exec()s parapetd: the child is the daemon).
pub fn kill9(mut p: Proc) {
    let mut c = p.0.take().unwrap();
    c.kill().unwrap();
    c.wait().unwrap();
}

/// What the receiver saw.
#[derive(Default)]
pub struct Seen {
    pub dropped_class: AtomicU64,
    /// Probes from the banned address.
    pub banned: AtomicU64,
    pub probes: AtomicU64,
    pub sent_probes: AtomicU64,
}

/// The flood and the probes from namespace `a`, the counting receiver in
/// namespace `b`; both stop with `stop` or after 120 s.
pub fn traffic(
    a: &str,
    b: &str,
    to: Ipv4Addr,
    stop: Arc<AtomicBool>,
    seen: Arc<Seen>,
) -> Vec<std::thread::JoinHandle<()>> {
    let (fa, fb) = (
        std::fs::File::open(format!("/run/netns/{a}")).unwrap(),
        std::fs::File::open(format!("/run/netns/{b}")).unwrap(),
    );
    let mut hs = Vec::new();
    let ready = Arc::new(AtomicBool::new(false));
    for port in [DROPPED_PORT, PROBE_PORT] {
        let (stop, seen, fb, ready) = (
            stop.clone(),
            seen.clone(),
            fb.try_clone().unwrap(),
            ready.clone(),
        );
        hs.push(std::thread::spawn(move || {
            parapet_testbed::enter(&fb).unwrap();
            let s = UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port)).unwrap();
            s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
            if port == PROBE_PORT {
                ready.store(true, Ordering::SeqCst);
            }
            let t0 = Instant::now();
            let mut buf = [0u8; 64];
            let count = |from: std::net::SocketAddr| {
                let c = if port == DROPPED_PORT {
                    &seen.dropped_class
                } else if from.ip() == BANNED {
                    &seen.banned
                } else {
                    &seen.probes
                };
                c.fetch_add(1, Ordering::SeqCst);
            };
            while !stop.load(Ordering::SeqCst) && t0.elapsed() < Duration::from_secs(120) {
                if let Ok((_, from)) = s.recv_from(&mut buf) {
                    count(from);
                }
            }
            // what is still queued arrived too
            s.set_nonblocking(true).unwrap();
            for _ in 0..100_000 {
                match s.recv_from(&mut buf) {
                    Ok((_, from)) => count(from),
                    Err(_) => break,
                }
            }
        }));
    }
    let t0 = Instant::now();
    while !ready.load(Ordering::SeqCst) && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(5));
    }
    hs.push(std::thread::spawn(move || {
        parapet_testbed::enter(&fa).unwrap();
        let s = UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)).unwrap();
        let banned = UdpSocket::bind(SocketAddrV4::new(BANNED, 0)).unwrap();
        let t0 = Instant::now();
        let mut n = 0u64;
        while !stop.load(Ordering::SeqCst) && t0.elapsed() < Duration::from_secs(120) {
            for _ in 0..64 {
                let _ = s.send_to(b"flood", SocketAddrV4::new(to, DROPPED_PORT));
            }
            n += 1;
            if n % 4 == 0 {
                let _ = s.send_to(b"probe", SocketAddrV4::new(to, PROBE_PORT));
                let _ = banned.send_to(b"banned", SocketAddrV4::new(to, PROBE_PORT));
                seen.sent_probes.fetch_add(1, Ordering::SeqCst);
            }
            std::thread::sleep(Duration::from_micros(500));
        }
    }));
    hs
}

pub struct Run {
    pub stop: Arc<AtomicBool>,
    pub seen: Arc<Seen>,
    pub threads: Vec<std::thread::JoinHandle<()>>,
}

impl Run {
    /// The flood and probes from namespace `a` to `to`, received in `b`.
    pub fn start(a: &Netns, b: &Netns, to: Ipv4Addr) -> Run {
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Seen::default());
        let threads = traffic(a.name(), b.name(), to, stop.clone(), seen.clone());
        Run {
            stop,
            seen,
            threads,
        }
    }

    /// Stops and returns (dropped-class and banned packets received,
    /// probes received, probes sent).
    pub fn finish(self) -> (u64, u64, u64) {
        // enough probes for `check` even when the sender thread was
        // starved on a loaded machine (a run at load 20 sent 25 in its
        // window), bounded in time
        let t0 = Instant::now();
        while self.seen.sent_probes.load(Ordering::SeqCst) <= MIN_PROBES
            && t0.elapsed() < Duration::from_secs(30)
        {
            std::thread::sleep(Duration::from_millis(10));
        }
        // let the last probes land
        std::thread::sleep(Duration::from_millis(100));
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads {
            t.join().unwrap();
        }
        (
            self.seen.dropped_class.load(Ordering::SeqCst)
                + self.seen.banned.load(Ordering::SeqCst),
            self.seen.probes.load(Ordering::SeqCst),
            self.seen.sent_probes.load(Ordering::SeqCst),
        )
    }
}

/// Probes a run sends at least before it counts.
const MIN_PROBES: u64 = 50;

pub fn check(what: &str, (leaked, probes, sent): (u64, u64, u64)) {
    eprintln!("{what}: {leaked} port-9 or banned packets and {probes} of {sent} probes arrived");
    assert_eq!(
        leaked, 0,
        "{what}: {leaked} port-9 or banned packets reached the receiver"
    );
    assert!(sent > MIN_PROBES, "{what}: only {sent} probes sent");
    // probes keep flowing: nearly all of them arrive (a veth loses none
    // unless a queue overflows)
    assert!(
        probes * 10 >= sent * 9,
        "{what}: {probes} of {sent} probes arrived"
    );
}

/// The ids of the netfilter links `daemon` holds open, from its fdinfo
/// (an old link still held would show here; its pin is gone).
pub fn nf_links_held(daemon: &Proc) -> Vec<u64> {
    let pid = daemon.0.as_ref().expect("running").id();
    let mut ids = Vec::new();
    for e in std::fs::read_dir(format!("/proc/{pid}/fdinfo"))
        .unwrap()
        .flatten()
    {
        let info = std::fs::read_to_string(e.path()).unwrap_or_default();
        if !info.contains("link_type:\tnetfilter") {
            continue;
        }
        if let Some(id) = info
            .lines()
            .find_map(|l| l.strip_prefix("link_id:"))
            .and_then(|v| v.trim().parse().ok())
        {
            ids.push(id);
        }
    }
    ids.sort_unstable();
    ids
}

/// Under a flood from `from` to `to` (received in `at`): kills `daemon`
/// and starts another one with `extra` flags and `--image-mib`; the new
/// one reads the live counters, and no dropped-class packet arrived
/// meanwhile while the probes kept arriving (`what` names the phase).
pub fn restart_under_flood(
    inst: &Instance,
    (from, at, to): (&Netns, &Netns, Ipv4Addr),
    daemon: Proc,
    extra: &[&str],
    image_mib: u32,
    what: impl AsRef<str>,
) -> Proc {
    let what = what.as_ref();
    let run = Run::start(from, at, to);
    settle_for(300);
    kill9(daemon);
    settle_for(300);
    let d = inst.start_sized(extra, image_mib);
    settle_for(300);
    inst.counts_live(&format!("{what}: after it"));
    check(what, run.finish());
    d
}

/// Sleeps `ms` milliseconds (lets traffic and the daemon settle).
pub fn settle_for(ms: u64) {
    std::thread::sleep(Duration::from_millis(ms));
}

/// A fresh pair named after `tag`: sender namespace a (with the banned
/// address too), receiver b.
pub fn bed(tag: &str) -> (Pair, Veth<'static>) {
    parapet_testbed::remove_stale(tag);
    let v = Veth {
        disable_ipv6: true,
        prefix_len: 24,
        a_extra: &[BANNED],
        ..Veth::default()
    };
    (Pair::create(tag, &v).unwrap(), v)
}
