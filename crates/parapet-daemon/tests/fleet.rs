//! Fleet replication end to end: three (or four) real `parapetd`
//! processes joined by a real `nats-server` with JetStream (Debian's
//! package, installed by `make test`; storage in a temporary directory,
//! 127.0.0.1 on a free port). No kernel here: convergence in the kernel
//! of every node is `fleet_netns.rs` (root).

mod common;
mod fleet_support;

use common::{call, remaining};
use fleet_support::{elems, fleet_stats, node, wait_equal, wait_until, Broker};
use parapet_fleet::{batch, FleetMsg, Kind};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const BAN4: &str = "parapet-ban4";
const BAN6: &str = "parapet-ban6";
const LIMIT: Duration = Duration::from_secs(20);

fn ban(d: &common::Daemon, addrs: &[&str], timeout: u64) {
    let mut c = d.client();
    call(
        &mut c,
        json!({"cmd": "ban", "elems": addrs, "timeout": timeout}),
    );
}

fn unban(d: &common::Daemon, addrs: &[&str]) {
    let mut c = d.client();
    call(&mut c, json!({"cmd": "unban", "elems": addrs}));
}

/// Waits until a node's own changes are back from the log, then until it
/// writes a snapshot after them.
fn wait_logged_and_snapshotted(a: &common::Daemon) {
    wait_until(
        "the node's own changes are back from the log",
        LIMIT,
        || {
            let s = fleet_stats(a);
            s["backlog"] == 0 && s["in_flight"] == 0
        },
    );
    let s0 = fleet_stats(a)["snapshots"].as_u64().unwrap();
    wait_until("the node writes a snapshot after them", LIMIT, || {
        fleet_stats(a)["snapshots"].as_u64().unwrap() > s0
    });
}

fn strings(v: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = v.iter().map(|s| s.to_string()).collect();
    v.sort();
    v
}

#[test]
fn bans_unbans_and_shared_sets_converge() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path());
    let a = node(dir.path(), &broker, "a", &[]);
    let b = node(dir.path(), &broker, "b", &[]);
    let c = node(dir.path(), &broker, "c", &[]);
    for n in [&a, &b, &c] {
        let mut cl = n.client();
        call(
            &mut cl,
            json!({"cmd": "set.create", "set": "blk", "type": "ipv4_addr", "flags": ["shared", "interval"]}),
        );
        call(
            &mut cl,
            json!({"cmd": "set.create", "set": "mine", "type": "ipv4_addr"}),
        );
    }
    let t0 = Instant::now();
    ban(&a, &["192.0.2.1"], 600);
    wait_equal(&[&b, &c], BAN4, &strings(&["192.0.2.1"]), LIMIT);
    eprintln!("one ban from a reached b and c in {:?}", t0.elapsed());
    ban(&b, &["2001:db8::1", "192.0.2.2"], 600);
    call(
        &mut c.client(),
        json!({"cmd": "set.add", "set": "blk", "elems": ["198.51.100.0/24"]}),
    );
    call(
        &mut a.client(),
        json!({"cmd": "set.add", "set": "mine", "elems": ["203.0.113.9"]}),
    );
    unban(&c, &["192.0.2.1"]);
    let all = [&a, &b, &c];
    wait_equal(&all, BAN4, &strings(&["192.0.2.2"]), LIMIT);
    wait_equal(&all, BAN6, &strings(&["2001:db8::1"]), LIMIT);
    wait_equal(&all, "blk", &strings(&["198.51.100.0/24"]), LIMIT);
    call(&mut b.client(), json!({"cmd": "set.flush", "set": "blk"}));
    wait_equal(&all, "blk", &[], LIMIT);
    assert_eq!(
        elems(&b, "mine"),
        Vec::<String>::new(),
        "unshared stays local"
    );
    assert_eq!(elems(&a, "mine"), strings(&["203.0.113.9"]));
    for n in all {
        let s = fleet_stats(n);
        assert_eq!(s["connected"], true, "{s}");
        assert_eq!(s["rejected"], 0, "{s}");
        assert_eq!(s["dropped"], 0, "{s}");
    }
}

