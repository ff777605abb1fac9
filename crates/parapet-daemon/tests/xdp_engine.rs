//! The XDP engine through the real parapetd (`--xdp-engine`, the choice of
//! `parapet_dataplane::codegen::choose`): a small plain ruleset applied
//! and attached at XDP runs as a generated program (`stats` says so, read
//! from the program the link runs), drops what the linear engine drops and
//! counts it in the rule's counter exactly; a ruleset of more comparisons
//! than AUTO_MAX_JUMPS swaps the tree form in (loaded in the background,
//! the walker meanwhile: `generated-tree`, counting
//! rule 1 exactly too), the same with a LOG rule (eligible for neither)
//! the walker, and the small one the generated program back, in the same
//! link under a flood with no
//! dropped-class packet through and the probes arriving; a restart adopts
//! the link (not re-attached) and keeps enforcing; `--xdp-engine walker`
//! keeps the walker. Three more round trips under paced traffic lose no
//! probe and let no port-9 datagram through. Veth pair in namespaces of its own; needs root.

mod pin_support;

use parapet_testbed::{Pair, Veth};
use pin_support::*;
use serde_json::{json, Value};
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::time::Duration;

/// The small ruleset: drop UDP to port 9 (rule 1) and the flood's
/// banned address (`pin_support::BANNED`, by address: a set would keep
/// the walker), accept the rest.
const SMALL: &str = "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -p udp --dport 9 -j DROP\n\
                     -A INPUT -s 10.250.0.5 -j DROP\nCOMMIT\n";

/// The same first rules, then `n` rules no test packet matches, each of
/// about twenty comparisons (15 destination ports): past AUTO_MAX_JUMPS
/// for n = 60 (the instance counts rule ids up to 64).
fn large(n: usize) -> String {
    let mut s = SMALL.trim_end_matches("COMMIT\n").to_string();
    for i in 0..n {
        let ports: Vec<String> = (0..15)
            .map(|k| (20_000 + 100 * i + 2 * k).to_string())
            .collect();
        s.push_str(&format!(
            "-A INPUT -s 10.9.0.{}/32 -p tcp -m multiport --dports {} -j DROP\n",
            1 + i,
            ports.join(",")
        ));
    }
    s.push_str("COMMIT\n");
    s
}

/// [`large`] with a LOG rule no test packet matches: neither generated
/// program takes it.
fn large_logged(n: usize) -> String {
    let s = large(n);
    let body = s.trim_end_matches("COMMIT\n");
    format!("{body}-A INPUT -p tcp --dport 7 -j LOG\nCOMMIT\n")
}

/// (the attachment's engine, the `xdp_engine` object) from `stats`.
fn engine(inst: &Instance) -> (String, Value) {
    let s = inst.call(json!({"cmd": "stats"}));
    let a = &s["dataplane"]["attachments"][0];
    assert_eq!(a["hook"], "xdp", "{s}");
    (
        a["engine"]
            .as_str()
            .unwrap_or_else(|| panic!("{s}"))
            .to_string(),
        s["dataplane"]["xdp_engine"].clone(),
    )
}

fn apply(inst: &Instance, rules: &str) {
    let r = inst.call(json!({"cmd": "apply", "rules": rules, "name": "r.v4"}));
    assert_eq!(r["ok"], Value::from(true), "{r}");
}

/// Rule 1's packets and the kernel's packets seen, as `list --counters`
/// and `stats` show them.
fn counts(inst: &Instance) -> (u64, u64) {
    let s = inst.call(json!({"cmd": "stats"}));
    (
        inst.rule1_packets(),
        s["dataplane"]["kernel"]["packets"]
            .as_u64()
            .unwrap_or_else(|| panic!("{s}")),
    )
}

/// Sends `n` UDP datagrams to port 9 and `n` to the probe port from
/// namespace `a` (paced, so no queue overflows).
fn send_exactly(pair: &Pair, to: Ipv4Addr, n: u64) {
    let ns = std::fs::File::open(format!("/run/netns/{}", pair.a.name())).unwrap();
    std::thread::spawn(move || {
        parapet_testbed::enter(&ns).unwrap();
        let s = UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)).unwrap();
        for _ in 0..n {
            s.send_to(b"nine", SocketAddrV4::new(to, DROPPED_PORT))
                .unwrap();
            s.send_to(b"probe", SocketAddrV4::new(to, PROBE_PORT))
                .unwrap();
            std::thread::sleep(Duration::from_micros(200));
        }
    })
    .join()
    .unwrap();
    settle_for(200);
}

