//! The tree form loads in the background (src/xdp_loader.rs): through the
//! real parapetd, an apply of an interface chain that `auto` gives the
//! split tree form (forced over several programs by `--test-tree-budget`,
//! its swap held back by `--test-xdp-load-hold-ms`) returns with the
//! walker enforcing the new ruleset at XDP and `stats` saying what loads;
//! a ban made meanwhile is answered while the load is still running and
//! enforced (by the INPUT chain at the netfilter hooks: a chain with a set
//! is not eligible for the tree form, so the XDP links run `--chain
//! filter/FORWARD`); then the split program
//! is on the same link and decides as the linear engine on probes (what
//! arrives per port, the XDP row's drops and rule 1's counter, exactly).
//! An apply of a small ruleset during a load keeps its straight-line
//! program (the stale tree form is dropped, never attached), and of a
//! second large one during a load ends with the newest attached; a
//! `kill -9` and restart with the split form on the link never lets a
//! dropped packet through and ends with the split form again. Veth
//! pair in namespaces of its own; needs root.

mod pin_support;

use parapet_testbed::{Pair, Veth};
use pin_support::*;
use serde_json::{json, Value};
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::time::{Duration, Instant};

/// Instructions per program of the split form: the test's chain is a few
/// thousand, so it is split over several programs.
const BUDGET: &str = "1500";

/// How long the background load waits before its swap (no lock held).
const HOLD_MS: &str = "6000";

/// The ports probed after the swap, and the datagrams sent to each.
const PORTS: [u16; 9] = [9, 7000, 7001, 7002, 7003, 7004, 7005, 7006, 7007];
const PER_PORT: u64 = 40;

/// The interface chain (`--chain filter/FORWARD`, which the netfilter
/// hooks run at FORWARD: no local packet meets it there, so what is
/// dropped on the way in the XDP program dropped): port 9 dropped (rule 1), 7001
/// accepted before 7001–7003 are dropped, with `drop_7004` 7004 dropped,
/// `big` rules of about twenty comparisons no probe matches (past the 512
/// comparisons `auto` gives the straight-line program), 7005–7006
/// dropped, the rest accepted. The INPUT chain drops the ban set's
/// sources at the netfilter hooks.
fn ruleset(big: usize, drop_7004: bool) -> String {
    let mut s = String::from(
        "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n\
         -A FORWARD -p udp --dport 9 -j DROP\n\
         -A FORWARD -p udp --dport 7001 -j ACCEPT\n-A FORWARD -p udp --dport 7001:7003 -j DROP\n",
    );
    if drop_7004 {
        s.push_str("-A FORWARD -p udp --dport 7004 -j DROP\n");
    }
    for i in 0..big {
        let ports: Vec<String> = (0..15)
            .map(|k| (20_000 + 100 * i + 2 * k).to_string())
            .collect();
        s.push_str(&format!(
            "-A FORWARD -s 10.9.0.{}/32 -p tcp -m multiport --dports {} -j DROP\n",
            1 + i,
            ports.join(",")
        ));
    }
    s.push_str("-A FORWARD -p udp --dport 7005:7006 -j DROP\n");
    s.push_str("-A INPUT -m set --match-set parapet-ban4 src -j DROP\nCOMMIT\n");
    s
}

/// The ports [`ruleset`] drops, as the linear engine decides them.
fn dropped(port: u16, drop_7004: bool) -> bool {
    matches!(port, 9 | 7002 | 7003 | 7005 | 7006) || (drop_7004 && port == 7004)
}

/// `stats`' `xdp_engine` object and the XDP attachment's engine.
fn engine(inst: &Instance) -> (String, Value) {
    let s = inst.call(json!({"cmd": "stats"}));
    let a = s["dataplane"]["attachments"]
        .as_array()
        .and_then(|v| v.iter().find(|a| a["hook"] == "xdp"))
        .unwrap_or_else(|| panic!("{s}"));
    (
        a["engine"].as_str().unwrap_or_default().to_string(),
        s["dataplane"]["xdp_engine"].clone(),
    )
}

/// The XDP attachment's link id.
fn xdp_link(inst: &Instance) -> u64 {
    let s = inst.call(json!({"cmd": "stats"}));
    s["dataplane"]["attachments"]
        .as_array()
        .and_then(|v| v.iter().find(|a| a["hook"] == "xdp"))
        .and_then(|a| a["link_id"].as_u64())
        .unwrap_or_else(|| panic!("{s}"))
}