/// A ban and an unban of one address on two nodes at the same moment:
/// whatever wins, every node ends with the same answer (the stream's
/// order decides, everywhere).
#[test]
fn concurrent_ban_and_unban_converge() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path());
    let a = Arc::new(node(dir.path(), &broker, "a", &[]));
    let b = Arc::new(node(dir.path(), &broker, "b", &[]));
    let c = node(dir.path(), &broker, "c", &[]);
    let addrs: Vec<String> = (1..=40).map(|i| format!("10.9.0.{i}")).collect();
    // Everything banned first, everywhere.
    let refs: Vec<&str> = addrs.iter().map(|s| s.as_str()).collect();
    ban(&a, &refs, 600);
    let mut all = addrs.clone();
    all.sort();
    wait_equal(&[&a, &b, &c], BAN4, &all, LIMIT);
    // Now a re-bans and b unbans each address, racing.
    let go = Arc::new(std::sync::Barrier::new(2));
    let th: Vec<_> = [(a.clone(), true), (b.clone(), false)]
        .into_iter()
        .map(|(n, is_ban)| {
            let (addrs, go) = (addrs.clone(), go.clone());
            std::thread::spawn(move || {
                go.wait();
                for x in &addrs {
                    if is_ban {
                        ban(&n, &[x], 600);
                    } else {
                        unban(&n, &[x]);
                    }
                }
            })
        })
        .collect();
    th.into_iter().for_each(|t| t.join().unwrap());
    wait_until("all three nodes agree", LIMIT, || {
        let (ea, eb, ec) = (elems(&a, BAN4), elems(&b, BAN4), elems(&c, BAN4));
        ea == eb && eb == ec
    });
    eprintln!(
        "after the race {} of {} addresses stay banned on every node",
        elems(&c, BAN4).len(),
        addrs.len()
    );
}

/// One change as a batch message (the wire format of the log stream).
fn batch_bytes(m: &FleetMsg) -> Vec<u8> {
    let mut b = Vec::new();
    assert_eq!(batch::pack(std::slice::from_ref(m), &mut b), 1);
    b
}

#[test]
fn hostile_messages_are_rejected_counted_and_survived() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path());
    let a = node(dir.path(), &broker, "a", &[]);
    // b also writes its metrics, which carry the fleet's counters
    let prom_dir = dir.path().join("prom");
    std::fs::create_dir_all(&prom_dir).unwrap();
    let prom_arg = prom_dir.to_str().unwrap();
    let b = node(
        dir.path(),
        &broker,
        "b",
        &["--metrics-textfile", prom_arg, "--metrics-interval", "1"],
    );
    call(
        &mut b.client(),
        json!({"cmd": "set.create", "set": "mine", "type": "ipv4_addr"}),
    );
    ban(&a, &["192.0.2.1"], 600);
    wait_equal(&[&b], BAN4, &strings(&["192.0.2.1"]), LIMIT);
    let good = |set: &str, elem: &str, seq: u64| FleetMsg {
        kind: Kind::Add,
        origin: "evil".into(),
        seq,
        expires: 0,
        set: set.into(),
        elem: elem.into(),
    };
    let subj = batch::subject("parapet", "evil");
    // Garbage, truncation, a bad version, a huge payload.
    broker.publish_raw(&subj, b"\x00\x01garbage");
    let bytes = batch_bytes(&good(BAN4, "192.0.2.66", 1));
    broker.publish_raw(&subj, &bytes[..bytes.len() - 3]);
    broker.publish_raw(&subj, &[&b"PFB\x09"[..], &bytes[4..]].concat());
    broker.publish_raw(&subj, &vec![0x41; 100_000]);
    // Well-formed but lying: on the subject of another origin.
    let liar = batch::subject("parapet", "a");
    broker.publish_raw(&liar, &batch_bytes(&good(BAN4, "192.0.2.67", 2)));
    // Well-formed, but for a set the node does not share.
    broker.publish_raw(&subj, &batch_bytes(&good("mine", "192.0.2.68", 3)));
    // Well-formed, but not an address of the set's type.
    broker.publish_raw(&subj, &batch_bytes(&good(BAN4, "2001:db8::7", 4)));
    wait_until("b counts the rejected messages", LIMIT, || {
        fleet_stats(&b)["rejected"].as_u64().unwrap() >= 7
    });
    let s = fleet_stats(&b);
    assert!(s["last_error"].as_str().unwrap() != "", "{s}");
    eprintln!("b after hostile messages: {s}");
    assert_eq!(elems(&b, BAN4), strings(&["192.0.2.1"]));
    assert!(elems(&b, "mine").is_empty());
    // Still alive and replicating.
    ban(&a, &["192.0.2.2"], 600);
    wait_equal(
        &[&a, &b],
        BAN4,
        &strings(&["192.0.2.1", "192.0.2.2"]),
        LIMIT,
    );
    // The metrics say the same as stats: rejected and applied messages.
    let sample = |text: &str, name: &str| -> Option<f64> {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
    };
    wait_until("b's metrics count the fleet's messages", LIMIT, || {
        let text = std::fs::read_to_string(prom_dir.join("parapet.prom")).unwrap_or_default();
        sample(&text, "parapet_fleet_rejected_total").is_some_and(|v| v >= 7.0)
            && sample(&text, "parapet_fleet_applied_total").is_some_and(|v| v >= 2.0)
            && sample(&text, "parapet_fleet_connected") == Some(1.0)
    });
}

