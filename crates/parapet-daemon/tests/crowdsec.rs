//! `parapetd --crowdsec`: decisions made with `cscli` in a real CrowdSec
//! Local API (Debian's `crowdsec`, started by the test with a temporary
//! configuration) reach parapet's sets; deletions are honoured; restarts
//! neither lose nor duplicate. The hostile-response test alone serves
//! crafted bytes from a loopback socket (not the real component: the real
//! LAPI does not send garbage on demand).

mod common;
mod crowdsec_support;
mod fleet_support;

use common::{call, remaining, Daemon};
use crowdsec_support::Lapi;
use fleet_support::elems;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn cs_stats(d: &Daemon) -> Value {
    let mut c = d.client();
    call(&mut c, json!({"cmd": "stats"}))["crowdsec"].clone()
}

fn wait_until(what: &str, d: &Daemon, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "timed out: {what}; crowdsec stats {}; log {}",
            cs_stats(d),
            d.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn wait_set(d: &Daemon, set: &str, want: &[&str]) {
    wait_until(
        &format!("{set} == {want:?} (have {:?})", elems(d, set)),
        d,
        || elems(d, set) == want,
    );
}

fn start(dir: &Path, url: &str, key: &Path) -> Daemon {
    start_with(dir, url, key, &[])
}

/// [`start`] with more parapetd flags.
fn start_with(dir: &Path, url: &str, key: &Path, more: &[&str]) -> Daemon {
    let key = key.to_str().unwrap();
    let mut flags = vec![
        "--crowdsec",
        url,
        "--crowdsec-key-file",
        key,
        "--crowdsec-interval",
        "1",
    ];
    flags.extend_from_slice(more);
    Daemon::start(dir, &flags)
}

/// Waits for one more poll to have finished.
fn next_poll(d: &Daemon) {
    let n = cs_stats(d)["polls"].as_u64().unwrap_or(0);
    wait_until("a poll", d, || {
        cs_stats(d)["polls"].as_u64().unwrap_or(0) > n + 1
    });
}

#[test]
fn cscli_decisions_reach_the_sets_and_survive_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let lapi = Lapi::start(dir.path(), None);
    let key = lapi.bouncer_key("parapet");
    let mut d = start(dir.path(), &lapi.url(), &key);
    // A hand-made ban CrowdSec must never remove.
    let mut c = d.client();
    assert!(call(
        &mut c,
        json!({"cmd": "ban", "elems": ["203.0.113.5"], "timeout": 0})
    )
    .ok());
    lapi.cscli(&["decisions", "add", "--ip", "192.0.2.7", "--duration", "1h"]);
    lapi.cscli(&[
        "decisions",
        "add",
        "--ip",
        "2001:db8::7",
        "--duration",
        "2h",
    ]);
    lapi.cscli(&[
        "decisions",
        "add",
        "--range",
        "198.51.100.0/24",
        "--duration",
        "30m",
    ]);
    lapi.cscli(&[
        "decisions",
        "add",
        "--range",
        "2001:db8:1::/48",
        "--duration",
        "30m",
    ]);
    lapi.cscli(&["decisions", "add", "--ip", "192.0.2.8", "--type", "captcha"]);
    wait_set(&d, "parapet-ban4", &["192.0.2.7", "203.0.113.5"]);
    wait_set(&d, "parapet-ban6", &["2001:db8::7"]);
    wait_set(&d, "parapet-crowdsec-net4", &["198.51.100.0/24"]);
    wait_set(&d, "parapet-crowdsec-net6", &["2001:db8:1::/48"]);
    let t = remaining(&d, "parapet-ban4", "192.0.2.7").unwrap();
    assert!(
        (3500..=3600).contains(&t),
        "timeout {t} is not the decision's hour"
    );
    let t = remaining(&d, "parapet-ban6", "2001:db8::7").unwrap();
    assert!(
        (7100..=7200).contains(&t),
        "timeout {t} is not the decision's 2 h"
    );
    // Added last: it may come in the poll after the sets are complete.
    wait_until("the captcha is ignored", &d, || {
        cs_stats(&d)["ignored"].as_u64().unwrap_or(0) >= 1
    });

    lapi.cscli(&["decisions", "delete", "--ip", "192.0.2.7"]);
    wait_set(&d, "parapet-ban4", &["203.0.113.5"]);
    let added_before = cs_stats(&d)["added"].as_u64().unwrap();
    assert_eq!(added_before, 4, "{}", cs_stats(&d));

    // Clean restart: the startup list equals what is owned, nothing moves.
    assert!(d.term().success());
    let d2 = start(dir.path(), &lapi.url(), &key);
    next_poll(&d2);
    let s = cs_stats(&d2);
    assert_eq!(
        (s["added"].as_u64(), s["deleted"].as_u64()),
        (Some(0), Some(0)),
        "{s}"
    );
    assert_eq!(s["errors"], 0, "{s}");
    wait_set(&d2, "parapet-ban6", &["2001:db8::7"]);
    drop(d2);

    // Changes while parapetd is down (killed): the startup list is diffed
    // against what CrowdSec put in; the hand-made ban stays.
    d = start(dir.path(), &lapi.url(), &key);
    next_poll(&d);
    d.kill9();
    lapi.cscli(&["decisions", "delete", "--range", "198.51.100.0/24"]);
    lapi.cscli(&["decisions", "add", "--ip", "192.0.2.9", "--duration", "1h"]);
    let d3 = start(dir.path(), &lapi.url(), &key);
    wait_set(&d3, "parapet-ban4", &["192.0.2.9", "203.0.113.5"]);
    wait_set(&d3, "parapet-crowdsec-net4", &[]);
    wait_set(&d3, "parapet-crowdsec-net6", &["2001:db8:1::/48"]);
    next_poll(&d3);
    let s = cs_stats(&d3);
    assert_eq!(
        (s["added"].as_u64(), s["deleted"].as_u64()),
        (Some(1), Some(1)),
        "{s}"
    );
    assert_eq!(s["decisions"], 3, "{s}");
}

