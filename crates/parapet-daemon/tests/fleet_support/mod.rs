//! The fleet tests' fixtures: a real `nats-server` with JetStream on
//! 127.0.0.1 (random free port, storage in a temporary directory), and
//! parapetd nodes joined to it. Everything is stopped on drop.

#![allow(dead_code)]

use crate::common::{call, Daemon};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A nats-server child process.
pub struct Broker {
    child: Option<Child>,
    pub port: u16,
    pub store: PathBuf,
    log: PathBuf,
    /// A configuration file (TLS, users) instead of the plain flags.
    conf: Option<PathBuf>,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Broker {
    /// Starts `nats-server -js` with storage under `dir`. Panics (the test
    /// fails) when nats-server is not installed: `make test` installs it.
    pub fn start(dir: &Path) -> Broker {
        let mut b = Broker {
            child: None,
            port: free_port(),
            store: dir.join("nats-store"),
            log: dir.join("nats.log"),
            conf: None,
        };
        b.restart();
        b
    }

    /// Starts it with a configuration file: listen on 127.0.0.1 (free
    /// port), JetStream under `dir`, plus `extra` (a `tls { }` block,
    /// `authorization { }`, ...).
    pub fn start_with_config(dir: &Path, extra: &str) -> Broker {
        let port = free_port();
        let store = dir.join("nats-store");
        let conf = dir.join("nats.conf");
        std::fs::write(
            &conf,
            format!(
                "listen: \"127.0.0.1:{port}\"\njetstream {{ store_dir: \"{}\" }}\n{extra}\n",
                store.display()
            ),
        )
        .unwrap();
        let mut b = Broker {
            child: None,
            port,
            store,
            log: dir.join("nats.log"),
            conf: Some(conf),
        };
        b.restart();
        b
    }

    /// Starts it again on the same port and storage.
    pub fn restart(&mut self) {
        assert!(self.child.is_none());
        let mut cmd = Command::new("nats-server");
        match &self.conf {
            Some(c) => cmd.arg("-c").arg(c),
            None => cmd
                .args([
                    "-js",
                    "-a",
                    "127.0.0.1",
                    "-p",
                    &self.port.to_string(),
                    "-sd",
                ])
                .arg(&self.store),
        };
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&self.log).unwrap())
            .spawn()
            .expect("nats-server not found: install Debian's nats-server (make deps)");
        self.child = Some(child);
        let t0 = Instant::now();
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(t0.elapsed() < Duration::from_secs(20), "nats-server not up");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops it (SIGKILL: an outage, not a goodbye).
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// nats-server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Publishes raw bytes on `subject` with the core NATS protocol (a
    /// peer that bypasses parapetd: the hostile publisher).
    pub fn publish_raw(&self, subject: &str, payload: &[u8]) {
        let mut m = format!("PUB {subject} {}\r\n", payload.len()).into_bytes();
        m.extend_from_slice(payload);
        m.extend_from_slice(b"\r\nPING\r\n");
        self.raw(&m, |text| text.contains("PONG").then(String::new));
    }

    /// A core NATS request (`PUB` with a reply inbox); the reply's
    /// payload. For the JetStream API, e.g. purging a stream.
    pub fn request_raw(&self, subject: &str, payload: &[u8]) -> String {
        let mut m = format!(
            "SUB _INBOX.test 1\r\nPUB {subject} _INBOX.test {}\r\n",
            payload.len()
        )
        .into_bytes();
        m.extend_from_slice(payload);
        m.extend_from_slice(b"\r\n");
        self.raw(&m, |text| {
            let i = text.find("MSG _INBOX.test")?;
            let j = text[i..].find("\r\n")?;
            let body = &text[i + j + 2..];
            body.find("\r\n").map(|k| body[..k].to_string())
        })
    }

