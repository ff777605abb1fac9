//! End-to-end tests against the real `parapetd` binary.

mod common;

use common::{call, Daemon};
use parapet_daemon::ClientError;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::Ipv4Addr;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

fn addr(i: u32) -> String {
    // 10.0.0.0/8 and up, odd-spaced so nothing is adjacent.
    Ipv4Addr::from(0x0a00_0000u32 + 2 * i + 1).to_string()
}

fn count(c: &mut parapet_daemon::Client, set: &str) -> usize {
    call(c, json!({"cmd": "set.list", "set": set}))["elems"]
        .as_array()
        .unwrap()
        .len()
}

fn covered(c: &mut parapet_daemon::Client, set: &str, e: &str) -> bool {
    call(c, json!({"cmd": "set.test", "set": set, "elem": e}))["covered"]
        .as_bool()
        .unwrap()
}

/// The "done when": hundreds of thousands of bans from a file,
/// kill -9, restart, every acknowledged ban back and none that expired.
#[test]
fn bans_survive_kill9_and_expired_ones_do_not_return() {
    let dir = tempfile::tempdir().unwrap();
    let mut d = Daemon::start(dir.path(), &[]);
    let mut c = d.client();
    call(
        &mut c,
        json!({"cmd": "set.create", "set": "blocklist", "type": "ipv4_addr", "flags": ["timeout"]}),
    );

    // 200k long bans (1 h) and 20k short ones (2 s), batched and pipelined
    // the way `parapet set add --file` sends them.
    const LONG: u32 = 200_000;
    const SHORT: u32 = 20_000;
    let t0 = Instant::now();
    let mut lines = Vec::new();
    for (range, timeout) in [(0..LONG, 3600), (LONG..LONG + SHORT, 2)] {
        let addrs: Vec<String> = range.map(addr).collect();
        for batch in addrs.chunks(1 << 16) {
            let req = json!({"v": 1, "id": c.take_id(), "cmd": "set.add", "set": "blocklist",
                "elems": batch, "timeout": timeout});
            let mut line = serde_json::to_vec(&req).unwrap();
            line.push(b'\n');
            lines.push(line);
        }
    }
    for r in c.pipeline(lines).unwrap() {
        assert!(r.ok(), "{:?}", r.error());
    }
    eprintln!("added {} elements in {:?}", LONG + SHORT, t0.elapsed());
    // Some single bans and unbans over the protocol too.
    call(
        &mut c,
        json!({"cmd": "ban", "elems": ["192.0.2.1", "2001:db8::1"], "timeout": 3600}),
    );
    call(&mut c, json!({"cmd": "ban", "elems": ["192.0.2.2"]}));
    call(&mut c, json!({"cmd": "unban", "elems": ["192.0.2.2"]}));
    call(
        &mut c,
        json!({"cmd": "set.del", "set": "blocklist", "elems": [addr(7)]}),
    );
    assert_eq!(count(&mut c, "blocklist"), (LONG + SHORT - 1) as usize);

    d.kill9();
    // Let the short bans expire while the daemon is down.
    std::thread::sleep(Duration::from_millis(2500));
    let t0 = Instant::now();
    let d2 = Daemon::start(dir.path(), &[]);
    eprintln!("restart ready in {:?}", t0.elapsed());
    let mut c = d2.client();
    let r = call(&mut c, json!({"cmd": "set.list", "set": "blocklist"}));
    let elems = r["elems"].as_array().unwrap();
    assert_eq!(
        elems.len(),
        (LONG - 1) as usize,
        "every long ban back, no short one"
    );
    for e in elems {
        let t = e["timeout"].as_u64().unwrap();
        assert!(t <= 3600 && t > 3500, "remaining timeout kept: {e}");
    }
    assert!(covered(&mut c, "blocklist", &addr(0)));
    assert!(covered(&mut c, "blocklist", &addr(LONG - 1)));
    assert!(
        !covered(&mut c, "blocklist", &addr(7)),
        "deleted stays deleted"
    );
    assert!(
        !covered(&mut c, "blocklist", &addr(LONG)),
        "expired stays expired"
    );
    assert!(covered(&mut c, "parapet-ban4", "192.0.2.1"));
    assert!(!covered(&mut c, "parapet-ban4", "192.0.2.2"));
    assert!(covered(&mut c, "parapet-ban6", "2001:db8::1"));
    let st = call(&mut c, json!({"cmd": "stats"}));
    assert!(
        st["recovery"]["problems"].as_array().unwrap().is_empty(),
        "{}",
        st.body.get("recovery").unwrap()
    );
}

