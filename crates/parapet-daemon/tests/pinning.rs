//! Never fail open: parapetd pins its programs, maps and links under
//! bpffs, so the kernel keeps enforcing the last applied ruleset while the
//! daemon is dead, and a restarted daemon adopts what is pinned.
//!
//! The real `parapetd` runs in the receiver's network namespace, entered
//! with `nsenter --net` only (`ip netns exec` would give it a private mount
//! namespace, and its pins would die with it). The ruleset drops UDP to
//! port 9 and accepts everything else; the peer namespace floods port 9
//! and sends numbered probes to port 7000. Across `kill -9` and a restart,
//! an upgrade (a different build of the program, swapped in with
//! `BPF_LINK_UPDATE`) and a reboot simulation (pins removed, a fresh
//! daemon from the journal), no port-9 packet may reach the receiver and
//! the probes must keep arriving. At XDP, at tc, and at the netfilter
//! hooks (`attach` without an interface). Needs root.

use parapet_daemon::Client;
use parapet_testbed::{Pair, Veth};
use serde_json::{json, Value};
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const DROPPED_PORT: u16 = 9;
const PROBE_PORT: u16 = 7000;
/// Drops port 9, and sources in the ban set (the banned peer's probes).
const RULES: &str = "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -p udp --dport 9 -j DROP\n\
                     -A INPUT -m set --match-set parapet-ban4 src -j DROP\nCOMMIT\n";
/// A second address of the peer, banned.
const BANNED: Ipv4Addr = Ipv4Addr::new(10, 250, 0, 5);

/// One instance: its state directory, socket and pin directory.
struct Instance {
    ns: String,
    dir: PathBuf,
    pins: PathBuf,
    log: PathBuf,
}

impl Instance {
    /// An instance in `pair`'s namespace b, state in `dir`, pins in
    /// `/sys/fs/bpf/parapet-test/<pid>-<name>`.
    fn new(pair: &Pair, dir: &std::path::Path, name: &str) -> Instance {
        Instance {
            ns: pair.b.name().to_string(),
            dir: dir.to_path_buf(),
            pins: PathBuf::from(format!(
                "/sys/fs/bpf/parapet-test/{}-{name}",
                std::process::id()
            )),
            log: dir.join("parapetd.log"),
        }
    }