/// A loopback LAPI stand-in (crafted bytes: not the real LAPI). Each
/// connection's request is read to its blank line, its path recorded and
/// answered with `answer(path)`; it ends after `limit` requests or when
/// `stop` is set, and its thread returns how many it answered.
struct StandIn {
    port: u16,
    paths: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<usize>,
}

fn stand_in(limit: usize, mut answer: impl FnMut(&str) -> Vec<u8> + Send + 'static) -> StandIn {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.set_nonblocking(true).unwrap();
    let port = l.local_addr().unwrap().port();
    let paths = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let (p, st) = (paths.clone(), stop.clone());
    let thread = std::thread::spawn(move || {
        let mut served = 0;
        while !st.load(Ordering::SeqCst) && served < limit {
            let Ok((mut s, _)) = l.accept() else {
                std::thread::sleep(Duration::from_millis(10));
                continue;
            };
            s.set_nonblocking(false).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut req = Vec::new();
            let mut buf = [0u8; 4096];
            while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => req.extend_from_slice(&buf[..n]),
                }
            }
            let line = String::from_utf8_lossy(&req);
            let path = line.split(' ').nth(1).unwrap_or("").to_string();
            let body = answer(&path);
            p.lock().unwrap().push(path);
            let _ = s.write_all(&body);
            served += 1;
        }
        served
    });
    StandIn {
        port,
        paths,
        stop,
        thread,
    }
}

/// A stand-in answering each connection with the next canned response;
/// returns the port and its thread (how many it answered).
fn serve(responses: Vec<Vec<u8>>) -> (u16, std::thread::JoinHandle<usize>) {
    let limit = responses.len();
    let mut next = responses.into_iter();
    let s = stand_in(limit, move |_| next.next().unwrap_or_default());
    (s.port, s.thread)
}