#[test]
fn clean_shutdown_snapshots_and_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let mut d = Daemon::start(dir.path(), &[]);
    let mut c = d.client();
    call(
        &mut c,
        json!({"cmd": "set.create", "set": "nets", "type": "hash:net", "timeout": 600}),
    );
    call(
        &mut c,
        json!({"cmd": "set.add", "set": "nets", "elems": ["10.0.0.0/8", "192.0.2.0/24"]}),
    );
    call(
        &mut c,
        json!({"cmd": "set.add", "set": "nets", "elems": ["198.51.100.7"], "timeout": 0}),
    );
    drop(c);
    assert!(d.term().success());
    assert!(d.state.join("snapshot").exists());
    let d2 = Daemon::start(dir.path(), &[]);
    let mut c = d2.client();
    let st = call(&mut c, json!({"cmd": "stats"}));
    assert_eq!(
        st["recovery"]["journal_records"],
        json!(0),
        "everything came from the snapshot"
    );
    let r = call(&mut c, json!({"cmd": "set.list", "set": "nets"}));
    let els: Vec<(String, Option<u64>)> = r["elems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["elem"].as_str().unwrap().to_string(),
                e["timeout"].as_u64(),
            )
        })
        .collect();
    assert_eq!(els.len(), 3, "{els:?}");
    assert!(
        els.iter().any(|(e, t)| e == "198.51.100.7" && t.is_none()),
        "permanent stays permanent: {els:?}"
    );
    assert!(els
        .iter()
        .any(|(e, t)| e == "10.0.0.0/8" && t.is_some_and(|t| t <= 600 && t > 550)));
    assert!(covered(&mut c, "nets", "10.1.2.3"));
    assert!(!covered(&mut c, "nets", "11.0.0.1"));
}