/// `kill -9` of a node while it takes bans as fast as a client can make
/// them; restarted, every ban it acknowledged reaches every node, and
/// every node holds each address once.
#[test]
fn kill9_under_load_loses_no_acknowledged_ban() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path());
    let mut a = node(dir.path(), &broker, "a", &[]);
    let b = node(dir.path(), &broker, "b", &[]);
    let c = node(dir.path(), &broker, "c", &[]);
    let acked = Arc::new(Mutex::new(Vec::<String>::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let sock = a.socket.clone();
    let load = {
        let (acked, stop) = (acked.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut cl = parapet_daemon::Client::connect(&sock).unwrap();
            for i in 0..200_000u32 {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let addr = format!("10.{}.{}.{}", 20 + i / 65536, (i / 256) % 256, i % 256);
                let r = cl.call(json!({"cmd": "ban", "elems": [addr], "timeout": 3600}));
                match r {
                    Ok(r) if r.ok() => acked.lock().unwrap().push(addr),
                    _ => break, // the daemon died under us
                }
            }
        })
    };
    wait_until("some bans acknowledged", LIMIT, || {
        acked.lock().unwrap().len() >= 2000
    });
    a.kill9();
    stop.store(true, Ordering::Relaxed);
    load.join().unwrap();
    let acked = acked.lock().unwrap().clone();
    eprintln!("{} bans acknowledged before kill -9", acked.len());
    let a2 = node(dir.path(), &broker, "a", &[]);
    let want: std::collections::BTreeSet<String> = acked.iter().cloned().collect();
    let t = wait_until("b and c hold every acknowledged ban", LIMIT * 2, || {
        [&b, &c].iter().all(|n| {
            let have: std::collections::BTreeSet<String> = elems(n, BAN4).into_iter().collect();
            have.is_superset(&want)
        })
    });
    eprintln!("caught up {t:?} after the restart");
    // At most the one request in flight at the kill was made but not
    // acknowledged; every node holds the same addresses, each once. The
    // restarted node may apply that request from the stream after b and c
    // (it is in the log, not in its journal): wait for all three to agree
    // rather than compare with its first listing.
    wait_until("a, b and c hold the same bans", LIMIT * 2, || {
        let ea = elems(&a2, BAN4);
        [&b, &c].iter().all(|n| elems(n, BAN4) == ea)
    });
    let ea = elems(&a2, BAN4);
    wait_equal(&[&b, &c], BAN4, &ea, LIMIT);
    assert!(
        ea.len() <= acked.len() + 1,
        "{} vs {}",
        ea.len(),
        acked.len()
    );
    let mut dedup = ea.clone();
    dedup.dedup();
    assert_eq!(dedup.len(), ea.len(), "an address listed twice");
    let s = fleet_stats(&b);
    assert_eq!(s["rejected"], 0, "{s}");
}

