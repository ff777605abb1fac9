//! Daemon throughput and recovery, against the real `parapetd` binary with
//! fsync on, state in a temporary directory:
//!
//! 1. single-address `ban` requests over one connection, pipelined;
//! 2. `set add --file` with N addresses (the CLI code path: 64k-element
//!    requests, pipelined);
//! 3. restart after `kill -9` with everything in the journal, and after a
//!    clean stop (snapshot), until the first reply.
//!
//! `cargo build --release -p parapet-daemon && cargo bench -p
//! parapet-bench-micro --bench daemon` (N = 1,000,000 file addresses and
//! 200,000 single bans; override with PARAPET_BENCH_FILE_N and
//! PARAPET_BENCH_BAN_N). Prints one JSON object per measurement. The daemon
//! is `$PARAPETD`, else the `parapetd` of the profile this bench was built in.

use parapet_daemon::Client;
use serde_json::json;
use std::io::{BufRead, BufReader, Write};
use std::net::Ipv4Addr;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Proc(Option<Child>);

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The daemon binary: another package's, so Cargo does not hand this bench
/// its path; it sits in the profile directory above `deps/`.
fn parapetd() -> PathBuf {
    if let Some(p) = std::env::var_os("PARAPETD") {
        return p.into();
    }
    let exe = std::env::current_exe().expect("current_exe");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps");
    let p = profile_dir.join("parapetd");
    assert!(
        p.is_file(),
        "{} not found: cargo build --release -p parapet-daemon, or set PARAPETD",
        p.display()
    );
    p
}