/// Applies `rules` under the flood: no dropped-class packet arrives, the
/// probes do, and the link is the same one.
fn apply_under_flood(inst: &Instance, pair: &Pair, v: &Veth<'_>, rules: &str, what: &str) {
    let link = inst.link().0;
    let run = Run::start(&pair.a, &pair.b, v.b_addr);
    settle_for(300);
    apply(inst, rules);
    settle_for(300);
    check(what, run.finish());
    assert_eq!(inst.link().0, link, "{what}: the same link");
}

/// Swaps between the engines under paced traffic (a port-9 datagram and a
/// probe every millisecond, no flood: nothing may be lost to a queue): 3
/// round trips generated -> walker -> generated, checked by `engine` each
/// time; every probe sent must arrive and no port-9 datagram, so there
/// was no moment without a program and no packet the swap lost.
fn swaps_lose_no_packet(inst: &Instance, pair: &Pair, v: &Veth<'_>, big: &str) {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;
    let stop = Arc::new(AtomicBool::new(false));
    let (sent, probes, nines) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
    );
    let to = v.b_addr;
    let mut threads = Vec::new();
    for (port, seen) in [(PROBE_PORT, probes.clone()), (DROPPED_PORT, nines.clone())] {
        let ns = std::fs::File::open(format!("/run/netns/{}", pair.b.name())).unwrap();
        let stop = stop.clone();
        let s = {
            // bound before the sender starts
            let (tx, rx) = std::sync::mpsc::channel();
            threads.push(std::thread::spawn(move || {
                parapet_testbed::enter(&ns).unwrap();
                let s = UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port)).unwrap();
                s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
                tx.send(()).unwrap();
                let mut buf = [0u8; 64];
                let t0 = std::time::Instant::now();
                while !stop.load(Ordering::SeqCst) && t0.elapsed() < Duration::from_secs(120) {
                    if s.recv_from(&mut buf).is_ok() {
                        seen.fetch_add(1, Ordering::SeqCst);
                    }
                }
                s.set_nonblocking(true).unwrap();
                for _ in 0..100_000 {
                    if s.recv_from(&mut buf).is_err() {
                        break;
                    }
                    seen.fetch_add(1, Ordering::SeqCst);
                }
            }));
            rx
        };
        s.recv_timeout(Duration::from_secs(5)).unwrap();
    }
    let sender = {
        let ns = std::fs::File::open(format!("/run/netns/{}", pair.a.name())).unwrap();
        let (stop, sent) = (stop.clone(), sent.clone());
        std::thread::spawn(move || {
            parapet_testbed::enter(&ns).unwrap();
            let s = UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)).unwrap();
            let t0 = std::time::Instant::now();
            while !stop.load(Ordering::SeqCst) && t0.elapsed() < Duration::from_secs(120) {
                s.send_to(b"nine", SocketAddrV4::new(to, DROPPED_PORT))
                    .unwrap();
                s.send_to(b"probe", SocketAddrV4::new(to, PROBE_PORT))
                    .unwrap();
                sent.fetch_add(1, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(1));
            }
        })
    };
    let link = inst.link().0;
    for _ in 0..3 {
        settle_for(150);
        apply(inst, big);
        assert_eq!(engine(inst).0, "walker");
        settle_for(150);
        apply(inst, SMALL);
        assert_eq!(engine(inst).0, "generated");
    }
    settle_for(150);
    stop.store(true, Ordering::SeqCst);
    sender.join().unwrap();
    settle_for(100);
    for t in threads {
        t.join().unwrap();
    }
    let (sent, probes, nines) = (
        sent.load(Ordering::SeqCst),
        probes.load(Ordering::SeqCst),
        nines.load(Ordering::SeqCst),
    );
    eprintln!("swaps: {probes} of {sent} probes and {nines} port-9 datagrams arrived");
    assert!(sent > 200, "{sent} sent");
    assert_eq!(nines, 0, "port-9 datagrams through a swap");
    assert_eq!(probes, sent, "probes lost across the swaps");
    assert_eq!(inst.link().0, link, "the same link throughout");
}