fn http(body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

#[test]
fn hostile_responses_are_rejected_counted_and_survived() {
    // The shape the real LAPI sent for `cscli decisions add --ip`.
    let good = r#"{"deleted":null,"new":[{"duration":"59m58.153201938s","id":1,"origin":"cscli","scenario":"manual 'ban' from 'test'","scope":"Ip","type":"ban","value":"192.0.2.1"}]}"#;
    let six: Vec<String> = (0..6)
        .map(|i| {
            format!(
                r#"{{"duration":"1h","id":{i},"scope":"Ip","type":"ban","value":"192.0.2.{}"}}"#,
                10 + i
            )
        })
        .collect();
    let hostile: Vec<Vec<u8>> = vec![
        http("{\"new\": [{\"id\": \"x\"}"), // malformed JSON
        http(&format!(r#"{{"new":[{}]}}"#, six.join(","))), // over the decision cap
        format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", 3 << 20).into_bytes(), // over the size cap
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n".to_vec(),        // bad chunk
        b"SSH-2.0-OpenSSH\r\n\r\n".to_vec(),                                            // not HTTP
        b"HTTP/1.1 403 Forbidden\r\nContent-Length: 30\r\n\r\n{\"message\":\"access forbidden\"}"
            .to_vec(),
        // A full list is the truth (it keeps 192.0.2.1); its two bad
        // decisions are skipped and counted.
        http(
            r#"{"new":[{"duration":"1h","id":1,"scope":"Ip","type":"ban","value":"192.0.2.1"},{"duration":"1x","id":9,"scope":"Ip","type":"ban","value":"192.0.2.99"},{"duration":"1h","id":10,"scope":"Ip","type":"ban","value":"not-an-ip"}]}"#,
        ),
        b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"new\":".to_vec(), // cut short
    ];
    let n_hostile = hostile.len() as u64;
    let mut responses = vec![http(good)];
    responses.extend(hostile);
    let (port, server) = serve(responses);
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("key");
    std::fs::write(&key, "0123456789abcdef\n").unwrap();
    let url = format!("http://127.0.0.1:{port}");
    let d = start_with(
        dir.path(),
        &url,
        &key,
        &[
            "--crowdsec-max-decisions",
            "5",
            "--crowdsec-max-mib",
            "1",
            "--crowdsec-timeout",
            "2",
        ],
    );
    wait_set(&d, "parapet-ban4", &["192.0.2.1"]);
    wait_until("every hostile response answered", &d, || {
        server.is_finished()
    });
    assert_eq!(server.join().unwrap(), n_hostile as usize + 1);
    // one more poll to an absent server: an error too
    wait_until("errors counted", &d, || {
        cs_stats(&d)["errors"].as_u64().unwrap_or(0) >= n_hostile
    });
    let s = cs_stats(&d);
    assert_eq!(s["bad_decisions"], 2, "{s}");
    assert_eq!(s["connected"], false, "{s}");
    // still serving, still enforcing what it had
    let mut c = d.client();
    assert!(call(&mut c, json!({"cmd": "ping"})).ok());
    assert_eq!(elems(&d, "parapet-ban4"), ["192.0.2.1"]);
}

/// A stand-in that answers by the request's `startup` parameter: full
/// lists from `full(n)` (n: full polls before this one), deltas from
/// `delta(n)`; returns the port, the request paths in order and a stop
/// flag (bounded: it stops after 600 requests).
fn serve_by_path(
    full: fn(usize) -> String,
    delta: fn(usize) -> String,
) -> (u16, Arc<Mutex<Vec<String>>>, Arc<AtomicBool>) {
    let (mut fulls, mut deltas) = (0, 0);
    let s = stand_in(600, move |path| {
        let body = if path.ends_with("startup=true") {
            fulls += 1;
            full(fulls - 1)
        } else {
            deltas += 1;
            delta(deltas - 1)
        };
        http(&body)
    });
    (s.port, s.paths, s.stop)
}

/// `n` ban decisions of 10.1.0.0/16 (ids 1..=n), plus `extra` as id 100000.
fn decisions(n: usize, extra: Option<&str>) -> String {
    let mut v: Vec<String> = (0..n)
        .map(|i| {
            format!(
                r#"{{"duration":"1h","id":{},"scope":"Ip","type":"ban","value":"10.1.{}.{}"}}"#,
                i + 1,
                i >> 8,
                i & 255
            )
        })
        .collect();
    if let Some(a) = extra {
        v.push(format!(
            r#"{{"duration":"1h","id":100000,"scope":"Ip","type":"ban","value":"{a}"}}"#
        ));
    }
    format!(r#"{{"new":[{}],"deleted":null}}"#, v.join(","))
}

#[test]
fn a_bulk_insert_is_completed_by_a_full_poll_when_its_deltas_end() {
    // The LAPI's deltas during an import miss some decisions (§8, §67):
    // here the burst's delta lacks 10.2.0.1, which the full list has.
    // Full polls by interval are off (`--crowdsec-resync 0`): only the
    // end of the burst can bring it, promptly.
    let (port, paths, stop) = serve_by_path(
        |n| match n {
            0 => decisions(0, None),
            _ => decisions(150, Some("10.2.0.1")),
        },
        |n| match n {
            0 => decisions(150, None),
            _ => decisions(0, None),
        },
    );
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("key");
    std::fs::write(&key, "0123456789abcdef\n").unwrap();
    let url = format!("http://127.0.0.1:{port}");
    let d = start_with(dir.path(), &url, &key, &["--crowdsec-resync", "0"]);
    let t0 = Instant::now();
    wait_until("the missed decision enforced", &d, || {
        elems(&d, "parapet-ban4").len() == 151
    });
    let took = t0.elapsed();
    assert!(elems(&d, "parapet-ban4").contains(&"10.2.0.1".to_string()));
    let s = cs_stats(&d);
    assert_eq!(s["settles"], 1, "{s}");
    // full, the burst's delta, the empty one that ended it, then full
    let seen = paths.lock().unwrap().clone();
    let kinds: Vec<bool> = seen.iter().map(|p| p.ends_with("startup=true")).collect();
    assert_eq!(kinds[..4], [true, false, false, true], "{seen:?}");
    // and quiet deltas after it call for no more full polls
    next_poll(&d);
    next_poll(&d);
    assert_eq!(cs_stats(&d)["settles"], 1);
    let fulls = paths
        .lock()
        .unwrap()
        .iter()
        .filter(|p| p.ends_with("startup=true"))
        .count();
    assert_eq!(fulls, 2, "{:?}", paths.lock().unwrap());
    stop.store(true, Ordering::SeqCst);
    // three polls 1 s apart, not a resync interval
    assert!(took < Duration::from_secs(10), "{took:?}");
}

#[test]
fn bad_flags_are_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("key");
    std::fs::write(&key, "").unwrap();
    for (url, why) in [
        ("ftp://127.0.0.1:1", "not supported"),
        ("http://127.0.0.1:1", "API key"),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_parapetd"))
            .args(["--socket", dir.path().join("s").to_str().unwrap()])
            .args(["--state-dir", dir.path().join("st").to_str().unwrap()])
            .args([
                "--crowdsec",
                url,
                "--crowdsec-key-file",
                key.to_str().unwrap(),
            ])
            .output()
            .unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(why), "{url}: {err}");
    }
}