/// The XDP row's dropped packets at `dev`.
fn xdp_dropped(inst: &Instance, dev: &str) -> u64 {
    let s = inst.call(json!({"cmd": "stats"}));
    s["dataplane"]["hooks"]
        .as_array()
        .and_then(|v| {
            v.iter()
                .find(|h| h["hook"] == "xdp" && h["interface"] == dev)
        })
        .and_then(|h| h["dropped"].as_u64())
        .unwrap_or(0)
}

/// The split form's pinned prog arrays (`xdp-tree/progs-<id>`).
fn tree_pins(inst: &Instance) -> Vec<String> {
    std::fs::read_dir(inst.pins.join("xdp-tree"))
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn apply(inst: &Instance, rules: &str) -> Duration {
    let t0 = Instant::now();
    let r = inst.call(json!({"cmd": "apply", "rules": rules, "name": "r.v4"}));
    assert_eq!(r["ok"], Value::from(true), "{r}");
    t0.elapsed()
}

/// Waits (at most 180 s) until the tree form is on the XDP link and
/// nothing loads; its `xdp_engine` object.
fn wait_for_tree(inst: &Instance) -> Value {
    let t0 = Instant::now();
    loop {
        let (e, why) = engine(inst);
        if e == "generated-tree" && why["loading"].is_null() {
            return why;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(180),
            "the tree form never came: {e} {why}\n{}",
            inst.log()
        );
        settle_for(100);
    }
}

/// Sends [`PER_PORT`] datagrams to each of [`PORTS`] from namespace `a`
/// (paced: no queue overflows) and returns how many arrived per port in
/// `b`.
fn deliver(pair: &Pair, to: Ipv4Addr) -> Vec<u64> {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let sent = Arc::new(AtomicBool::new(false));
    let fb = std::fs::File::open(format!("/run/netns/{}", pair.b.name())).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let done = sent.clone();
    let receiver = std::thread::spawn(move || {
        parapet_testbed::enter(&fb).unwrap();
        let socks: Vec<UdpSocket> = PORTS
            .iter()
            .map(|p| {
                let s = UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, *p)).unwrap();
                s.set_nonblocking(true).unwrap();
                s
            })
            .collect();
        tx.send(()).unwrap();
        let mut seen = vec![0u64; PORTS.len()];
        let mut buf = [0u8; 64];
        let t0 = Instant::now();
        // until the sender is done and the queues are drained (bounded)
        while t0.elapsed() < Duration::from_secs(60) {
            let finished = done.load(Ordering::SeqCst);
            let mut got = false;
            for (i, s) in socks.iter().enumerate() {
                while s.recv_from(&mut buf).is_ok() {
                    seen[i] += 1;
                    got = true;
                }
            }
            if finished && !got {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        seen
    });
    rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let fa = std::fs::File::open(format!("/run/netns/{}", pair.a.name())).unwrap();
    std::thread::spawn(move || {
        parapet_testbed::enter(&fa).unwrap();
        let s = UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)).unwrap();
        for _ in 0..PER_PORT {
            for p in PORTS {
                s.send_to(b"probe", SocketAddrV4::new(to, p)).unwrap();
            }
            std::thread::sleep(Duration::from_micros(500));
        }
    })
    .join()
    .unwrap();
    // the last datagrams land
    settle_for(300);
    sent.store(true, Ordering::SeqCst);
    receiver.join().unwrap()
}

/// The probes decide as the linear engine: per port, all or none arrive;
/// the XDP row drops exactly the dropped ports' datagrams; rule 1 counts
/// port 9's.
fn decides_as_the_spec(inst: &Instance, pair: &Pair, v: &Veth<'_>, drop_7004: bool, what: &str) {
    let (d0, c0) = (xdp_dropped(inst, v.b_dev), inst.rule1_packets());
    let seen = deliver(pair, v.b_addr);
    let (d1, c1) = (xdp_dropped(inst, v.b_dev), inst.rule1_packets());
    let mut drops = 0;
    for (port, n) in PORTS.iter().zip(&seen) {
        let want = if dropped(*port, drop_7004) {
            drops += PER_PORT;
            0
        } else {
            PER_PORT
        };
        assert_eq!(*n, want, "{what}: port {port}: {n} of {PER_PORT} arrived");
    }
    assert_eq!(d1 - d0, drops, "{what}: the XDP row's drops");
    assert_eq!(c1 - c0, PER_PORT, "{what}: rule 1 counts port 9's");
}