    /// Connects, sends `commands` after `CONNECT`, and reads (bounded)
    /// until `done` finds its answer in what came back.
    fn raw(&self, commands: &[u8], done: impl Fn(&str) -> Option<String>) -> String {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut info = [0u8; 4096];
        let _ = s.read(&mut info).unwrap();
        let mut m = b"CONNECT {\"verbose\":false,\"pedantic\":false}\r\n".to_vec();
        m.extend_from_slice(commands);
        s.write_all(&m).unwrap();
        let mut r = Vec::new();
        let t0 = Instant::now();
        loop {
            let text = String::from_utf8_lossy(&r).to_string();
            if let Some(answer) = done(&text) {
                return answer;
            }
            assert!(t0.elapsed() < Duration::from_secs(5), "no answer: {text}");
            let mut b = [0u8; 4096];
            let n = s.read(&mut b).unwrap();
            assert!(n > 0, "broker closed: {text}");
            r.extend_from_slice(&b[..n]);
        }
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A parapetd node of the fleet, in `dir/NAME`.
pub fn node(dir: &Path, broker: &Broker, name: &str, extra: &[&str]) -> Daemon {
    let d = dir.join(name);
    std::fs::create_dir_all(&d).unwrap();
    let url = broker.url();
    // With fsync: the kill -9 test counts on acknowledged meaning durable.
    let mut args = vec!["--fleet", &url, "--fleet-node", name];
    args.extend_from_slice(extra);
    Daemon::start(&d, &args)
}

/// Sorted element texts of `set` on a node (empty when it does not exist).
pub fn elems(d: &Daemon, set: &str) -> Vec<String> {
    let mut c = d.client();
    let r = match c.call(json!({"cmd": "set.list", "set": set})) {
        Ok(r) if r.ok() => r,
        _ => return Vec::new(),
    };
    let mut v: Vec<String> = r["elems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| match e {
            Value::String(s) => s.clone(),
            o => o["elem"].as_str().unwrap_or_default().to_string(),
        })
        .collect();
    v.sort();
    v
}

/// `stats.fleet` of a node.
pub fn fleet_stats(d: &Daemon) -> Value {
    let mut c = d.client();
    let r = call(&mut c, json!({"cmd": "stats"}));
    r["fleet"].clone()
}

/// Waits (bounded) until `f` holds; returns how long it took.
pub fn wait_until(what: &str, limit: Duration, mut f: impl FnMut() -> bool) -> Duration {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < limit, "timed out after {limit:?}: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
    t0.elapsed()
}

/// Waits until every node's `set` equals `want`.
pub fn wait_equal(nodes: &[&Daemon], set: &str, want: &[String], limit: Duration) -> Duration {
    let t0 = Instant::now();
    while !nodes.iter().all(|n| elems(n, set) == want) {
        if t0.elapsed() > limit {
            let have: Vec<Vec<String>> = nodes.iter().map(|n| elems(n, set)).collect();
            let stats: Vec<Value> = nodes.iter().map(|n| fleet_stats(n)).collect();
            let show =
                |v: &[String]| format!("{} elements, first {:?}", v.len(), &v[..v.len().min(5)]);
            let have: Vec<String> = have.iter().map(|v| show(v)).collect();
            panic!(
                "{set} not equal on every node within {limit:?}: want {}, have {have:?}; fleet stats {stats:?}",
                show(want)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    t0.elapsed()
}

/// A TCP relay between one node and the broker that can cut the link (a
/// partition of that node alone) and heal it.
pub struct Relay {
    pub port: u16,
    cut: std::sync::Arc<std::sync::atomic::AtomicBool>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    accept: Option<std::thread::JoinHandle<()>>,
}

impl Relay {
    pub fn start(to: u16) -> Relay {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        let port = l.local_addr().unwrap().port();
        let (cut, stop) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicBool::new(false)),
        );
        let (c2, s2) = (cut.clone(), stop.clone());
        let accept = std::thread::spawn(move || {
            while !s2.load(Ordering::SeqCst) {
                let Ok((down, _)) = l.accept() else {
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                };
                if c2.load(Ordering::SeqCst) {
                    continue; // refused while cut: dropped at once
                }
                let Ok(up) = TcpStream::connect(("127.0.0.1", to)) else {
                    continue;
                };
                down.set_nonblocking(false).unwrap();
                for (mut r, mut w) in [
                    (down.try_clone().unwrap(), up.try_clone().unwrap()),
                    (up, down),
                ] {
                    let (c3, s3) = (c2.clone(), s2.clone());
                    r.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
                    std::thread::spawn(move || {
                        let mut b = [0u8; 65536];
                        while !c3.load(Ordering::SeqCst) && !s3.load(Ordering::SeqCst) {
                            match r.read(&mut b) {
                                Ok(0) => break,
                                Ok(n) => {
                                    if w.write_all(&b[..n]).is_err() {
                                        break;
                                    }
                                }
                                Err(e)
                                    if e.kind() == std::io::ErrorKind::WouldBlock
                                        || e.kind() == std::io::ErrorKind::TimedOut => {}
                                Err(_) => break,
                            }
                        }
                        let _ = r.shutdown(std::net::Shutdown::Both);
                        let _ = w.shutdown(std::net::Shutdown::Both);
                    });
                }
            }
        });
        Relay {
            port,
            cut,
            stop,
            accept: Some(accept),
        }
    }

    /// Cuts every connection through it and refuses new ones (or heals).
    pub fn set_cut(&self, cut: bool) {
        self.cut.store(cut, std::sync::atomic::Ordering::SeqCst);
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
    }
}

/// A node that reaches the broker through `relay`.
pub fn node_via(dir: &Path, relay: &Relay, name: &str) -> Daemon {
    let d = dir.join(name);
    std::fs::create_dir_all(&d).unwrap();
    let url = relay.url();
    Daemon::start(&d, &["--fleet", &url, "--fleet-node", name])
}
