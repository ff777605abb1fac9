//! What parapet shows on a real terminal.
//!
//! `parapet top`: tmux (a private server, an 80×24 window) runs the live
//! view against a real parapetd; the test reads the screen, sends keys and
//! reads it again: the rules are listed within 80 columns, `b` sorts by
//! bytes, `c` filters by chain, space pauses, `q` quits and gives the
//! terminal back. Also `--once --json` without a terminal. (Counters of
//! real traffic: the `metrics_prometheus` test.)
//!
//! Progress: `set add --file` and `apply` under `script` (a pseudo
//! terminal) draw a progress line on stderr, and nothing when stderr is a
//! pipe. Needs tmux (installed by `scripts/deps.sh test`) and `script`
//! (util-linux); fails without them.

mod common;

use common::daemon::ok;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A private tmux server (its own socket name), killed on drop.
struct Tmux(String);

impl Tmux {
    fn run(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux")
            .args(["-L", &self.0])
            .args(args)
            .output()
            .expect("tmux (scripts/deps.sh test installs it)")
    }

    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.run(&["capture-pane", "-p", "-t", "top"]).stdout).into_owned()
    }

    /// Waits until the screen contains `what` (10 s at most).
    fn wait_for(&self, what: &str) -> String {
        let t0 = Instant::now();
        loop {
            let s = self.screen();
            if s.contains(what) {
                return s;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "`{what}` never appeared; the screen:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}

const RULES: &str = "*filter\n:INPUT ACCEPT [0:0]\n:sshguard - [0:0]\n\
    -A INPUT -i lo -j ACCEPT\n\
    -A INPUT -p tcp --dport 22 -j sshguard\n\
    -A INPUT -p udp --dport 53 -m comment --comment dns -j ACCEPT\n\
    -A sshguard -m set --match-set parapet-ban4 src -j DROP\n\
    -A sshguard -j ACCEPT\nCOMMIT\n";

fn daemon(dir: &Path) -> (Proc, PathBuf) {
    let sock = dir.join("s");
    let exe = dir.join("parapetd");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_parapet"), &exe).unwrap();
    let child = Command::new(&exe)
        .arg("--socket")
        .arg(&sock)
        .arg("--state-dir")
        .arg(dir.join("state"))
        .arg("--no-fsync")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let p = Proc(child);
    let t0 = Instant::now();
    while parapet_daemon::Client::connect(&sock).is_err() {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "parapetd did not come up"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::fs::write(dir.join("r.rules"), RULES).unwrap();
    ok(&sock, &["ban", "192.0.2.1", "192.0.2.2", "192.0.2.3"]);
    ok(&sock, &["apply", dir.join("r.rules").to_str().unwrap()]);
    (p, sock)
}

#[test]
fn the_live_view_in_a_terminal_sorts_filters_pauses_and_quits() {
    let dir = tempfile::tempdir().unwrap();
    let (_d, sock) = daemon(dir.path());
    let tmux = Tmux(format!("parapet-top-{}", std::process::id()));
    let cmd = format!(
        "{} --socket {} top --interval 0.5; echo top-exited-$?; sleep 30",
        env!("CARGO_BIN_EXE_parapet"),
        sock.display()
    );
    let o = tmux.run(&[
        "new-session",
        "-d",
        "-s",
        "top",
        "-x",
        "80",
        "-y",
        "24",
        &cmd,
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = tmux.wait_for("parapet top");
    assert!(
        s.contains("sort: packets") && s.contains("chain: all"),
        "{s}"
    );
    assert!(s.contains("sets: parapet-ban4 3"), "{s}");
    assert!(s.contains("-A INPUT -p udp --dport 53"), "{s}");
    assert!(s.contains("-A sshguard -j ACCEPT"), "{s}");
    assert!(
        s.lines().count() <= 24 && s.lines().all(|l| l.chars().count() <= 80),
        "{s}"
    );
    tmux.run(&["send-keys", "-t", "top", "b"]);
    tmux.wait_for("sort: bytes");
    tmux.run(&["send-keys", "-t", "top", "c"]);
    let s = tmux.wait_for("chain: filter/INPUT");
    assert!(
        !s.contains("-A sshguard"),
        "the filter shows other chains:\n{s}"
    );
    tmux.run(&["send-keys", "-t", "top", "c"]);
    let s = tmux.wait_for("chain: filter/sshguard");
    assert!(
        s.contains("-A sshguard -j ACCEPT") && !s.contains("--dport 53"),
        "{s}"
    );
    tmux.run(&["send-keys", "-t", "top", "Space"]);
    tmux.wait_for("[paused]");
    tmux.run(&["send-keys", "-t", "top", "q"]);
    // top leaves the alternate screen and exits 0.
    let s = tmux.wait_for("top-exited-0");
    assert!(!s.contains("parapet top  gen"), "screen not restored:\n{s}");
}

#[test]
fn once_json_lists_every_rule_with_its_chain_and_text() {
    let dir = tempfile::tempdir().unwrap();
    let (_d, sock) = daemon(dir.path());
    let out = ok(
        &sock,
        &[
            "top",
            "--once",
            "--json",
            "--interval",
            "0.2",
            "--limit",
            "100",
        ],
    );
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let rules = v["rules"].as_array().unwrap();
    assert_eq!(rules.len(), 6, "{v}"); // five rules and the policy
    let r3 = rules.iter().find(|r| r["rule"] == 3).unwrap();
    assert_eq!(r3["chain"], "filter/INPUT");
    assert_eq!(r3["verdict"], "accept");
    assert!(
        r3["text"]
            .as_str()
            .unwrap()
            .starts_with("-A INPUT -p udp --dport 53"),
        "{r3}"
    );
    assert_eq!(
        rules.iter().find(|r| r["rule"] == 4).unwrap()["verdict"],
        "drop"
    );
    assert_eq!(v["sets"][0]["elements"], 3);
    assert_eq!(v["kernel"], false);
    let filtered = ok(
        &sock,
        &[
            "top",
            "--once",
            "--json",
            "--interval",
            "0.1",
            "--chain",
            "filter/sshguard",
        ],
    );
    let f: serde_json::Value = serde_json::from_str(&filtered).unwrap();
    let ids: Vec<u64> = f["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["rule"].as_u64().unwrap())
        .collect();
    assert_eq!(ids, vec![0, 4, 5], "{f}");
}

/// Runs `parapet ARGS` with `PARAPET_PROGRESS_AFTER_MS=0`: under `script`
/// (stdout and stderr a terminal) when `tty`, else with stderr piped;
/// returns what it wrote to stderr (and, under script, stdout).
fn with_progress(sock: &Path, args: &str, tty: bool) -> String {
    let cmd = format!(
        "{} --socket {} {args}",
        env!("CARGO_BIN_EXE_parapet"),
        sock.display()
    );
    let o = if tty {
        Command::new("script")
            .args(["-q", "-e", "-c", &cmd, "/dev/null"])
            .env("PARAPET_PROGRESS_AFTER_MS", "0")
            .stdin(Stdio::null())
            .output()
            .expect("script (util-linux)")
    } else {
        Command::new("bash")
            .args(["-c", &cmd])
            .env("PARAPET_PROGRESS_AFTER_MS", "0")
            .output()
            .unwrap()
    };
    assert!(
        o.status.success(),
        "{cmd}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let mut all = String::from_utf8_lossy(&o.stderr).into_owned();
    if tty {
        all.push_str(&String::from_utf8_lossy(&o.stdout));
    }
    all
}

#[test]
fn long_operations_show_progress_on_a_terminal_only() {
    let dir = tempfile::tempdir().unwrap();
    let (_d, sock) = daemon(dir.path());
    let n = 200_000u32;
    let file = dir.path().join("big.txt");
    let text: String = (0..n)
        .map(|i| format!("{}\n", std::net::Ipv4Addr::from(0x0a00_0000 + i)))
        .collect();
    std::fs::write(&file, text).unwrap();
    ok(&sock, &["set", "create", "big", "ipv4_addr"]);
    let add = format!("set add big --file {}", file.display());
    let shown = with_progress(&sock, &add, true);
    assert!(
        shown.contains(&format!("set add big: 65536/{n} (32%)")),
        "{shown:?}"
    );
    assert!(
        shown.contains("\r\x1b[K"),
        "the progress line is not erased: {shown:?}"
    );
    let del = format!("set del big --file {}", file.display());
    let piped = with_progress(&sock, &del, false);
    assert!(!piped.contains('%') && !piped.contains('\r'), "{piped:?}");
    let rules = dir.path().join("r.rules");
    let applying = with_progress(&sock, &format!("apply {}", rules.display()), true);
    assert!(applying.contains("applied "), "{applying:?}");
    let piped = with_progress(&sock, &format!("apply {}", rules.display()), false);
    assert!(!piped.contains("applying"), "{piped:?}");
}