#[test]
#[ignore = "needs root"]
fn the_generated_program_is_attached_swapped_and_adopted() {
    parapet_testbed::require_root();
    let tag = "k15attach";
    let (pair, v) = bed(tag);
    let tmp = tempfile::tempdir().unwrap();
    let inst = Instance::new(&pair.b, tmp.path(), "k15attach");
    let _ = parapet_dataplane::remove_pins(&inst.pins);

    let d1 = inst.start(&[]);
    apply(&inst, SMALL);
    let r = inst.call(json!({"cmd": "attach", "iface": v.b_dev, "hook": "xdp", "mode": "native"}));
    assert_eq!(r["ok"], Value::from(true), "{r}");
    let (e, why) = engine(&inst);
    assert_eq!(e, "generated", "{why}");
    assert_eq!(why["engine"], "generated", "{why}");
    assert_eq!(why["requested"], "auto", "{why}");

    // the linear engine's verdicts, counted exactly: every port-9
    // datagram dropped and counted by rule 1, every probe through
    let (c0, p0) = counts(&inst);
    let run = Run::start(&pair.a, &pair.b, v.b_addr);
    settle_for(300);
    check("generated", run.finish());
    let (c1, _) = counts(&inst);
    assert!(c1 > c0, "rule 1 counted the flood: {c0} -> {c1}");
    send_exactly(&pair, v.b_addr, 300);
    let (c2, p2) = counts(&inst);
    assert_eq!(c2 - c1, 300, "rule 1 counts each port-9 datagram once");
    assert!(
        p2 - p0 >= c2 - c0 + 300,
        "stats counts the packets: {p0} -> {p2}"
    );

    // more comparisons than the straight-line program is faster at: the
    // tree form
    apply_under_flood(&inst, &pair, &v, &large(60), "to the tree form");
    // (loaded in the background, the walker meanwhile)
    let t0 = std::time::Instant::now();
    let (e, why) = loop {
        let (e, why) = engine(&inst);
        if e != "walker" || t0.elapsed() > Duration::from_secs(120) {
            break (e, why);
        }
        settle_for(50);
    };
    assert_eq!(e, "generated-tree", "{why}");
    let reason = why["reason"].as_str().unwrap();
    assert!(
        reason.contains("comparisons") && reason.contains("tree form"),
        "{why}"
    );
    let (c3, _) = counts(&inst);
    send_exactly(&pair, v.b_addr, 100);
    assert_eq!(counts(&inst).0 - c3, 100, "the tree form counts rule 1");

    // and with a LOG rule, eligible for neither: the walker
    let big = large_logged(60);
    apply_under_flood(&inst, &pair, &v, &big, "to the walker");
    let (e, why) = engine(&inst);
    assert_eq!(e, "walker", "{why}");
    assert!(why["reason"].as_str().unwrap().contains("logs"), "{why}");
    let (c4, _) = counts(&inst);
    send_exactly(&pair, v.b_addr, 100);
    assert_eq!(counts(&inst).0 - c4, 100, "the walker counts rule 1 too");

    // and back
    apply_under_flood(&inst, &pair, &v, SMALL, "back to the generated program");
    assert_eq!(engine(&inst).0, "generated");
    swaps_lose_no_packet(&inst, &pair, &v, &big);

    // kill -9 and restart under the flood: the link is adopted, the
    // generated program runs again
    let (link, _) = inst.link();
    let d2 = restart_under_flood(&inst, (&pair.a, &pair.b, v.b_addr), d1, &[], 1, "restart");
    assert_eq!(inst.link().0, link, "adopted, not re-attached");
    assert_eq!(engine(&inst).0, "generated");
    let said = inst.log();
    assert!(said.contains("adopted the pinned attachment"), "{said}");
    assert!(!said.contains("re-attached to"), "{said}");

    // forced to the walker, in the same link
    let d3 = restart_under_flood(
        &inst,
        (&pair.a, &pair.b, v.b_addr),
        d2,
        &["--xdp-engine", "walker"],
        1,
        "restart with --xdp-engine walker",
    );
    assert_eq!(inst.link().0, link);
    let (e, why) = engine(&inst);
    assert_eq!(e, "walker", "{why}");
    assert_eq!(why["requested"], "walker", "{why}");

    // detached: no engine reported, the pin gone
    let r = inst.call(json!({"cmd": "detach", "iface": v.b_dev}));
    assert_eq!(r["ok"], Value::from(true), "{r}");
    let s = inst.call(json!({"cmd": "stats"}));
    assert_eq!(s["dataplane"]["xdp_engine"]["engine"], Value::Null, "{s}");
    assert!(inst.link_pins().is_empty(), "{:?}", inst.link_pins());

    kill9(d3);
    inst.remove_pinned();
    let _ = std::fs::remove_dir(inst.pins.parent().unwrap());
}
