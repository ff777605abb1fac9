//! Keeps `bench/fail2ban/run.py` (bans through the real fail2ban, parapet's
//! actions against fail2ban's iptables-ipset and nftables) from rotting: a
//! small run of it, 200 bans per action and for fail2ban alone (`floor`),
//! with `--strict` so that an action that misses a ban or logs an error
//! fails the test. The script prints `skipped: REASON` itself without root,
//! iproute2 or fail2ban.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BANS: usize = 200;

#[test]
fn fail2ban_bench_harness_runs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let script = root.join("bench/fail2ban/run.py");
    if Command::new("python3")
        .arg("-V")
        .stdout(Stdio::null())
        .status()
        .is_err()
    {
        eprintln!("skipped: python3 not found");
        return;
    }
    // The CLI is another package's binary: present after a workspace build
    // (target/debug/parapet beside parapetd); the shell action needs it.
    let daemon = Path::new(env!("CARGO_BIN_EXE_parapetd"));
    let cli = daemon.with_file_name("parapet");
    let mut actions = vec!["floor", "parapet.py", "iptables-ipset", "nftables"];
    if cli.is_file() {
        actions.insert(2, "parapet.conf");
    } else {
        eprintln!(
            "{} not built: parapet.conf (the shell action) left out",
            cli.display()
        );
    }
    let out = tempfile::NamedTempFile::new().unwrap();
    let err = tempfile::NamedTempFile::new().unwrap();
    let mut child = Command::new("python3")
        .arg(&script)
        .args(["--bans", &BANS.to_string(), "--runs", "1", "--cap", "60"])
        .arg("--actions")
        .arg(actions.join(","))
        .arg("--parapetd")
        .arg(daemon)
        .arg("--parapet")
        .arg(&cli)
        .arg("--strict")
        .stdin(Stdio::null())
        .stdout(out.reopen().unwrap())
        .stderr(err.reopen().unwrap())
        .spawn()
        .expect("start bench/fail2ban/run.py");
    // Each action run is capped at 60 s by the script; this bounds startup
    // and cleanup too.
    let t0 = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if t0.elapsed() > Duration::from_secs(400) {
            // SIGINT lets the script remove its namespaces.
            let _ = Command::new("kill")
                .args(["-INT", &child.id().to_string()])
                .status();
            std::thread::sleep(Duration::from_secs(10));
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "bench did not finish in 400 s:\n{}",
                std::fs::read_to_string(err.path()).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let stdout = std::fs::read_to_string(out.path()).unwrap();
    let stderr = std::fs::read_to_string(err.path()).unwrap();
    eprintln!("{stdout}\n{stderr}");
    assert!(status.success(), "bench failed ({status}):\n{stderr}");
    if let Some(reason) = stdout.lines().find(|l| l.starts_with("skipped: ")) {
        eprintln!("{reason}");
        return;
    }
    // An action whose tools are missing here (ipset, nft) is skipped by
    // the script with a message; the others must still pass.
    actions.retain(|a| {
        let skipped = stdout.contains(&format!("{a}: skipped: "));
        if skipped {
            eprintln!("{a} skipped by the bench");
        }
        !skipped
    });
    for a in &actions {
        let row = stdout
            .lines()
            .find(|l| l.starts_with(&format!("| {a} |")))
            .unwrap_or_else(|| panic!("no result row for {a}:\n{stdout}\n{stderr}"));
        // "| action | runs | complete | ...": one run, complete.
        assert!(row.contains("| 1 | 1/1 |"), "{a} incomplete: {row}");
    }
    // Every record lists all bans as done.
    let records = stderr
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .collect::<Vec<_>>();
    assert_eq!(records.len(), actions.len(), "{stderr}");
    for r in &records {
        assert_eq!(r["done"].as_u64(), Some(BANS as u64), "{r}");
        assert_eq!(r["errors"].as_u64(), Some(0), "{r}");
    }
}