/// The broker goes away for 5 s (60 s in the benchmark; set
/// `PARAPET_FLEET_OUTAGE_S` to run the test at another length, up to 300 s)
/// while nodes keep banning and unbanning; when it returns, backlogs drain
/// and every node ends equal.
#[test]
fn broker_outage_then_every_node_equal() {
    let dir = tempfile::tempdir().unwrap();
    let mut broker = Broker::start(dir.path());
    let a = node(dir.path(), &broker, "a", &[]);
    let b = node(dir.path(), &broker, "b", &[]);
    let c = node(dir.path(), &broker, "c", &[]);
    ban(&a, &["192.0.2.1", "192.0.2.2"], 600);
    wait_equal(
        &[&a, &b, &c],
        BAN4,
        &strings(&["192.0.2.1", "192.0.2.2"]),
        LIMIT,
    );
    for n in [&a, &b, &c] {
        call(
            &mut n.client(),
            json!({"cmd": "set.create", "set": "bulk", "type": "ipv4_addr", "flags": ["shared"]}),
        );
    }
    let published = |n: &common::Daemon| fleet_stats(n)["published"].as_u64().unwrap();
    let p0 = published(&a);
    broker.stop();
    let t0 = Instant::now();
    // A backlog of several publish rounds (16k changes each): they go
    // out several in flight at once, each change exactly once.
    let mut bulk = Vec::new();
    for k in 0..BULK / 10_000 {
        let chunk: Vec<String> = (k * 10_000..(k + 1) * 10_000)
            .map(|i| format!("10.{}.{}.{}", 100 + i / 65536, (i / 256) % 256, i % 256))
            .collect();
        call(
            &mut a.client(),
            json!({"cmd": "set.add", "set": "bulk", "elems": chunk}),
        );
        bulk.extend(chunk);
    }
    bulk.sort();
    let mut want: Vec<String> = vec!["192.0.2.1".into()];
    for i in 0..500 {
        let x = format!("10.7.{}.{}", i / 256, i % 256);
        let n = [&a, &b, &c][i % 3];
        ban(n, &[&x], 600);
        want.push(x);
    }
    unban(&b, &["192.0.2.2"]);
    want.sort();
    // The nodes keep enforcing and accepting: local state is there.
    assert!(elems(&a, BAN4).contains(&"10.7.0.0".to_string()));
    wait_until("a sees the outage", LIMIT, || {
        let s = fleet_stats(&a);
        s["connected"] == false && s["backlog"].as_u64().unwrap() > 0
    });
    let outage = outage_length();
    std::thread::sleep(outage.saturating_sub(t0.elapsed()));
    broker.restart();
    let t = wait_equal(&[&a, &b, &c], BAN4, &want, LIMIT * 2);
    eprintln!("every node equal {t:?} after the broker returned from a {outage:?} outage");
    for n in [&a, &b, &c] {
        wait_until("backlog drained", LIMIT, || {
            fleet_stats(n)["backlog"].as_u64() == Some(0)
        });
    }
    // a's 167 of the 500 bans and the bulk, each acknowledged once.
    assert_eq!(published(&a) - p0, BULK as u64 + 167);
    for n in [&b, &c] {
        wait_until("the bulk everywhere", LIMIT, || {
            let s = common::call(&mut n.client(), json!({"cmd": "stats"}));
            s["elements"].as_u64() >= Some((BULK + want.len()) as u64)
        });
    }
    assert_eq!(elems(&a, "bulk"), bulk);
    assert_eq!(elems(&b, "bulk"), bulk);
    assert_eq!(elems(&c, "bulk"), bulk);
}

/// Changes queued on one node during the outage test: several publish
/// rounds.
const BULK: usize = 70_000;

/// How long the outage test keeps the broker away: 5 s by default (the
/// suite stays fast; nothing in the mechanism depends on the length),
/// `PARAPET_FLEET_OUTAGE_S` seconds (1–300) to run it as the 60 s.
fn outage_length() -> Duration {
    let s = std::env::var("PARAPET_FLEET_OUTAGE_S")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(5);
    Duration::from_secs(s.clamp(1, 300))
}

