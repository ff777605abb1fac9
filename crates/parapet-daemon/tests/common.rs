//! Helpers shared by the integration tests: a `parapetd` child process in a
//! temporary directory, killed on drop.

#![allow(dead_code)]

use parapet_daemon::Client;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Daemon {
    pub child: Option<Child>,
    pub socket: PathBuf,
    pub state: PathBuf,
    pub stderr: PathBuf,
}

impl Daemon {
    /// Starts parapetd on `dir/parapet.sock` with state in `dir/state`.
    pub fn start(dir: &Path, extra: &[&str]) -> Daemon {
        Self::start_env(dir, extra, &[])
    }

    pub fn start_env(dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> Daemon {
        Self::spawn(
            Command::new(env!("CARGO_BIN_EXE_parapetd")),
            dir,
            extra,
            env,
        )
    }

    /// Starts parapetd inside the network namespace `ns` (its dataplane
    /// then attaches there).
    pub fn start_in(ns: &parapet_testbed::Netns, dir: &Path, extra: &[&str]) -> Daemon {
        Self::spawn(ns.command(env!("CARGO_BIN_EXE_parapetd")), dir, extra, &[])
    }

    fn spawn(mut cmd: Command, dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> Daemon {
        let socket = dir.join("parapet.sock");
        let state = dir.join("state");
        let stderr = dir.join(format!(
            "parapetd.{}.log",
            Instant::now().elapsed().as_nanos() ^ rand_tag()
        ));
        cmd.arg("--socket")
            .arg(&socket)
            .arg("--state-dir")
            .arg(&state)
            .args(extra);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .expect("spawn parapetd");
        let mut d = Daemon {
            child: Some(child),
            socket,
            state,
            stderr,
        };
        d.wait_ready();
        d
    }

    fn wait_ready(&mut self) {
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(30) {
            if let Ok(mut c) = Client::connect(&self.socket) {
                if c.call(json!({"cmd": "ping"})).is_ok() {
                    return;
                }
            }
            if let Some(st) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("parapetd exited with {st}: {}", self.log());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("parapetd not ready within 30 s: {}", self.log());
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    pub fn client(&self) -> Client {
        Client::connect(&self.socket).expect("connect")
    }

    /// SIGKILL, no chance to snapshot or clean up.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            c.kill().unwrap();
            c.wait().unwrap();
        }
    }

    /// SIGTERM and wait (bounded).
    pub fn term(&mut self) -> std::process::ExitStatus {
        let mut c = self.child.take().expect("running");
        unsafe { libc_kill(c.id() as i32, 15) };
        let t0 = Instant::now();
        loop {
            if let Some(st) = c.try_wait().unwrap() {
                return st;
            }
            if t0.elapsed() > Duration::from_secs(30) {
                let _ = c.kill();
                panic!("parapetd did not stop on SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}

fn rand_tag() -> u128 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u8(1);
    h.finish() as u128
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Calls and unwraps.
pub fn call(c: &mut Client, v: Value) -> parapet_daemon::proto::Reply {
    match c.call(v.clone()) {
        Ok(r) => r,
        Err(e) => panic!("{v} failed: {e}"),
    }
}

/// Calls and asserts the reply is ok.
pub fn ok(c: &mut Client, v: Value) {
    let r = c.call(v.clone()).unwrap_or_else(|e| panic!("{v}: {e}"));
    assert!(r.ok(), "{v}: {:?}", r.error());
}

/// Remaining timeout (s) of `elem` in `set` on a daemon; `None` when the
/// element is absent or permanent.
pub fn remaining(d: &Daemon, set: &str, elem: &str) -> Option<u64> {
    let mut c = d.client();
    let r = call(&mut c, json!({"cmd": "set.list", "set": set}));
    r["elems"]
        .as_array()?
        .iter()
        .find(|e| e["elem"] == elem)
        .and_then(|e| e["timeout"].as_u64())
}

/// A child process (a broker, a LAPI, a daemon started by hand), killed
/// and reaped on drop.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The peer's address on a default [`parapet_testbed::Veth`]: the source
/// of the probe frames the netns tests ban.
pub const PEER: &str = "10.250.0.2";

/// A ruleset that drops what `parapet-ban4` holds.
pub const BAN4_RULES: &str =
    "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -m set --match-set parapet-ban4 src -j DROP\nCOMMIT\n";
