//! The fleet with NATS credentials files (`--fleet-creds`: a user JWT and
//! its nkey seed) against a real `nats-server` in operator mode. Debian
//! does not package `nsc`, so the test mints the chain itself: an
//! operator, an account (JetStream allowed) and users, each a JWT whose
//! claims are signed by the key above it (`nkeys`, ed25519); the server
//! trusts the operator and resolves the account from memory. Nodes with a
//! valid user replicate; a node whose seed is not its JWT's key, and one
//! whose user an unknown account signed, never connect and say why in
//! `stats.fleet.last_error`.

mod common;
mod fleet_support;

use base64::Engine;
use common::call;
use fleet_support::{elems, fleet_stats, node, wait_equal, wait_until, Broker};
use nkeys::KeyPair;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const LIMIT: Duration = Duration::from_secs(20);

/// A NATS JWT (v2): `nats` claims of `subject`, issued and signed by
/// `issuer`.
fn jwt(issuer: &KeyPair, subject: &str, name: &str, nats: Value) -> String {
    let b64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
    let iat = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let header = b64(br#"{"typ":"JWT","alg":"ed25519-nkey"}"#);
    let claims = json!({
        // Unique per token; the server does not recompute it.
        "jti": format!("{}{iat}", &subject[..20]),
        "iat": iat,
        "iss": issuer.public_key(),
        "name": name,
        "sub": subject,
        "nats": nats,
    });
    let claims = b64(claims.to_string().as_bytes());
    let signed = format!("{header}.{claims}");
    let sig = issuer.sign(signed.as_bytes()).unwrap();
    format!("{signed}.{}", b64(&sig))
}

/// An account's claims: unlimited, JetStream allowed when `js` (the
/// server refuses it in the system account).
fn account_claims(js: bool) -> Value {
    let js = if js { -1 } else { 0 };
    json!({
        "limits": {
            "subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1,
            "wildcards": true, "conn": -1, "leaf": -1,
            "mem_storage": js, "disk_storage": js, "streams": js, "consumer": js
        },
        "default_permissions": {"pub": {}, "sub": {}},
        "type": "account",
        "version": 2
    })
}

fn user_claims() -> Value {
    json!({"pub": {}, "sub": {}, "subs": -1, "data": -1, "payload": -1,
           "type": "user", "version": 2})
}

/// A `.creds` file: the user JWT and an nkey seed (the layout `nsc`
/// writes and the client reads).
fn creds(dir: &Path, name: &str, user_jwt: &str, seed: &str) -> PathBuf {
    let p = dir.join(format!("{name}.creds"));
    std::fs::write(
        &p,
        format!(
            "-----BEGIN NATS USER JWT-----\n{user_jwt}\n------END NATS USER JWT------\n\n\
             ************************* IMPORTANT *************************\n\
             NKEY Seed printed below can be used to sign and prove identity.\n\n\
             -----BEGIN USER NKEY SEED-----\n{seed}\n------END USER NKEY SEED------\n"
        ),
    )
    .unwrap();
    p
}

#[test]
fn credentials_files_in_operator_mode() {
    let dir = tempfile::tempdir().unwrap();
    let operator = KeyPair::new_operator();
    let account = KeyPair::new_account();
    let op_jwt = jwt(
        &operator,
        &operator.public_key(),
        "parapet-test-operator",
        json!({"type": "operator", "version": 2}),
    );
    let acc_jwt = jwt(
        &operator,
        &account.public_key(),
        "fleet",
        account_claims(true),
    );
    // JetStream in operator mode needs a system account.
    let system = KeyPair::new_account();
    let sys_jwt = jwt(
        &operator,
        &system.public_key(),
        "SYS",
        account_claims(false),
    );
    let extra = format!(
        "operator: \"{op_jwt}\"\nsystem_account: {sys}\nresolver: MEMORY\n\
             resolver_preload: {{ {sys}: \"{sys_jwt}\", {acc}: \"{acc_jwt}\" }}",
        sys = system.public_key(),
        acc = account.public_key()
    );
    let broker = Broker::start_with_config(dir.path(), &extra);
    // A user of the account, with its own seed.
    let user = KeyPair::new_user();
    let user_jwt = jwt(&account, &user.public_key(), "node", user_claims());
    let good = creds(dir.path(), "good", &user_jwt, &user.seed().unwrap());
    // The same JWT with another user's seed: the server's nonce is signed
    // with a key that is not the JWT's.
    let wrong_seed = creds(
        dir.path(),
        "wrong-seed",
        &user_jwt,
        &KeyPair::new_user().seed().unwrap(),
    );
    // A user signed by an account the server does not know.
    let (rogue_acc, rogue) = (KeyPair::new_account(), KeyPair::new_user());
    let rogue_jwt = jwt(&rogue_acc, &rogue.public_key(), "rogue", user_claims());
    let rogue_creds = creds(dir.path(), "rogue", &rogue_jwt, &rogue.seed().unwrap());

    let start = |name: &str, creds: &Path| {
        node(
            dir.path(),
            &broker,
            name,
            &["--fleet-creds", creds.to_str().unwrap()],
        )
    };
    let a = start("a", &good);
    let b = start("b", &good);
    let wrong = start("wrongseed", &wrong_seed);
    let stranger = start("rogue", &rogue_creds);
    call(
        &mut a.client(),
        json!({"cmd": "ban", "elems": ["192.0.2.77"], "timeout": 600}),
    );
    wait_equal(
        &[&a, &b],
        "parapet-ban4",
        &["192.0.2.77".to_string()],
        LIMIT,
    );
    wait_until("both connected", LIMIT, || {
        fleet_stats(&a)["connected"] == true && fleet_stats(&b)["connected"] == true
    });
    for n in [&wrong, &stranger] {
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
    assert!(
        broker.log().contains("Authorization Violation")
            || broker.log().contains("authentication error"),
        "{}",
        broker.log()
    );
}
