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
//! pipe; in tmux, with the real one-second threshold (the daemon stopped
//! with SIGSTOP for a while makes an operation long): a quick apply shows
//! nothing, a long one its elapsed time on the screen, a long set load
//! its done/total, and neither anything when piped. Needs tmux (installed by `scripts/deps.sh test`) and `script`
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
        String::from_utf8_lossy(&self.run(&["capture-pane", "-p", "-J", "-t", "top"]).stdout)
            .into_owned()
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
    // No program loaded: no hook has seen a packet (per hook with real
    // traffic: the metrics_prometheus and deb_install tests).
    assert!(s.contains("hooks: none"), "{s}");
    assert!(s.contains("-A INPUT -p udp --dport 53"), "{s}");
    assert!(s.contains("-A sshguard -j ACCEPT"), "{s}");
    assert!(
        s.lines().count() <= 24 && s.lines().all(|l| l.chars().count() <= 80),
        "{s}"
    );
    // The ban rate: 20 bans within one interval show as a rate.
    let more: Vec<String> = (10..30).map(|i| format!("192.0.2.{i}")).collect();
    let mut args = vec!["ban"];
    args.extend(more.iter().map(String::as_str));
    ok(&sock, &args);
    let s = tmux.wait_for("sets: parapet-ban4 23");
    assert!(
        !s.contains("bans 0.0/s"),
        "20 bans in one interval, no ban rate:\n{s}"
    );
    tmux.run(&["send-keys", "-t", "top", "b"]);
    tmux.wait_for("sort: bytes");
    tmux.run(&["send-keys", "-t", "top", "p"]);
    tmux.wait_for("sort: packets");
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
    // Paused, the view keeps its samples: a ban does not show (three
    // intervals later), and shows once resumed.
    ok(&sock, &["ban", "192.0.2.99"]);
    std::thread::sleep(Duration::from_millis(1500));
    let s = tmux.screen();
    assert!(
        s.contains("sets: parapet-ban4 23") && s.contains("[paused]"),
        "the paused view changed:\n{s}"
    );
    tmux.run(&["send-keys", "-t", "top", "Space"]);
    let s = tmux.wait_for("sets: parapet-ban4 24");
    assert!(!s.contains("[paused]"), "{s}");
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

/// Sends SIGCONT to a process on drop: a test that stopped the daemon
/// never leaves it stopped, also when it fails.
struct Stopped(i32);

impl Stopped {
    fn stop(pid: u32) -> Stopped {
        // SAFETY: kill(2) on the daemon this test spawned and still owns.
        unsafe { libc::kill(pid as i32, libc::SIGSTOP) };
        Stopped(pid as i32)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        // SAFETY: as in `stop`.
        unsafe { libc::kill(self.0, libc::SIGCONT) };
    }
}

/// Types `cmd` into the shell of window `top` and waits for `done` (the
/// test's `echo` after it) on the screen.
fn type_and_wait(tmux: &Tmux, cmd: &str, done: &str) -> String {
    tmux.run(&[
        "send-keys",
        "-t",
        "top",
        &format!("{cmd}; echo {done}"),
        "Enter",
    ]);
    tmux.wait_for(&format!("\n{done}"))
}

#[test]
fn progress_shows_after_a_second_in_tmux_and_never_when_piped() {
    // The real threshold (one second), not the tests' override.
    assert!(std::env::var_os("PARAPET_PROGRESS_AFTER_MS").is_none());
    let dir = tempfile::tempdir().unwrap();
    let (d, sock) = daemon(dir.path());
    let pid = d.0.id();
    let parapet = format!(
        "{} --socket {}",
        env!("CARGO_BIN_EXE_parapet"),
        sock.display()
    );
    let rules = dir.path().join("r.rules");
    let file = dir.path().join("big.txt");
    let n = 100_000u32;
    let text: String = (0..n)
        .map(|i| format!("{}\n", std::net::Ipv4Addr::from(0x0a00_0000 + i)))
        .collect();
    std::fs::write(&file, text).unwrap();
    ok(&sock, &["set", "create", "big", "ipv4_addr"]);

    let tmux = Tmux(format!("parapet-progress-{}", std::process::id()));
    let o = tmux.run(&[
        "new-session",
        "-d",
        "-s",
        "top",
        "-x",
        "80",
        "-y",
        "24",
        "bash --norc --noprofile",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Everything the programs write to the terminal, escapes included.
    let raw = dir.path().join("raw.log");
    tmux.run(&[
        "pipe-pane",
        "-t",
        "top",
        "-o",
        &format!("cat >> {}", raw.display()),
    ]);
    let raw_text = || std::fs::read_to_string(&raw).unwrap_or_default();

    // A quick apply shows nothing.
    type_and_wait(
        &tmux,
        &format!("{parapet} apply {}", rules.display()),
        "quick-done",
    );
    assert!(!raw_text().contains("applying"), "{:?}", raw_text());

    // An apply that takes longer (the daemon stopped for a while) shows
    // its elapsed time after a second, and erases it when done.
    let stopped = Stopped::stop(pid);
    tmux.run(&[
        "send-keys",
        "-t",
        "top",
        &format!("{parapet} apply {}; echo slow-done", rules.display()),
        "Enter",
    ]);
    let s = tmux.wait_for(&format!("applying {}… 1.", rules.display()));
    assert!(!s.contains("\nslow-done"), "{s}");
    drop(stopped);
    let s = tmux.wait_for("\nslow-done");
    assert!(
        s.contains("applied ") && !s.contains("applying"),
        "not erased:\n{s}"
    );

    // A set load that takes longer shows done/total once its replies come.
    let stopped = Stopped::stop(pid);
    tmux.run(&[
        "send-keys",
        "-t",
        "top",
        &format!(
            "{parapet} set add big --file {}; echo load-done",
            file.display()
        ),
        "Enter",
    ]);
    std::thread::sleep(Duration::from_millis(1500));
    drop(stopped);
    tmux.wait_for("\nload-done");
    let shown = raw_text();
    assert!(
        shown.contains(&format!("set add big: 65536/{n} (65%)")),
        "{shown:?}"
    );

    // Piped (stderr not the terminal): nothing, however long it takes.
    let before = raw_text().len();
    let out = dir.path().join("piped.txt");
    for (cmd, done) in [
        (format!("set del big --file {}", file.display()), "del-done"),
        (format!("apply {}", rules.display()), "apply-done"),
    ] {
        let stopped = Stopped::stop(pid);
        tmux.run(&[
            "send-keys",
            "-t",
            "top",
            &format!(
                "{parapet} {cmd} 2>&1 | cat >> {}; echo {done}",
                out.display()
            ),
            "Enter",
        ]);
        std::thread::sleep(Duration::from_millis(1500));
        drop(stopped);
        tmux.wait_for(&format!("\n{done}"));
    }
    let piped = std::fs::read_to_string(&out).unwrap();
    assert!(piped.contains("applied "), "{piped:?}");
    assert!(
        !piped.contains('%') && !piped.contains("applying") && !piped.contains('\r'),
        "progress while piped: {piped:?}"
    );
    // Nor on the terminal (where the shell's own lines end in \r\n).
    let later = &raw_text()[before..];
    assert!(
        !later.contains('%') && !later.contains("applying"),
        "progress while piped: {later:?}"
    );
}