/// Node b's clock is 30 s ahead, c's 30 s behind. Expiries travel as
/// absolute times: a 20 s ban from a is already over on b and never
/// appears there; c keeps it 30 s longer; a late node bootstraps the
/// same absolute expiries.
#[test]
fn clock_skew_does_not_resurrect_bans() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path());
    let a = node(dir.path(), &broker, "a", &[]);
    let b = node(dir.path(), &broker, "b", &["--clock-offset-ms", "30000"]);
    let c = node(dir.path(), &broker, "c", &["--clock-offset-ms=-30000"]);
    ban(&a, &["192.0.2.20"], 20);
    ban(&a, &["192.0.2.60"], 60);
    wait_until("the 60 s ban everywhere", LIMIT, || {
        [&b, &c]
            .iter()
            .all(|n| elems(n, BAN4).contains(&"192.0.2.60".into()))
    });
    wait_until("the 20 s ban on c", LIMIT, || {
        elems(&c, BAN4).contains(&"192.0.2.20".into())
    });
    assert_eq!(
        elems(&b, BAN4),
        strings(&["192.0.2.60"]),
        "expired by b's clock"
    );
    let near = |x: Option<u64>, want: u64| x.is_some_and(|x| x.abs_diff(want) <= 3);
    assert!(
        near(remaining(&b, BAN4, "192.0.2.60"), 30),
        "{:?}",
        remaining(&b, BAN4, "192.0.2.60")
    );
    assert!(near(remaining(&c, BAN4, "192.0.2.60"), 90));
    assert!(near(remaining(&c, BAN4, "192.0.2.20"), 50));
    // A ban from the fast clock lasts 50 s by a's.
    ban(&b, &["192.0.2.21"], 20);
    wait_until("b's ban on a", LIMIT, || {
        elems(&a, BAN4).contains(&"192.0.2.21".into())
    });
    assert!(near(remaining(&a, BAN4, "192.0.2.21"), 50));
    // A fresh node bootstraps the current bans by replaying the log.
    let d = node(dir.path(), &broker, "d", &[]);
    let want = strings(&["192.0.2.20", "192.0.2.21", "192.0.2.60"]);
    wait_equal(&[&d], BAN4, &want, LIMIT);
    assert!(near(remaining(&d, BAN4, "192.0.2.60"), 60));
    let s: Value = fleet_stats(&d);
    assert_eq!(s["rejected"], 0, "{s}");
}

/// Node c alone loses the broker (its link cut, the others keep theirs),
/// everyone goes on banning; healed, all three end equal.
#[test]
fn partitioned_node_heals() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path());
    let relay = fleet_support::Relay::start(broker.port);
    let a = node(dir.path(), &broker, "a", &[]);
    let b = node(dir.path(), &broker, "b", &[]);
    let mut c = fleet_support::node_via(dir.path(), &relay, "c");
    ban(&a, &["192.0.2.1"], 600);
    wait_equal(&[&a, &b, &c], BAN4, &strings(&["192.0.2.1"]), LIMIT);
    relay.set_cut(true);
    wait_until("c sees the partition", LIMIT, || {
        fleet_stats(&c)["connected"] == false
    });
    ban(&a, &["192.0.2.2"], 600);
    ban(&c, &["192.0.2.3"], 600);
    unban(&c, &["192.0.2.1"]);
    // a and b go on together; c enforces its own.
    wait_equal(
        &[&a, &b],
        BAN4,
        &strings(&["192.0.2.1", "192.0.2.2"]),
        LIMIT,
    );
    assert_eq!(elems(&c, BAN4), strings(&["192.0.2.3"]));
    // Restarted while cut off: it stops at once (no waiting on the
    // broker), starts, and still holds and enforces its own bans.
    let t0 = Instant::now();
    assert!(c.term().success());
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "stop took {:?}",
        t0.elapsed()
    );
    let c = fleet_support::node_via(dir.path(), &relay, "c");
    assert_eq!(elems(&c, BAN4), strings(&["192.0.2.3"]));
    assert!(
        fleet_stats(&c)["backlog"].as_u64().unwrap() >= 2,
        "{}",
        fleet_stats(&c)
    );
    std::thread::sleep(Duration::from_secs(1));
    relay.set_cut(false);
    let t = wait_equal(
        &[&a, &b, &c],
        BAN4,
        &strings(&["192.0.2.2", "192.0.2.3"]),
        LIMIT,
    );
    eprintln!("healed: every node equal {t:?} after the link returned");
}