#[test]
fn corrupt_or_truncated_journal_keeps_the_intact_part() {
    let dir = tempfile::tempdir().unwrap();
    let mut d = Daemon::start(dir.path(), &[]);
    let mut c = d.client();
    call(
        &mut c,
        json!({"cmd": "set.create", "set": "b", "type": "ipv4_addr"}),
    );
    for i in 0..10 {
        call(
            &mut c,
            json!({"cmd": "set.add", "set": "b", "elems": [addr(i)]}),
        );
    }
    d.kill9();
    let jpath = d.state.join("journal");
    let data = std::fs::read(&jpath).unwrap();

    // 1. Torn tail: cut 5 bytes off the last record.
    std::fs::write(&jpath, &data[..data.len() - 5]).unwrap();
    let mut d = Daemon::start(dir.path(), &[]);
    let mut c = d.client();
    assert_eq!(count(&mut c, "b"), 9);
    let st = call(&mut c, json!({"cmd": "stats"}));
    let probs = st["recovery"]["problems"].as_array().unwrap();
    assert!(
        probs
            .iter()
            .any(|p| p.as_str().unwrap().contains("truncated")),
        "{probs:?}"
    );
    assert!(
        d.log().contains("truncated"),
        "reported on stderr: {}",
        d.log()
    );
    // The daemon compacted: the next start is clean, and new changes stick.
    call(
        &mut c,
        json!({"cmd": "set.add", "set": "b", "elems": ["192.0.2.99"]}),
    );
    d.kill9();
    let mut d = Daemon::start(dir.path(), &[]);
    let mut c = d.client();
    assert_eq!(count(&mut c, "b"), 10);
    assert!(
        call(&mut c, json!({"cmd": "stats"}))["recovery"]["problems"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert!(std::fs::read_dir(&d.state).unwrap().any(|e| e
        .unwrap()
        .file_name()
        .to_string_lossy()
        .starts_with("journal.corrupt-")));

    // 2. A flipped byte in the middle of the journal: that record is
    // skipped and reported, those after it survive.
    for i in 20..30 {
        call(
            &mut c,
            json!({"cmd": "set.add", "set": "b", "elems": [addr(i)]}),
        );
    }
    d.kill9();
    let mut data = std::fs::read(&jpath).unwrap();
    let n = data.len();
    // Records here are equal-sized; hit the payload of one in the middle.
    let rec = (n - 16) / 10;
    data[16 + 4 * rec + rec / 2] ^= 0xff;
    std::fs::write(&jpath, &data).unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let mut c = d.client();
    assert_eq!(
        count(&mut c, "b"),
        19,
        "one record lost, nine after it kept"
    );
    let probs = call(&mut c, json!({"cmd": "stats"}))["recovery"]["problems"].clone();
    assert!(probs.to_string().contains("checksum"), "{probs}");
}

#[test]
fn malformed_requests_get_errors_and_the_daemon_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let mut s = UnixStream::connect(&d.socket).unwrap();
    let mut other = d.client();
    let bad: Vec<&[u8]> = vec![
        b"not json\n",
        b"{\"id\":1,\"cmd\":\"nope\"}\n",
        b"{\"id\":2,\"cmd\":\"set.add\"}\n",
        b"{\"id\":3,\"cmd\":\"set.add\",\"set\":\"missing\",\"elems\":[\"1.2.3.4\"]}\n",
        b"{\"id\":4,\"v\":9,\"cmd\":\"ping\"}\n",
        b"{\"id\":5,\"cmd\":\"ping\",\"junk\":true}\n",
        b"\xff\xfe\x00garbage\n",
        b"[1,2,3]\n",
        b"{\"id\":6,\"cmd\":\"ban\",\"elems\":[\"999.1.1.1\"]}\n",
        b"{\"id\":7,\"cmd\":\"set.create\",\"set\":\"x y\",\"type\":\"ipv4_addr\"}\n",
        b"{\"id\":8,\"cmd\":\"apply\",\"rules\":\"*filter\\n-A\\nCOMMIT\\n\",\"name\":\"r.v4\"}\n",
    ];
    for b in &bad {
        s.write_all(b).unwrap();
    }
    // An oversized line (16 MiB + 1 KiB), sent while another client works.
    let big = vec![b'x'; (16 << 20) + 1024];
    let writer = {
        let mut s2 = s.try_clone().unwrap();
        std::thread::spawn(move || {
            s2.write_all(&big).unwrap();
            s2.write_all(b"\n{\"id\":99,\"cmd\":\"ping\"}\n").unwrap();
        })
    };
    call(&mut other, json!({"cmd": "ping"}));
    writer.join().unwrap();
    let mut replies = Vec::new();
    let mut buf = Vec::new();
    let mut tmp = [0u8; 4096];
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    while replies.len() < bad.len() + 2 {
        let n = s.read(&mut tmp).unwrap();
        assert!(n > 0, "daemon closed the connection");
        buf.extend_from_slice(&tmp[..n]);
        while let Some(p) = buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = buf.drain(..=p).collect();
            replies.push(serde_json::from_slice::<Value>(&line).unwrap());
        }
    }
    let codes: Vec<&str> = replies
        .iter()
        .map(|r| r["error"]["code"].as_str().unwrap_or("ok"))
        .collect();
    assert_eq!(
        codes,
        vec![
            "parse",
            "unknown_cmd",
            "invalid",
            "no_such_set",
            "version",
            "parse",
            "parse",
            "parse",
            "invalid",
            "invalid",
            "apply",
            "too_long",
            "ok"
        ]
    );
    assert_eq!(replies[1]["id"], json!(1), "id recovered");
    assert_eq!(replies[12]["id"], json!(99));
    assert_eq!(
        replies[10]["error"]["errors"][0],
        json!("r.v4:2:4: expected a chain name after -A")
    );
    // Random garbage lines (bounded count) on a fresh connection: every
    // line gets exactly one error reply, and the connection stays usable.
    let mut g = d.client();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut junk = Vec::new();
    let lines = 300;
    for _ in 0..lines {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let len = (x % 200) as usize + 1;
        let mut l: Vec<u8> = (0..len)
            .map(|i| (x.rotate_left(i as u32 * 7) as u8) | 0x01)
            .filter(|&b| b != b'\n')
            .collect();
        if l.iter().all(u8::is_ascii_whitespace) {
            l.push(b'x');
        }
        if x % 3 == 0 {
            // Near misses: valid JSON with the wrong shapes.
            l = format!(
                "{{\"cmd\":\"set.add\",\"set\":{},\"elems\":[{}]}}",
                x % 5,
                x % 7
            )
            .into_bytes();
        }
        junk.extend_from_slice(&l);
        junk.push(b'\n');
    }
    g.send_raw(&junk).unwrap();
    for i in 0..lines {
        let r = g.read_reply().unwrap_or_else(|e| panic!("reply {i}: {e}"));
        assert!(!r.ok(), "garbage accepted: {:?}", r.body);
    }
    call(&mut g, json!({"cmd": "ping"}));
    // Still serving, state untouched.
    let st = call(&mut other, json!({"cmd": "stats"}));
    assert_eq!(st["sets"], json!(0));
    assert_eq!(st["generation"], json!(0));
}

