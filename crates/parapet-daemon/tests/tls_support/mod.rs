//! A throwaway PKI for TLS tests, made by `openssl` (Debian's package) in
//! the test's temporary directory: a CA (`ca.pem`, `ca.key`), a server
//! certificate for 127.0.0.1 (`server.pem`, `server.key`) and client
//! certificates signed by it (`NAME.pem`, `NAME.key`; PKCS#8, P-256).

#![allow(dead_code)]

use std::path::Path;
use std::process::Command;

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl not found (Debian's openssl package)");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A certificate signed by the CA for subject `subj` (e.g. `/CN=x`) with
/// `ext` (a file of X.509 v3 extensions): `name.pem` and `name.key`.
pub fn cert(dir: &Path, name: &str, subj: &str, ext: &str) {
    let (key, csr, extf, pem) = (
        format!("{name}.key"),
        format!("{name}.csr"),
        format!("{name}.ext"),
        format!("{name}.pem"),
    );
    openssl(
        dir,
        &[
            "genpkey",
            "-algorithm",
            "EC",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-out",
            &key,
        ],
    );
    openssl(
        dir,
        &["req", "-new", "-key", &key, "-subj", subj, "-out", &csr],
    );
    std::fs::write(dir.join(&extf), ext).unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "1",
            "-extfile",
            &extf,
            "-out",
            &pem,
        ],
    );
}

/// A client certificate `name` with subject `subj`.
pub fn client_cert(dir: &Path, name: &str, subj: &str) {
    cert(
        dir,
        name,
        subj,
        "extendedKeyUsage=clientAuth\nbasicConstraints=CA:FALSE\n",
    );
}

/// The CA (`ca.pem`) and the server's certificate for IP 127.0.0.1
/// (`server.pem`, `server.key`).
pub fn pki(dir: &Path) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "1",
            "-subj",
            "/CN=parapet test CA",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ],
    );
    cert(
        dir,
        "server",
        "/CN=server",
        "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n",
    );
}