/// A new node loads the newest snapshot, then the log after it: with the
/// log purged (as if it had wrapped), the bans reach it from the snapshot
/// alone, and what the log gets afterwards follows.
#[test]
fn new_node_bootstraps_from_a_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path());
    let a = node(dir.path(), &broker, "a", &["--fleet-snapshot-s", "1"]);
    ban(&a, &["192.0.2.1", "192.0.2.2", "192.0.2.3"], 600);
    unban(&a, &["192.0.2.2"]);
    let want = strings(&["192.0.2.1", "192.0.2.3"]);
    wait_logged_and_snapshotted(&a);
    let r = broker.request_raw("$JS.API.STREAM.PURGE.parapet_fleetlog", b"");
    assert!(r.contains("\"success\":true"), "{r}");
    let c = node(dir.path(), &broker, "c", &[]);
    wait_equal(&[&c], BAN4, &want, LIMIT);
    let s = fleet_stats(&c);
    assert!(s["boot_snapshot_at"].as_u64().unwrap() > 0, "{s}");
    // The log after the snapshot follows.
    ban(&a, &["192.0.2.4"], 600);
    let want = strings(&["192.0.2.1", "192.0.2.3", "192.0.2.4"]);
    wait_equal(&[&a, &c], BAN4, &want, LIMIT);
    // Expiries travel absolute through the snapshot too.
    let t = remaining(&c, BAN4, "192.0.2.1").unwrap();
    assert!((500..=600).contains(&t), "{t}");
}

/// A node away longer than the log's horizon: the log (1 MiB) drops the
/// changes it missed, including an unban. Back, it finds the message
/// after its last acknowledged one gone, re-bootstraps from the newest
/// snapshot plus the log after it while running, and removes what the
/// fleet removed in the lost part; what it held and still holds keeps
/// its expiry (no reban).
#[test]
fn node_away_past_the_log_horizon_rebootstraps_from_a_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path());
    let small = ["--fleet-stream-mib", "1", "--fleet-snapshot-s", "1"];
    let a = node(dir.path(), &broker, "a", &small);
    let mut c = node(dir.path(), &broker, "c", &small);
    ban(&a, &["192.0.2.1", "192.0.2.2"], 600);
    wait_equal(
        &[&a, &c],
        BAN4,
        &strings(&["192.0.2.1", "192.0.2.2"]),
        LIMIT,
    );
    let before = remaining(&c, BAN4, "192.0.2.2").unwrap();
    assert!(c.term().success());
    // While c is away: an unban, a ban, and churn that pushes both out of
    // the log (10,000 changes a round, about 40 bytes each).
    unban(&a, &["192.0.2.1"]);
    ban(&a, &["192.0.2.3"], 600);
    let churn: Vec<String> = (0..5000)
        .map(|i| format!("10.1.{}.{}", i / 256, i % 256))
        .collect();
    let churn: Vec<&str> = churn.iter().map(String::as_str).collect();
    for _ in 0..6 {
        ban(&a, &churn, 600);
        unban(&a, &churn);
    }
    let want = strings(&["192.0.2.2", "192.0.2.3"]);
    wait_logged_and_snapshotted(&a);
    let c = node(dir.path(), &broker, "c", &small);
    wait_equal(&[&a, &c], BAN4, &want, LIMIT);
    wait_until("c's re-bootstrap ends", LIMIT, || {
        fleet_stats(&c)["resync_removed"].as_u64().unwrap() > 0
    });
    let s = fleet_stats(&c);
    assert_eq!(s["resyncs"], 1, "{s}");
    assert_eq!(s["resync_removed"], 1, "only the lost unban: {s}");
    assert!(s["boot_snapshot_at"].as_u64().unwrap() > 0, "{s}");
    let after = remaining(&c, BAN4, "192.0.2.2").unwrap();
    assert!(
        after <= before && before - after < 60,
        "{before} -> {after}"
    );
    // And it follows the log again.
    ban(&a, &["192.0.2.4"], 600);
    let want = strings(&["192.0.2.2", "192.0.2.3", "192.0.2.4"]);
    wait_equal(&[&a, &c], BAN4, &want, LIMIT);
    assert_eq!(fleet_stats(&c)["resyncs"], 1);
}