#[test]
fn apply_is_atomic_and_names_errors() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let mut c = d.client();
    let good = "*filter\n:INPUT DROP [0:0]\n-A INPUT -p tcp -m tcp --dport 22 -j ACCEPT\n-A INPUT -m set --match-set admins src -j ACCEPT\nCOMMIT\n";
    // The referenced set does not exist yet: refused, naming the line.
    let e = c
        .call(json!({"cmd": "apply", "rules": good, "name": "r.v4"}))
        .unwrap_err();
    match e {
        ClientError::Daemon { code, msg, .. } => {
            assert_eq!(code, "apply");
            assert!(msg.starts_with("r.v4:4:1:"), "{msg}");
        }
        e => panic!("{e}"),
    }
    call(
        &mut c,
        json!({"cmd": "set.create", "set": "admins", "type": "hash:ip"}),
    );
    let r = call(
        &mut c,
        json!({"cmd": "apply", "rules": good, "name": "r.v4", "check": true}),
    );
    assert_eq!(r["rules"], json!(2));
    assert_eq!(
        call(&mut c, json!({"cmd": "list"}))["active"],
        json!(false),
        "--check changes nothing"
    );
    let r = call(
        &mut c,
        json!({"cmd": "apply", "rules": good, "name": "r.v4"}),
    );
    assert_eq!(r["generation"], json!(1));
    let bad = "*filter\n:INPUT DROP [0:0]\n-A INPUT -p tcp --dport 99999 -j ACCEPT\nCOMMIT\n";
    let e = c
        .call(json!({"cmd": "apply", "rules": bad, "name": "bad.v4"}))
        .unwrap_err();
    assert!(e.to_string().starts_with("bad.v4:3:"), "{e}");
    let l = call(&mut c, json!({"cmd": "list", "counters": true}));
    assert_eq!(
        (l["generation"].clone(), l["name"].clone()),
        (json!(1), json!("r.v4")),
        "failed apply changed nothing"
    );
    assert!(l["text"].as_str().unwrap().contains("--dport 22"));
    assert_eq!(l["counters"].as_array().unwrap().len(), 2);
    let j = call(&mut c, json!({"cmd": "list", "format": "json"}));
    assert_eq!(j["ruleset"]["tables"][0]["name"], json!("filter"));
    // Converting is the renderer's job; what it cannot write is an error, not a wrong text.
    let e = c.call(json!({"cmd": "list", "format": "nft"})).unwrap_err();
    assert!(e.to_string().contains("cannot print"), "{e}");
    assert!(
        c.call(json!({"cmd": "set.destroy", "set": "admins"}))
            .is_err(),
        "in use"
    );
    call(&mut c, json!({"cmd": "counters.reset"}));
}