fn start(sock: &Path, state: &Path) -> (Proc, Duration) {
    let t0 = Instant::now();
    let child = Command::new(parapetd())
        .arg("--socket")
        .arg(sock)
        .arg("--state-dir")
        .arg(state)
        // PARAPET_BENCH_NO_FSYNC=1 shows what the fdatasyncs cost.
        .args(std::env::var_os("PARAPET_BENCH_NO_FSYNC").map(|_| "--no-fsync"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn parapetd");
    let p = Proc(Some(child));
    loop {
        if let Ok(mut c) = Client::connect(sock) {
            if c.call(json!({"cmd": "ping"})).is_ok() {
                return (p, t0.elapsed());
            }
        }
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "parapetd did not come up"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// CPU time (user + system) of a process, ms. The machine this runs on may
/// be shared: wall-clock rates then understate what the code does, so each
/// phase also reports the daemon's and the client's CPU time.
fn proc_cpu_ms(pid: u32) -> f64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = s.rsplit_once(')').map_or("", |x| x.1);
    let f: Vec<u64> = after
        .split_whitespace()
        .map(|t| t.parse().unwrap_or(0))
        .collect();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    (f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0)) as f64 * 1000.0 / hz
}

fn self_cpu_ms() -> f64 {
    proc_cpu_ms(std::process::id())
}

fn env_n(k: &str, d: usize) -> usize {
    std::env::var(k)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(d)
}

fn main() {
    let file_n = env_n("PARAPET_BENCH_FILE_N", 1_000_000);
    let ban_n = env_n("PARAPET_BENCH_BAN_N", 200_000);
    let dir = tempfile::tempdir().unwrap();
    let sock: PathBuf = dir.path().join("s");
    let state = dir.path().join("state");
    let (mut p, t) = start(&sock, &state);
    println!(
        "{}",
        json!({"bench": "cold_start", "ms": t.as_secs_f64() * 1e3})
    );

    // 1. Single-address bans, one request each, pipelined on one connection.
    let s = UnixStream::connect(&sock).unwrap();
    let mut w = s.try_clone().unwrap();
    let pid = p.0.as_ref().unwrap().id();
    let (d0, c0) = (proc_cpu_ms(pid), self_cpu_ms());
    let t0 = Instant::now();
    let writer = std::thread::spawn(move || {
        let mut buf = Vec::with_capacity(1 << 16);
        for i in 0..ban_n {
            let a = Ipv4Addr::from(0xac10_0000u32 + i as u32);
            writeln!(
                buf,
                "{{\"v\":1,\"id\":{i},\"cmd\":\"ban\",\"elems\":[\"{a}\"],\"timeout\":3600}}"
            )
            .unwrap();
            if buf.len() >= 1 << 16 {
                w.write_all(&buf).unwrap();
                buf.clear();
            }
        }
        w.write_all(&buf).unwrap();
    });
    let mut r = BufReader::new(s);
    let mut line = String::new();
    for i in 0..ban_n {
        line.clear();
        r.read_line(&mut line).unwrap();
        assert!(line.contains("\"ok\":true"), "ban {i}: {line}");
    }
    writer.join().unwrap();
    let dt = t0.elapsed();
    println!(
        "{}",
        json!({"bench": "ban_pipelined_one_connection", "requests": ban_n, "secs": dt.as_secs_f64(), "requests_per_sec": ban_n as f64 / dt.as_secs_f64(),
            "daemon_cpu_ms": proc_cpu_ms(pid) - d0, "client_cpu_ms": self_cpu_ms() - c0,
            "requests_per_daemon_cpu_sec": ban_n as f64 / ((proc_cpu_ms(pid) - d0) / 1e3)})
    );

    // 2. set add --file.
    let mut c = Client::connect(&sock).unwrap();
    c.call(json!({"cmd": "set.create", "set": "big", "type": "ipv4_addr", "flags": ["timeout"]}))
        .unwrap();
    let file = dir.path().join("addrs");
    let mut text = String::with_capacity(file_n * 16);
    for i in 0..file_n {
        text.push_str(&Ipv4Addr::from(0x0a00_0000u32 + 2 * i as u32 + 1).to_string());
        text.push('\n');
    }
    std::fs::write(&file, text).unwrap();
    let (d0, c0) = (proc_cpu_ms(pid), self_cpu_ms());
    let t0 = Instant::now();
    // Batched and pipelined the way `parapet set add --file` sends them.
    let text = std::fs::read_to_string(&file).unwrap();
    let addrs: Vec<&str> = text.lines().collect();
    let mut lines = Vec::new();
    for batch in addrs.chunks(1 << 16) {
        let req = json!({"v": 1, "id": c.take_id(), "cmd": "set.add", "set": "big",
            "elems": batch, "timeout": 3600});
        let mut line = serde_json::to_vec(&req).unwrap();
        line.push(b'\n');
        lines.push(line);
    }
    for r in c.pipeline(lines).unwrap() {
        assert!(r.ok(), "{:?}", r.error());
    }
    let dt = t0.elapsed();
    println!(
        "{}",
        json!({"bench": "set_add_file", "addresses": file_n, "secs": dt.as_secs_f64(), "addresses_per_sec": file_n as f64 / dt.as_secs_f64(),
            "daemon_cpu_ms": proc_cpu_ms(pid) - d0, "client_cpu_ms": self_cpu_ms() - c0,
            "addresses_per_daemon_cpu_sec": file_n as f64 / ((proc_cpu_ms(pid) - d0) / 1e3)})
    );
    let total = file_n + ban_n;
    let jbytes = std::fs::metadata(state.join("journal"))
        .map(|m| m.len())
        .unwrap_or(0);

    // 3a. kill -9, restart from the journal.
    drop(c);
    drop(p);
    let (p2, t) = start(&sock, &state);
    let mut c = Client::connect(&sock).unwrap();
    let st = c.call(json!({"cmd": "stats"})).unwrap();
    assert_eq!(st["elements"].as_u64(), Some(total as u64), "all bans back");
    println!(
        "{}",
        json!({"bench": "restart_after_kill9_from_journal", "elements": total, "journal_bytes": jbytes, "ready_ms": t.as_secs_f64() * 1e3, "recovery_ms": st["recovery"]["millis"], "recovery_cpu_ms": st["recovery"]["cpu_millis"]})
    );
    drop(c);

    // 3b. clean stop (snapshot), restart from the snapshot.
    p = p2;
    let child = p.0.as_mut().unwrap();
    let t0 = Instant::now();
    // SAFETY: plain kill(2) on our child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    child.wait().unwrap();
    let stop = t0.elapsed();
    p.0 = None;
    let sbytes = std::fs::metadata(state.join("snapshot"))
        .map(|m| m.len())
        .unwrap_or(0);
    let (_p3, t) = start(&sock, &state);
    let mut c = Client::connect(&sock).unwrap();
    let st = c.call(json!({"cmd": "stats"})).unwrap();
    assert_eq!(st["elements"].as_u64(), Some(total as u64));
    println!(
        "{}",
        json!({"bench": "restart_from_snapshot", "elements": total, "snapshot_bytes": sbytes, "stop_with_snapshot_ms": stop.as_secs_f64() * 1e3, "ready_ms": t.as_secs_f64() * 1e3, "recovery_ms": st["recovery"]["millis"], "recovery_cpu_ms": st["recovery"]["cpu_millis"]})
    );
}