/// Two fleets on one broker (`--fleet-prefix`): their own streams and
/// subjects, so each node gets its fleet's bans and never the other's.
/// Sharing one fleet (the prefix ignored), each pair's set would end
/// with all four bans and the waits below would time out.
#[test]
fn prefixes_keep_two_fleets_apart_on_one_broker() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path());
    let (red, blue) = (["--fleet-prefix", "red"], ["--fleet-prefix", "blue"]);
    let r1 = node(dir.path(), &broker, "r1", &red);
    let r2 = node(dir.path(), &broker, "r2", &red);
    let b1 = node(dir.path(), &broker, "b1", &blue);
    let b2 = node(dir.path(), &broker, "b2", &blue);
    ban(&r1, &["192.0.2.1"], 600);
    ban(&b1, &["198.51.100.1"], 600);
    ban(&r2, &["192.0.2.2"], 600);
    ban(&b2, &["198.51.100.2"], 600);
    let reds = strings(&["192.0.2.1", "192.0.2.2"]);
    let blues = strings(&["198.51.100.1", "198.51.100.2"]);
    wait_equal(&[&r1, &r2], BAN4, &reds, LIMIT);
    wait_equal(&[&b1, &b2], BAN4, &blues, LIMIT);
    // Both fleets' changes are back from their logs: nothing in flight
    // could still cross over.
    for n in [&r1, &r2, &b1, &b2] {
        wait_until("own changes back from the log", LIMIT, || {
            let s = fleet_stats(n);
            s["backlog"] == 0 && s["in_flight"] == 0
        });
    }
    assert_eq!(elems(&r1, BAN4), reds);
    assert_eq!(elems(&r2, BAN4), reds);
    assert_eq!(elems(&b1, BAN4), blues);
    assert_eq!(elems(&b2, BAN4), blues);
    let info = broker.request_raw("$JS.API.STREAM.INFO.red_fleetlog", b"");
    assert!(info.contains("\"red.fleetlog.*\""), "{info}");
}

/// Back-pressure at its bound: the broker away and a 1 MiB outbox
/// (`--fleet-outbox-mib 1`, some 28k changes). The node goes on enforcing
/// every ban; the ones that did not fit are counted in `dropped` with
/// `last_error`, never queued beyond the bound; when the broker returns
/// the fleet gets exactly the ones that did.
#[test]
fn a_full_outbox_keeps_enforcing_and_counts_what_it_drops() {
    let dir = tempfile::tempdir().unwrap();
    let mut broker = Broker::start(dir.path());
    let a = node(dir.path(), &broker, "a", &["--fleet-outbox-mib", "1"]);
    let b = node(dir.path(), &broker, "b", &[]);
    ban(&a, &["192.0.2.1"], 600);
    wait_equal(&[&a, &b], BAN4, &strings(&["192.0.2.1"]), LIMIT);
    wait_until("a's ban back from the log", LIMIT, || {
        let s = fleet_stats(&a);
        s["backlog"] == 0 && s["in_flight"] == 0
    });
    broker.stop();
    wait_until("a sees the outage", LIMIT, || {
        fleet_stats(&a)["connected"] == false
    });
    const N: usize = 60_000;
    for k in 0..N / 10_000 {
        let chunk: Vec<String> = (k * 10_000..(k + 1) * 10_000)
            .map(|i| format!("10.{}.{}.{}", 40 + i / 65536, (i / 256) % 256, i % 256))
            .collect();
        let chunk: Vec<&str> = chunk.iter().map(String::as_str).collect();
        ban(&a, &chunk, 600);
    }
    let s = fleet_stats(&a);
    let (dropped, backlog) = (
        s["dropped"].as_u64().unwrap(),
        s["backlog"].as_u64().unwrap(),
    );
    assert!(dropped > 0 && backlog > 0, "{s}");
    assert_eq!(dropped + backlog, N as u64, "{s}");
    assert!(s["outbox_bytes"].as_u64().unwrap() <= 1 << 20, "{s}");
    assert!(s["last_error"].as_str().unwrap().contains("outbox"), "{s}");
    assert_eq!(elems(&a, BAN4).len(), N + 1, "every ban enforced locally");
    broker.restart();
    wait_until("a's outbox drained", LIMIT * 2, || {
        fleet_stats(&a)["backlog"] == 0
    });
    wait_until("b holds what fit in the outbox", LIMIT * 2, || {
        elems(&b, BAN4).len() as u64 == backlog + 1
    });
    assert_eq!(fleet_stats(&b)["rejected"], 0);
}