#[test]
fn sd_notify_ready() {
    let dir = tempfile::tempdir().unwrap();
    let nsock = dir.path().join("notify");
    let rx = std::os::unix::net::UnixDatagram::bind(&nsock).unwrap();
    rx.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let _d = Daemon::start_env(
        dir.path(),
        &[],
        &[("NOTIFY_SOCKET", nsock.to_str().unwrap())],
    );
    let mut b = [0u8; 256];
    let n = rx.recv(&mut b).unwrap();
    let msg = String::from_utf8_lossy(&b[..n]);
    assert!(msg.starts_with("READY=1\n"), "{msg}");
}

#[test]
fn second_daemon_on_same_state_is_refused_and_socket_is_0660() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let mode = std::fs::metadata(&d.socket).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o660);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_parapetd"))
        .arg("--socket")
        .arg(dir.path().join("other.sock"))
        .arg("--state-dir")
        .arg(&d.state)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("in use"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Many clients banning at once: every acknowledged ban survives kill -9.
#[test]
fn concurrent_clients_all_durable() {
    let dir = tempfile::tempdir().unwrap();
    let mut d = Daemon::start(dir.path(), &[]);
    let threads: Vec<_> = (0..8u32)
        .map(|t| {
            let sock = d.socket.clone();
            std::thread::spawn(move || {
                let mut c = parapet_daemon::Client::connect(&sock).unwrap();
                // Half pipelined, half one at a time.
                let lines: Vec<Vec<u8>> = (0..1000u32)
                    .map(|i| {
                        let (_, l) = c.encode(
                            json!({"cmd": "ban", "elems": [addr(t * 10_000 + i)], "timeout": 600})
                                .as_object()
                                .unwrap()
                                .clone(),
                        );
                        l
                    })
                    .collect();
                for r in c.pipeline(lines).unwrap() {
                    assert!(r.ok(), "{:?}", r.body);
                }
                for i in 1000..1100u32 {
                    call(
                        &mut c,
                        json!({"cmd": "ban", "elems": [addr(t * 10_000 + i)]}),
                    );
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    d.kill9();
    let d = Daemon::start(dir.path(), &[]);
    let mut c = d.client();
    assert_eq!(count(&mut c, "parapet-ban4"), 8 * 1100);
    let st = call(&mut c, json!({"cmd": "stats"}));
    assert_eq!(st["elements"], json!(8 * 1100));
}

/// A request that does not fit is refused whole; the set is unchanged.
#[test]
fn full_set_refuses_the_whole_request() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let mut c = d.client();
    call(
        &mut c,
        json!({"cmd": "set.create", "set": "small", "type": "ipv4_addr", "size": 3}),
    );
    call(
        &mut c,
        json!({"cmd": "set.add", "set": "small", "elems": ["10.0.0.1", "10.0.0.2"]}),
    );
    match c.call(json!({"cmd": "set.add", "set": "small", "elems": ["10.0.0.3", "10.0.0.4"]})) {
        Err(ClientError::Daemon { code, .. }) => assert_eq!(code, "full"),
        other => panic!("{other:?}"),
    }
    assert_eq!(count(&mut c, "small"), 2);
    // Re-adding present elements is a refresh, not growth.
    let r = call(
        &mut c,
        json!({"cmd": "set.add", "set": "small", "elems": ["10.0.0.1", "10.0.0.3"]}),
    );
    assert_eq!(
        (r["added"].clone(), r["refreshed"].clone()),
        (json!(1), json!(1))
    );
    assert_eq!(count(&mut c, "small"), 3);
}

/// kill -9 in the middle of a pipelined stream of bans: every ban whose
/// `ok` reply arrived is there after the restart (unacknowledged ones may
/// or may not be).
#[test]
fn kill9_mid_stream_keeps_every_acknowledged_ban() {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let mut d = Daemon::start(dir.path(), &[]);
    let s = UnixStream::connect(&d.socket).unwrap();
    let mut w = s.try_clone().unwrap();
    const N: u32 = 100_000;
    let writer = std::thread::spawn(move || {
        let mut buf = Vec::new();
        for i in 0..N {
            buf.extend_from_slice(
                format!(
                    "{{\"id\":{i},\"cmd\":\"ban\",\"elems\":[\"{}\"]}}\n",
                    addr(i)
                )
                .as_bytes(),
            );
            if buf.len() > 1 << 14 {
                if w.write_all(&buf).is_err() {
                    return; // the daemon died: expected
                }
                buf.clear();
            }
        }
        let _ = w.write_all(&buf);
    });
    let mut r = BufReader::new(s);
    let mut acked = Vec::new();
    let mut line = String::new();
    while acked.len() < 5_000 {
        line.clear();
        assert!(r.read_line(&mut line).unwrap() > 0);
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["ok"], json!(true), "{line}");
        acked.push(v["id"].as_u64().unwrap() as u32);
    }
    d.kill9();
    // Replies that were already on their way count as acknowledged too.
    loop {
        line.clear();
        match r.read_line(&mut line) {
            Ok(n) if n > 0 => {
                let v: Value = serde_json::from_str(&line).unwrap();
                acked.push(v["id"].as_u64().unwrap() as u32);
            }
            _ => break,
        }
    }
    writer.join().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let mut c = d.client();
    let r = call(&mut c, json!({"cmd": "set.list", "set": "parapet-ban4"}));
    let have: std::collections::HashSet<String> = r["elems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["elem"].as_str().unwrap().to_string())
        .collect();
    let lost: Vec<u32> = acked
        .iter()
        .copied()
        .filter(|i| !have.contains(&addr(*i)))
        .collect();
    assert!(
        lost.is_empty(),
        "{} of {} acknowledged bans lost, e.g. {:?}",
        lost.len(),
        acked.len(),
        &lost[..lost.len().min(5)]
    );
    eprintln!(
        "{} acknowledged before the kill, {} present after restart",
        acked.len(),
        have.len()
    );
}

#[test]
fn apply_reports_tables_left_to_the_kernel() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let mut c = d.client();
    let router = "*nat\n:PREROUTING ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n-A POSTROUTING -o eth0 -j MASQUERADE\nCOMMIT\n*filter\n:INPUT DROP [0:0]\n-A INPUT -i lo -j ACCEPT\nCOMMIT\n";
    let want = json!([{"table": "nat", "family": "ip", "chains": [
        {"chain": "PREROUTING", "rules": 0}, {"chain": "POSTROUTING", "rules": 1}],
        "describe": "nat (PREROUTING 0 rules, POSTROUTING 1 rule)"}]);
    let r = call(
        &mut c,
        json!({"cmd": "apply", "rules": router, "name": "router.v4", "check": true}),
    );
    assert_eq!(
        (r["rules"].clone(), r["left_to_kernel"].clone()),
        (json!(1), want.clone())
    );
    let r = call(
        &mut c,
        json!({"cmd": "apply", "rules": router, "name": "router.v4"}),
    );
    assert_eq!(
        (r["generation"].clone(), r["left_to_kernel"].clone()),
        (json!(1), want)
    );
    // The listing keeps the host's NAT.
    let l = call(&mut c, json!({"cmd": "list"}));
    assert!(l["text"]
        .as_str()
        .unwrap()
        .contains("-A POSTROUTING -o eth0 -j MASQUERADE"));
    let plain = "*filter\n:INPUT DROP [0:0]\nCOMMIT\n";
    let r = call(
        &mut c,
        json!({"cmd": "apply", "rules": plain, "name": "p.v4"}),
    );
    assert_eq!(r["left_to_kernel"], json!([]));
}