    fn args(&self, image_mib: u32) -> Vec<String> {
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
    fn start(&self, extra: &[&str]) -> Proc {
        self.start_sized(extra, 1)
    }

    /// [`Instance::start`] with `--image-mib`.
    fn start_sized(&self, extra: &[&str], image_mib: u32) -> Proc {
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
                t0.elapsed() < Duration::from_secs(60),
                "parapetd not ready: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn call(&self, v: Value) -> Value {
        let mut c = Client::connect(&self.dir.join("sock")).expect("connect");
        match c.call(v.clone()) {
            Ok(r) => Value::Object(r.body),
            Err(e) => panic!("{v} failed: {e}\n{}", self.log()),
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The one attachment's (link id, program id) from `stats`.
    fn link(&self) -> (u64, u64) {
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
    fn nf_links(&self) -> Vec<(String, u64, u64, i64)> {
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
    fn link_pins(&self) -> Vec<String> {
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
    fn rule1_packets(&self) -> u64 {
        let r = self.call(json!({"cmd": "list", "counters": true, "format": "json"}));
        r["counters"][0]["packets"]
            .as_u64()
            .unwrap_or_else(|| panic!("{r}"))
    }

    /// The daemon reads the maps the attached program writes: rule 1's
    /// counter grows under the flood.
    fn counts_live(&self, what: &str) {
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
    fn remove_pinned(&self) {
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
struct Proc(Option<Child>);

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `kill -9` (nsenter exec()s parapetd: the child is the daemon).
fn kill9(mut p: Proc) {
    let mut c = p.0.take().unwrap();
    c.kill().unwrap();
    c.wait().unwrap();
}

/// What the receiver saw.
#[derive(Default)]
struct Seen {
    dropped_class: AtomicU64,
    /// Probes from the banned address.
    banned: AtomicU64,
    probes: AtomicU64,
    sent_probes: AtomicU64,
}

/// The flood and the probes from namespace `a`, the counting receiver in
/// namespace `b`; both stop with `stop` or after 120 s.
fn traffic(
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

struct Run {
    stop: Arc<AtomicBool>,
    seen: Arc<Seen>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Run {
    fn start(pair: &Pair, to: Ipv4Addr) -> Run {
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Seen::default());
        let threads = traffic(pair.a.name(), pair.b.name(), to, stop.clone(), seen.clone());
        Run {
            stop,
            seen,
            threads,
        }
    }

    /// Stops and returns (dropped-class and banned packets received,
    /// probes received, probes sent).
    fn finish(self) -> (u64, u64, u64) {
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

fn check(what: &str, (leaked, probes, sent): (u64, u64, u64)) {
    eprintln!("{what}: {leaked} port-9 or banned packets and {probes} of {sent} probes arrived");
    assert_eq!(
        leaked, 0,
        "{what}: {leaked} port-9 or banned packets reached the receiver"
    );
    assert!(sent > 50, "{what}: only {sent} probes sent");
    // probes keep flowing: nearly all of them arrive (a veth loses none
    // unless a queue overflows)
    assert!(
        probes * 10 >= sent * 9,
        "{what}: {probes} of {sent} probes arrived"
    );
}

fn xdp_prog_on(pair: &Pair, dev: &str) -> bool {
    pair.b
        .ip(&["-d", "link", "show", "dev", dev])
        .unwrap()
        .contains("prog/xdp")
}

/// Sender namespace a (with the banned address too), receiver b.
fn bed(tag: &str) -> (Pair, Veth<'static>) {
    parapet_testbed::remove_stale(tag);
    let v = Veth {
        disable_ipv6: true,
        prefix_len: 24,
        a_extra: &[BANNED],
        ..Veth::default()
    };
    (Pair::create(tag, &v).unwrap(), v)
}

/// Without a daemon the port-9 packets arrive: the receiver counts them
/// (so zero in a test means filtered, not unseen).
fn assert_unfiltered(pair: &Pair, v: &Veth<'_>) {
    let run = Run::start(pair, v.b_addr);
    settle_for(300);
    let seen = run.seen.clone();
    let _ = run.finish();
    let (port9, banned) = (
        seen.dropped_class.load(Ordering::SeqCst),
        seen.banned.load(Ordering::SeqCst),
    );
    let probes = seen.probes.load(Ordering::SeqCst);
    assert!(
        port9 > 0 && banned > 0 && probes > 0,
        "unfiltered: {port9} {banned} {probes}"
    );
}

/// Under the flood: kills `daemon` and starts another one with `extra`
/// flags and `--image-mib`; the new one reads the live counters, and no
/// dropped-class packet arrived meanwhile (`what` names the phase).
fn restart_under_flood(
    inst: &Instance,
    pair: &Pair,
    v: &Veth<'_>,
    daemon: Proc,
    extra: &[&str],
    image_mib: u32,
    what: impl AsRef<str>,
) -> Proc {
    let what = what.as_ref();
    let run = Run::start(pair, v.b_addr);
    settle_for(300);
    kill9(daemon);
    settle_for(300);
    let d = inst.start_sized(extra, image_mib);
    settle_for(300);
    inst.counts_live(&format!("{what}: after it"));
    check(what, run.finish());
    d
}

/// Reboot simulation: kills `daemon`, removes the pins (then nothing
/// filters: the flood arrives), starts a fresh daemon that rebuilds
/// everything from the journal, and checks it filters again.
fn reboot(inst: &Instance, pair: &Pair, v: &Veth<'_>, hook: &str, daemon: Proc) -> Proc {
    kill9(daemon);
    inst.remove_pinned();
    assert!(!inst.pins.exists(), "--remove-pinned removed the directory");
    let run = Run::start(pair, v.b_addr);
    settle_for(300);
    let (leaked, _, _) = run.finish();
    assert!(leaked > 0, "{hook}: without pins nothing filters");
    let d = inst.start(&[]);
    let run = Run::start(pair, v.b_addr);
    settle_for(300);
    inst.counts_live(&format!("{hook}: after the reboot simulation"));
    check(
        &format!("{hook}: after the reboot simulation"),
        run.finish(),
    );
    d
}

fn scenario(hook: &str) {
    parapet_testbed::require_root();
    let tag = format!("pin{hook}");
    let (pair, v) = bed(&tag);
    let tmp = tempfile::tempdir().unwrap();
    let inst = Instance::new(&pair, tmp.path(), hook);
    let _ = parapet_dataplane::remove_pins(&inst.pins);
    let settle = || std::thread::sleep(Duration::from_millis(300));
    assert_unfiltered(&pair, &v);

    let d1 = inst.start(&[]);
    let r = inst.call(json!({"cmd": "ban", "elems": [BANNED.to_string()]}));
    assert_eq!(r["ok"], Value::from(true), "{r}");
    let r = inst.call(json!({"cmd": "apply", "rules": RULES, "name": "r.v4"}));
    assert_eq!(r["ok"], Value::from(true), "{r}");
    let r = inst.call(json!({"cmd": "attach", "iface": v.b_dev, "hook": hook, "mode": "native"}));
    assert_eq!(r["ok"], Value::from(true), "{r}");
    let (link1, prog1) = inst.link();
    assert!(inst
        .pins
        .join("links")
        .join(format!("{}@{hook}", v.b_dev))
        .exists());

    // 1. kill -9 under the flood, restart: adopted, not re-attached.
    let d2 = restart_under_flood(
        &inst,
        &pair,
        &v,
        d1,
        &[],
        1,
        format!("{hook}: kill -9 and restart"),
    );
    assert_eq!(
        inst.link(),
        (link1, prog1),
        "{hook}: same link, same program"
    );
    let said = inst.log();
    assert!(said.contains("adopted the pinned attachment"), "{said}");
    assert!(!said.contains("re-attached to"), "{said}");

    // 2. upgrade: another build of the program replaces the old one in
    // the same link.
    let d3 = restart_under_flood(
        &inst,
        &pair,
        &v,
        d2,
        &["--test-program-variant"],
        1,
        format!("{hook}: upgrade"),
    );
    let (link3, prog3) = inst.link();
    assert_eq!(link3, link1, "{hook}: the upgrade keeps the link");
    assert_ne!(prog3, prog1, "{hook}: the upgrade swaps the program");
    assert!(inst.log().contains("swapped in place"), "{}", inst.log());

    // 3. a restart with larger image slots: the pinned maps do not fit
    // it, so fresh maps are filled from the journal first and then
    // swapped in with the program, in the same link.
    let d3 = restart_under_flood(&inst, &pair, &v, d3, &[], 2, format!("{hook}: resize"));
    let (link5, prog5) = inst.link();
    assert_eq!(link5, link1, "{hook}: the resize keeps the link");
    assert_ne!(prog5, prog3, "{hook}: the resize swaps the program");
    let said = inst.log();
    assert!(
        said.matches("swapped in place").count() == 2 && said.contains("in fresh maps"),
        "{said}"
    );

    // 4. reboot simulation: the pins are gone (the kernel then filters
    // nothing), a fresh daemon rebuilds everything from the journal.
    let d4 = reboot(&inst, &pair, &v, hook, d3);
    let (link4, _) = inst.link();
    assert_ne!(link4, link1, "{hook}: a new link after the reboot");
    assert!(inst.log().contains("re-attached to"), "{}", inst.log());

    // 5. detach removes the attachment's pin, and the kernel lets port 9
    // through again.
    let r = inst.call(json!({"cmd": "detach", "iface": v.b_dev}));
    assert_eq!(r["ok"], Value::from(true), "{r}");
    assert!(!inst
        .pins
        .join("links")
        .join(format!("{}@{hook}", v.b_dev))
        .exists());
    if hook == "xdp" {
        assert!(!xdp_prog_on(&pair, v.b_dev), "detached");
    }
    let run = Run::start(&pair, v.b_addr);
    settle();
    let (leaked, _, _) = run.finish();
    assert!(leaked > 0, "{hook}: after detach port 9 passes");
    eprintln!("{}", inst.log());
    kill9(d4);
    inst.remove_pinned();
    assert!(!inst.pins.exists());
    let _ = std::fs::remove_dir(inst.pins.parent().unwrap());
}

#[test]
#[ignore = "needs root"]
fn kill9_upgrade_and_reboot_never_fail_open_at_xdp() {
    scenario("xdp");
}

#[test]
#[ignore = "needs root"]
fn kill9_upgrade_and_reboot_never_fail_open_at_tc() {
    scenario("tc");
}

/// At the netfilter hooks (`attach` without an interface): the INPUT
/// chain's link is pinned as `links/input-ipv4@netfilter`; `kill -9` and a
/// restart take it over (same link, same program); an upgrade and a resize
/// renew it make-before-break (the kernel cannot swap a netfilter link's
/// program: a second link goes in beside it first); a reboot simulation
/// attaches it again from the journal. No port-9 or banned packet arrives
/// throughout, and the probes keep arriving.
#[test]
#[ignore = "needs root"]
fn kill9_upgrade_and_reboot_never_fail_open_at_netfilter() {
    parapet_testbed::require_root();
    let (pair, v) = bed("pinnf");
    let tmp = tempfile::tempdir().unwrap();
    let inst = Instance::new(&pair, tmp.path(), "netfilter");
    let _ = parapet_dataplane::remove_pins(&inst.pins);
    let settle = || settle_for(300);
    assert_unfiltered(&pair, &v);
    let pin = "input-ipv4@netfilter".to_string();

    let d1 = inst.start(&[]);
    let r = inst.call(json!({"cmd": "ban", "elems": [BANNED.to_string()]}));
    assert_eq!(r["ok"], Value::from(true), "{r}");
    let r = inst.call(json!({"cmd": "apply", "rules": RULES, "name": "r.v4"}));
    assert_eq!(r["ok"], Value::from(true), "{r}");
    let r = inst.call(json!({"cmd": "attach"}));
    assert_eq!(r["ok"], Value::from(true), "{r}");
    let links1 = inst.nf_links();
    assert_eq!(links1.len(), 1, "{links1:?}");
    assert_eq!(links1[0].0, "INPUT-ipv4");
    assert_eq!(inst.link_pins(), vec![pin.clone()]);
    let (_, link1, prog1, _) = links1[0].clone();

    // 1. kill -9 under the flood, restart: adopted, not re-attached.
    let d2 = restart_under_flood(
        &inst,
        &pair,
        &v,
        d1,
        &[],
        1,
        "netfilter: kill -9 and restart",
    );
    assert_eq!(
        inst.nf_links(),
        links1,
        "netfilter: same link, same program"
    );
    let said = inst.log();
    assert!(said.contains("adopted the pinned netfilter link"), "{said}");
    assert!(!said.contains("re-attached to"), "{said}");

    // 2. upgrade: another build of the program, in a new link made before
    // the old one goes.
    let d3 = restart_under_flood(
        &inst,
        &pair,
        &v,
        d2,
        &["--test-program-variant"],
        1,
        "netfilter: upgrade",
    );
    let links3 = inst.nf_links();
    assert_eq!(links3.len(), 1, "{links3:?}");
    let (_, link3, prog3, _) = links3[0].clone();
    assert_ne!(
        link3,
        link1,
        "netfilter: the upgrade makes a new link: {}",
        inst.log()
    );
    assert_ne!(prog3, prog1, "netfilter: the upgrade runs another program");
    assert_eq!(inst.link_pins(), vec![pin.clone()], "one pin, renamed over");
    assert_eq!(nf_links_held(&d3), vec![link3], "the old link is closed");
    assert_eq!(
        inst.log().matches("renewed make-before-break").count(),
        1,
        "{}",
        inst.log()
    );

    // 3. a resize: fresh maps, filled from the journal, then a new link
    // running the program that reads them.
    let d4 = restart_under_flood(&inst, &pair, &v, d3, &[], 2, "netfilter: resize");
    let links4 = inst.nf_links();
    assert_eq!(links4.len(), 1, "{links4:?}");
    assert_ne!(links4[0].1, link3, "netfilter: the resize makes a new link");
    assert_eq!(inst.link_pins(), vec![pin.clone()]);
    let said = inst.log();
    assert!(
        said.matches("renewed make-before-break").count() == 2 && said.contains("in fresh maps"),
        "{said}"
    );

    // 4. reboot simulation: the pins are gone, a fresh daemon attaches
    // again from the journal.
    let d5 = reboot(&inst, &pair, &v, "netfilter", d4);
    let links5 = inst.nf_links();
    assert_eq!(links5.len(), 1, "{links5:?}");
    assert!(inst.log().contains("re-attached"), "{}", inst.log());
    assert_eq!(inst.link_pins(), vec![pin.clone()]);

    // 5. an apply whose ruleset has a FORWARD chain too pins a link
    // there; one without it removes that link and its pin.
    let with_forward = RULES.replace(
        "COMMIT",
        ":FORWARD ACCEPT [0:0]\n-A FORWARD -p udp -j DROP\nCOMMIT",
    );
    let r = inst.call(json!({"cmd": "apply", "rules": with_forward, "name": "f.v4"}));
    assert_eq!(r["ok"], Value::from(true), "{r}");
    assert_eq!(
        inst.link_pins(),
        vec!["forward-ipv4@netfilter".to_string(), pin.clone()]
    );
    assert_eq!(inst.nf_links().len(), 2);
    let r = inst.call(json!({"cmd": "apply", "rules": RULES, "name": "r.v4"}));
    assert_eq!(r["ok"], Value::from(true), "{r}");
    assert_eq!(inst.link_pins(), vec![pin.clone()]);

    // 6. detach removes the pins, and the kernel lets port 9 through.
    let r = inst.call(json!({"cmd": "detach"}));
    assert_eq!(r["ok"], Value::from(true), "{r}");
    assert!(inst.link_pins().is_empty(), "{:?}", inst.link_pins());
    let run = Run::start(&pair, v.b_addr);
    settle();
    let (leaked, _, _) = run.finish();
    assert!(leaked > 0, "netfilter: after detach port 9 passes");

    // 7. pins the journal does not name go: a daemon with the same pin
    // directory and an empty state directory removes the link.
    let r = inst.call(json!({"cmd": "attach"}));
    assert_eq!(r["ok"], Value::from(true), "{r}");
    assert_eq!(inst.link_pins(), vec![pin.clone()]);
    eprintln!("{}", inst.log());
    kill9(d5);
    let tmp2 = tempfile::tempdir().unwrap();
    let other = Instance::new(&pair, tmp2.path(), "netfilter");
    assert_eq!(other.pins, inst.pins);
    let d6 = other.start(&[]);
    assert!(other.link_pins().is_empty(), "{:?}", other.link_pins());
    assert!(
        other.log().contains("the journal wants no netfilter link"),
        "{}",
        other.log()
    );
    kill9(d6);
    inst.remove_pinned();
    assert!(!inst.pins.exists());
    let _ = std::fs::remove_dir(inst.pins.parent().unwrap());
}

/// The ids of the netfilter links `daemon` holds open, from its fdinfo
/// (an old link still held would show here; its pin is gone).
fn nf_links_held(daemon: &Proc) -> Vec<u64> {
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

/// The program id on `dev`'s XDP hook in namespace `ns`, per `ip`.
fn xdp_prog_id(ns: &parapet_testbed::Netns, dev: &str) -> Option<u64> {
    let out = ns.ip(&["-d", "link", "show", "dev", dev]).unwrap();
    let at = out.find("prog/xdp id ")? + "prog/xdp id ".len();
    out[at..].split_whitespace().next()?.parse().ok()
}

/// Another XDP program on the interface is never replaced: a second
/// parapetd (another state directory, so another instance with its own
/// pins) and a program attached with `ip link set … xdp` (no link) are
/// both refused by name, keep running, and the refused instance still
/// attaches at tc beside them.
#[test]
#[ignore = "needs root"]
fn a_foreign_xdp_program_is_not_clobbered() {
    parapet_testbed::require_root();
    let tag = "pinforeign";
    let (pair, v) = bed(tag);
    let (ta, tb) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (a, b) = (
        Instance::new(&pair, ta.path(), "foreign-a"),
        Instance::new(&pair, tb.path(), "foreign-b"),
    );
    let (da, db) = (a.start(&[]), b.start(&[]));
    for i in [&a, &b] {
        let r = i.call(json!({"cmd": "ban", "elems": [BANNED.to_string()]}));
        assert_eq!(r["ok"], Value::from(true), "{r}");
        let r = i.call(json!({"cmd": "apply", "rules": RULES, "name": "r.v4"}));
        assert_eq!(r["ok"], Value::from(true), "{r}");
    }
    let attach = |i: &Instance, hook: &str| {
        let mut c = Client::connect(&i.dir.join("sock")).unwrap();
        c.call(json!({"cmd": "attach", "iface": v.b_dev, "hook": hook, "mode": "skb"}))
    };
    attach(&a, "xdp").expect("the first instance attaches");
    let (link_a, prog_a) = a.link();
    assert_eq!(xdp_prog_id(&pair.b, v.b_dev), Some(prog_a));

    // 1. another parapetd: refused, naming the program; A keeps running
    let e = attach(&b, "xdp").expect_err("the second instance must be refused");
    let said = e.to_string();
    assert!(
        said.contains(&format!("id {prog_a}")) && said.contains("parapet_xdp"),
        "{said}"
    );
    assert_eq!(a.link(), (link_a, prog_a));
    assert_eq!(xdp_prog_id(&pair.b, v.b_dev), Some(prog_a));
    let run = Run::start(&pair, v.b_addr);
    settle_for(300);
    check("two instances", run.finish());
    // beside it at tc: the instances coexist
    attach(&b, "tc").expect("the second instance attaches at tc");

    // 2. a program attached without a link (netlink, as `ip` does)
    let r = a.call(json!({"cmd": "detach", "iface": v.b_dev}));
    assert_eq!(r["ok"], Value::from(true), "{r}");
    assert_eq!(xdp_prog_id(&pair.b, v.b_dev), None);
    let progs = a.pins.join("progs");
    let pinned_prog = std::fs::read_dir(&progs)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().ends_with("-parapet_xdp"))
        .expect("A's pinned XDP program");
    // `ip -n` would remount /sys, hiding the host's bpffs: enter the
    // network namespace only
    let o = Command::new("nsenter")
        .arg(format!("--net=/run/netns/{}", pair.b.name()))
        .args(["ip", "link", "set", "dev", v.b_dev, "xdpgeneric", "pinned"])
        .arg(&pinned_prog)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let foreign = xdp_prog_id(&pair.b, v.b_dev).expect("ip attached a program");
    let e = attach(&a, "xdp").expect_err("a netlink-attached program must be refused");
    assert!(e.to_string().contains(&format!("id {foreign}")), "{e}");
    assert_eq!(
        xdp_prog_id(&pair.b, v.b_dev),
        Some(foreign),
        "left in place"
    );
    pair.b
        .ip(&["link", "set", "dev", v.b_dev, "xdpgeneric", "off"])
        .unwrap();
    kill9(da);
    kill9(db);
    a.remove_pinned();
    b.remove_pinned();
    let _ = std::fs::remove_dir(a.pins.parent().unwrap());
}

fn settle_for(ms: u64) {
    std::thread::sleep(Duration::from_millis(ms));
}
