//! `parapetd --crowdsec https://…`: the real CrowdSec Local API (Debian's
//! `crowdsec`) serving HTTPS on 127.0.0.1 with a certificate of a CA the
//! test makes (`openssl`), its `api.server.tls` verifying client
//! certificates when one is given. parapetd trusting that CA gets the
//! decisions with an API key, and with a client certificate of the
//! bouncers' OU instead of a key; without the CA (the system's roots), or
//! with a certificate of another OU and no key, it gets nothing and says
//! why. Bad TLS flags are refused at start.

mod common;
mod crowdsec_support;
mod fleet_support;
mod tls_support;

use common::{call, Daemon};
use crowdsec_support::Lapi;
use fleet_support::elems;
use serde_json::{json, Value};
use std::path::Path;
use std::time::{Duration, Instant};

fn cs_stats(d: &Daemon) -> Value {
    let mut c = d.client();
    call(&mut c, json!({"cmd": "stats"}))["crowdsec"].clone()
}

fn wait_until(what: &str, d: &Daemon, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "timed out: {what}; crowdsec stats {}; log {}",
            cs_stats(d),
            d.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn start(dir: &Path, lapi: &Lapi, flags: &[&str]) -> Daemon {
    std::fs::create_dir_all(dir).unwrap();
    let url = lapi.url();
    let mut args = vec!["--crowdsec", &url, "--crowdsec-interval", "1"];
    args.extend_from_slice(flags);
    Daemon::start(dir, &args)
}

/// Waits until `d` has polled (or failed) at least `n` times.
fn polls(d: &Daemon, n: u64) {
    wait_until(&format!("{n} polls"), d, || {
        cs_stats(d)["polls"].as_u64().unwrap_or(0) >= n
    });
}

#[test]
fn https_lapi_with_a_test_ca_by_key_and_by_client_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let pki = dir.path().join("pki");
    std::fs::create_dir_all(&pki).unwrap();
    tls_support::pki(&pki);
    tls_support::client_cert(&pki, "bouncer", "/OU=bouncer-ou/CN=parapet-cert");
    tls_support::client_cert(&pki, "stranger", "/OU=other-ou/CN=stranger");
    let f = |n: &str| pki.join(n).to_str().unwrap().to_string();
    let lapi = Lapi::start_with(dir.path(), None, Some(&pki));
    assert!(lapi.url().starts_with("https://"));
    let key = lapi.bouncer_key("parapet");
    let key = key.to_str().unwrap();
    let ca = f("ca.pem");
    let by_key = start(
        &dir.path().join("by-key"),
        &lapi,
        &["--crowdsec-key-file", key, "--crowdsec-tls-ca", &ca],
    );
    let (cert, ckey) = (f("bouncer.pem"), f("bouncer.key"));
    let by_cert = start(
        &dir.path().join("by-cert"),
        &lapi,
        &[
            "--crowdsec-tls-ca",
            &ca,
            "--crowdsec-tls-cert",
            &cert,
            "--crowdsec-tls-key",
            &ckey,
        ],
    );
    // The system's roots do not know the test CA: the handshake fails.
    let no_ca = start(
        &dir.path().join("no-ca"),
        &lapi,
        &["--crowdsec-key-file", key],
    );
    let (scert, skey) = (f("stranger.pem"), f("stranger.key"));
    let wrong_ou = start(
        &dir.path().join("wrong-ou"),
        &lapi,
        &[
            "--crowdsec-tls-ca",
            &ca,
            "--crowdsec-tls-cert",
            &scert,
            "--crowdsec-tls-key",
            &skey,
        ],
    );
    lapi.cscli(&["decisions", "add", "--ip", "192.0.2.7", "--duration", "1h"]);
    for d in [&by_key, &by_cert] {
        wait_until("the decision over TLS", d, || {
            elems(d, "parapet-ban4") == ["192.0.2.7"]
        });
        assert_eq!(cs_stats(d)["connected"], true, "{}", cs_stats(d));
    }
    lapi.cscli(&["decisions", "delete", "--ip", "192.0.2.7"]);
    for d in [&by_key, &by_cert] {
        wait_until("the deletion over TLS", d, || {
            elems(d, "parapet-ban4").is_empty()
        });
    }
    // The refused ones had several polls meanwhile; none got anything.
    for (d, why) in [(&no_ca, "certificate"), (&wrong_ou, "40")] {
        polls(d, 2);
        let s = cs_stats(d);
        assert_eq!(s["connected"], false, "{s}");
        assert_eq!(s["added"], 0, "{s}");
        let err = s["last_error"].as_str().unwrap_or("").to_string();
        assert!(err.contains(why), "last_error `{err}` lacks `{why}`");
        let mut c = d.client();
        assert!(call(&mut c, json!({"cmd": "ping"})).ok());
    }
}

#[test]
fn bad_tls_flags_are_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("key");
    std::fs::write(&key, "k").unwrap();
    let not_pem = dir.path().join("not.pem");
    std::fs::write(&not_pem, "hello\n").unwrap();
    let (k, np) = (key.to_str().unwrap(), not_pem.to_str().unwrap());
    let cases: [(&[&str], &str); 4] = [
        (
            &[
                "--crowdsec",
                "http://127.0.0.1:1",
                "--crowdsec-key-file",
                k,
                "--crowdsec-tls-ca",
                np,
            ],
            "https://",
        ),
        (
            &[
                "--crowdsec",
                "https://127.0.0.1:1",
                "--crowdsec-key-file",
                k,
                "--crowdsec-tls-ca",
                np,
            ],
            "no PEM certificate",
        ),
        (
            &[
                "--crowdsec",
                "https://127.0.0.1:1",
                "--crowdsec-key-file",
                k,
                "--crowdsec-tls-ca",
                "/nonexistent/ca.pem",
            ],
            "/nonexistent/ca.pem",
        ),
        (
            &["--crowdsec", "https://127.0.0.1:1"],
            "--crowdsec-key-file",
        ),
    ];
    for (args, why) in cases {
        // Bounded: a parapetd that wrongly accepts the flags runs on.
        let err_file = dir.path().join("stderr");
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_parapetd"))
            .args(["--socket", dir.path().join("s").to_str().unwrap()])
            .args(["--state-dir", dir.path().join("st").to_str().unwrap()])
            .args(args)
            .stderr(std::fs::File::create(&err_file).unwrap())
            .spawn()
            .unwrap();
        let t0 = Instant::now();
        let status = loop {
            if let Some(st) = child.try_wait().unwrap() {
                break Some(st);
            }
            if t0.elapsed() > Duration::from_secs(30) {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let err = std::fs::read_to_string(&err_file).unwrap_or_default();
        assert!(
            status.is_some_and(|s| !s.success()),
            "{args:?} accepted: {err}"
        );
        assert!(err.contains(why), "{args:?}: {err}");
    }
}
