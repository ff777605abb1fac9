//! A real CrowdSec Local API for the tests: Debian's `crowdsec` binary
//! with a temporary configuration (API server only on 127.0.0.1:PORT, no
//! Central API, SQLite in the temporary directory), driven with `cscli`.
//! Optionally inside a network namespace the test created.

#![allow(dead_code)]

use parapet_testbed::Netns;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Lapi {
    child: Option<Child>,
    pub dir: PathBuf,
    pub port: u16,
    ns: Option<String>,
    tls: bool,
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

impl Lapi {
    /// Starts the Local API in `dir` (in namespace `ns` when given).
    pub fn start(dir: &Path, ns: Option<&Netns>) -> Lapi {
        Lapi::start_with(dir, ns, None)
    }

    /// The same over HTTPS: `pki` holds `server.pem`/`server.key` (a
    /// certificate for 127.0.0.1) and the CA `ca.pem`, which also
    /// verifies client certificates when one is given (bouncers by the
    /// OU `bouncer-ou`); `cscli`, the LAPI's own client here, does not
    /// verify the server.
    pub fn start_with(dir: &Path, ns: Option<&Netns>, pki: Option<&Path>) -> Lapi {
        for b in ["crowdsec", "cscli"] {
            assert!(
                Command::new("sh")
                    .args(["-c", &format!("command -v {b}")])
                    .output()
                    .unwrap()
                    .status
                    .success(),
                "`{b}` not found: install Debian's crowdsec package (scripts/deps.sh)"
            );
        }
        let dir = dir.join("crowdsec");
        std::fs::create_dir_all(dir.join("data")).unwrap();
        let port = free_port();
        let d = dir.display();
        let cfg = format!(
            "common:\n  daemonize: false\n  log_media: stdout\n  log_level: warning\n  working_dir: {d}\n\
config_paths:\n  config_dir: {d}/\n  data_dir: {d}/data/\n  hub_dir: {d}/hub/\n  index_path: {d}/hub/.index.json\n\
db_config:\n  type: sqlite\n  db_path: {d}/data/crowdsec.db\n  use_wal: true\n  flush:\n    max_items: 10000000\n    max_age: 7d\n\
api:\n  client:\n    credentials_path: {d}/local_api_credentials.yaml\n  server:\n    log_level: warning\n    listen_uri: 127.0.0.1:{port}\n    profiles_path: /etc/crowdsec/profiles.yaml\n    trusted_ips:\n      - 127.0.0.1\n\
prometheus:\n  enabled: false\n"
        );
        let cfg = match pki {
            None => cfg,
            Some(p) => {
                let p = p.display();
                cfg.replace(
                    "    trusted_ips:",
                    &format!(
                        "    tls:\n      cert_file: {p}/server.pem\n      key_file: {p}/server.key\n      ca_cert_path: {p}/ca.pem\n      client_verification: VerifyClientCertIfGiven\n      bouncers_allowed_ou:\n        - bouncer-ou\n      agents_allowed_ou:\n        - agent-ou\n    trusted_ips:"
                    ),
                )
                .replace(
                    "  client:\n",
                    "  client:\n    insecure_skip_verify: true\n",
                )
            }
        };
        std::fs::write(dir.join("config.yaml"), cfg).unwrap();
        std::fs::write(dir.join("local_api_credentials.yaml"), "").unwrap();
        let mut l = Lapi {
            child: None,
            dir: dir.clone(),
            port,
            ns: ns.map(|n| n.name().to_string()),
            tls: pki.is_some(),
        };
        l.cscli(&[
            "machines",
            "add",
            "parapet-test",
            "--password",
            "parapet-test-password-0123456789",
            "-f",
            &format!("{d}/local_api_credentials.yaml"),
            "--url",
            &l.url(),
        ]);
        let log = std::fs::File::create(dir.join("crowdsec.log")).unwrap();
        let child = l
            .command("crowdsec")
            .args(["-c", &format!("{d}/config.yaml"), "-no-cs", "-no-capi"])
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("spawn crowdsec");
        l.child = Some(child);
        let t0 = Instant::now();
        let addr = format!("127.0.0.1:{port}");
        loop {
            let up = match ns {
                Some(n) => n.run_in(|| TcpStream::connect(&addr).is_ok()),
                None => TcpStream::connect(&addr).is_ok(),
            };
            if up {
                break;
            }
            if let Some(st) = l.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("crowdsec exited with {st}: {}", l.log());
            }
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "LAPI not up: {}",
                l.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        l
    }

    pub fn url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("crowdsec.log")).unwrap_or_default()
    }

    fn command(&self, prog: &str) -> Command {
        match &self.ns {
            Some(n) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", n, prog]);
                c
            }
            None => Command::new(prog),
        }
    }

    /// Runs `cscli -c CONFIG ARGS…`; its standard output. Panics on failure.
    pub fn cscli(&self, args: &[&str]) -> String {
        let cfg = self.dir.join("config.yaml");
        let out = self
            .command("cscli")
            .arg("-c")
            .arg(&cfg)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run cscli");
        assert!(
            out.status.success(),
            "cscli {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// A new bouncer's API key, written to `DIR/NAME.key`; the file's path.
    pub fn bouncer_key(&self, name: &str) -> PathBuf {
        let key = self.cscli(&["-oraw", "bouncers", "add", name]);
        let p = self.dir.join(format!("{name}.key"));
        std::fs::write(&p, key.trim()).unwrap();
        p
    }
}

impl Drop for Lapi {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