#[test]
#[ignore = "needs root"]
fn the_tree_form_loads_in_the_background() {
    parapet_testbed::require_root();
    let tag = "k15bg";
    let (pair, v) = bed(tag);
    let tmp = tempfile::tempdir().unwrap();
    let inst = Instance::new(&pair.b, tmp.path(), "k15bg");
    let _ = parapet_dataplane::remove_pins(&inst.pins);
    let flags = [
        "--chain",
        "filter/FORWARD",
        "--test-tree-budget",
        BUDGET,
        "--test-xdp-load-hold-ms",
        HOLD_MS,
    ];
    let d = inst.start(&flags);
    // the ban set exists before a ruleset names it
    let r = inst.call(json!({"cmd": "ban", "elems": ["192.0.2.1"]}));
    assert_eq!(r["ok"], Value::from(true), "{r}");
    let small = ruleset(0, false);
    apply(&inst, &small);
    for cmd in [
        json!({"cmd": "attach", "iface": v.b_dev, "hook": "xdp", "mode": "native"}),
        json!({"cmd": "attach"}),
    ] {
        let r = inst.call(cmd);
        assert_eq!(r["ok"], Value::from(true), "{r}");
    }
    let (e, why) = engine(&inst);
    assert_eq!(e, "generated", "{why}");
    let link = xdp_link(&inst);

    // 1. the large chain: the apply returns with the walker on the link
    // and the tree form loading
    let big = ruleset(40, false);
    let took = apply(&inst, &big);
    let (e, why) = engine(&inst);
    eprintln!("apply returned in {} ms: {e} {why}", took.as_millis());
    assert_eq!(e, "walker", "{why}");
    assert_eq!(why["loading"]["engine"], "generated-tree", "{why}");
    assert!(
        why["reason"].as_str().unwrap().contains("background"),
        "{why}"
    );
    // a ban made while it loads: answered while the load still runs
    let r = inst.call(json!({"cmd": "ban", "elems": [BANNED.to_string()]}));
    assert_eq!(r["ok"], Value::from(true), "{r}");
    let (e, why) = engine(&inst);
    assert_eq!(e, "walker", "still loading after the ban: {why}");
    assert!(
        !why["loading"].is_null(),
        "still loading after the ban: {why}"
    );
    // and enforced, as the new ruleset is, by the walker meanwhile
    let run = Run::start(&pair.a, &pair.b, v.b_addr);
    settle_for(300);
    check("while the tree form loads", run.finish());

    // then the split program on the same link, deciding as the spec
    let why = wait_for_tree(&inst);
    let reason = why["reason"].as_str().unwrap();
    eprintln!("then: {reason}");
    assert!(reason.contains("programs of"), "split: {why}");
    assert_eq!(xdp_link(&inst), link, "the same link");
    decides_as_the_spec(&inst, &pair, &v, false, "the split tree form");
    let run = Run::start(&pair.a, &pair.b, v.b_addr);
    settle_for(300);
    check("the split tree form", run.finish());

    // 2. a small ruleset applied during a load: its straight-line
    // program stays, the stale tree form is dropped
    apply(&inst, &ruleset(40, true));
    assert!(!engine(&inst).1["loading"].is_null());
    apply(&inst, &small);
    let (e, why) = engine(&inst);
    assert_eq!(e, "generated", "{why}");
    assert!(why["loading"].is_null(), "{why}");
    // until the stale load is done: dropped, or (wrongly) swapped in
    let t0 = Instant::now();
    while !inst.log().contains("superseded") && engine(&inst).0 == "generated" {
        assert!(t0.elapsed() < Duration::from_secs(180), "{}", inst.log());
        settle_for(100);
    }
    settle_for(200);
    let (e, why) = engine(&inst);
    assert_eq!(e, "generated", "the stale tree form attached: {why}");
    decides_as_the_spec(&inst, &pair, &v, false, "the small ruleset");

    // 3. a second large ruleset applied during a load: the newest ends
    // on the link
    apply(&inst, &big);
    apply(&inst, &ruleset(40, true));
    wait_for_tree(&inst);
    decides_as_the_spec(&inst, &pair, &v, true, "the newest ruleset");
    assert_eq!(xdp_link(&inst), link, "the same link");
    assert_eq!(tree_pins(&inst).len(), 1, "{:?}", tree_pins(&inst));

    // 4. kill -9 with the split form on the link, and a restart: never
    // open (the walker while it loads again), then the split form again,
    // its prog array the one pinned
    let d = restart_under_flood(
        &inst,
        (&pair.a, &pair.b, v.b_addr),
        d,
        &flags,
        1,
        "restart with the split form on the link",
    );
    assert_eq!(xdp_link(&inst), link, "adopted, not re-attached");
    wait_for_tree(&inst);
    decides_as_the_spec(&inst, &pair, &v, true, "after the restart");
    assert_eq!(tree_pins(&inst).len(), 1, "{:?}", tree_pins(&inst));

    kill9(d);
    inst.remove_pinned();
    let _ = std::fs::remove_dir(inst.pins.parent().unwrap());
}
