//! The fleet over TLS with client certificates and a user: a real
//! `nats-server` configured with a throwaway CA, a server certificate and
//! `verify: true` (mutual TLS), plus a user and password; certificates
//! made by `openssl` in the test's temporary directory. Nodes given the
//! CA, their certificate and the user file replicate; a node without its
//! client certificate, without the CA, or with a wrong password never
//! connects (and `stats.fleet.last_error` says so).

mod common;
mod fleet_support;
mod tls_support;

use common::call;
use fleet_support::{elems, fleet_stats, node, wait_equal, wait_until, Broker};
use serde_json::json;
use std::path::Path;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(20);

#[test]
fn tls_with_client_certificates_and_a_user() {
    let dir = tempfile::tempdir().unwrap();
    let pki_dir = dir.path().join("pki");
    std::fs::create_dir_all(&pki_dir).unwrap();
    tls_support::pki(&pki_dir);
    tls_support::client_cert(&pki_dir, "client", "/CN=client");
    let p = |f: &str| pki_dir.join(f).to_str().unwrap().to_string();
    let broker = Broker::start_with_config(
        dir.path(),
        &format!(
            "tls {{ cert_file: \"{}\", key_file: \"{}\", ca_file: \"{}\", verify: true, timeout: 2 }}\n\
             authorization {{ users = [ {{ user: fleet, password: \"s3cret-pw\" }} ] }}",
            p("server.pem"),
            p("server.key"),
            p("ca.pem")
        ),
    );
    let user_file = dir.path().join("user");
    std::fs::write(&user_file, "fleet:s3cret-pw\n").unwrap();
    let (ca, cert, key) = (p("ca.pem"), p("client.pem"), p("client.key"));
    // A node's TLS and user flags: the CA, the client certificate, a user file.
    let flags = |with_ca: bool, with_cert: bool, user: &Path| {
        let mut v = vec!["--fleet-tls".to_string()];
        if with_ca {
            v.extend(["--fleet-tls-ca".into(), ca.clone()]);
        }
        if with_cert {
            v.extend(["--fleet-tls-cert".into(), cert.clone()]);
            v.extend(["--fleet-tls-key".into(), key.clone()]);
        }
        v.extend(["--fleet-user-file".into(), user.to_str().unwrap().into()]);
        v
    };
    let start = |name: &str, flags: Vec<String>| {
        let f: Vec<&str> = flags.iter().map(|s| s.as_str()).collect();
        node(dir.path(), &broker, name, &f)
    };
    let a = start("a", flags(true, true, &user_file));
    let b = start("b", flags(true, true, &user_file));
    // Without a client certificate the server refuses the handshake;
    // without the CA the node refuses the server's certificate.
    let no_cert = start("nocert", flags(true, false, &user_file));
    let no_ca = start("noca", flags(false, true, &user_file));
    // With everything but the right password the server refuses the user.
    let bad_user = dir.path().join("bad-user");
    std::fs::write(&bad_user, "fleet:wrong\n").unwrap();
    let wrong_pw = start("wrongpw", flags(true, true, &bad_user));
    call(
        &mut a.client(),
        json!({"cmd": "ban", "elems": ["192.0.2.9"], "timeout": 600}),
    );
    wait_equal(&[&a, &b], "parapet-ban4", &["192.0.2.9".to_string()], LIMIT);
    wait_until("both connected", LIMIT, || {
        fleet_stats(&a)["connected"] == true && fleet_stats(&b)["connected"] == true
    });
    for n in [&no_cert, &no_ca, &wrong_pw] {
        wait_until("the refused node reports why", LIMIT, || {
            fleet_stats(n)["last_error"]
                .as_str()
                .is_some_and(|e| !e.is_empty())
        });
        let s = fleet_stats(n);
        eprintln!("refused node: {s}");
        assert_eq!(s["connected"], false, "{s}");
        assert!(elems(n, "parapet-ban4").is_empty(), "{s}");
    }
}
