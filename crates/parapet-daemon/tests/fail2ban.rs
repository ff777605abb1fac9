//! The real fail2ban (Debian package) banning into parapetd through
//! `contrib/fail2ban/action.d/parapet.py`. Skipped, with a message, when
//! fail2ban is not installed and cannot be installed.

mod common;

use common::{call, Daemon};
use serde_json::json;
use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Kill(Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn have_fail2ban() -> bool {
    Command::new("fail2ban-server")
        .arg("-V")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn ensure_fail2ban() -> bool {
    if have_fail2ban() {
        return true;
    }
    eprintln!("fail2ban-server not found; trying `apt-get install -y fail2ban`");
    let ok = Command::new("apt-get")
        .args(["install", "-y", "-qq", "fail2ban"])
        .env("DEBIAN_FRONTEND", "noninteractive")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    ok && have_fail2ban()
}

fn wait_for(what: &str, limit: Duration, ctx: &dyn Fn() -> String, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(
            t0.elapsed() < limit,
            "timed out after {limit:?} waiting for {what}\n{}",
            ctx()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn members(c: &mut parapet_daemon::Client, set: &str) -> Vec<String> {
    match c.call(json!({"cmd": "set.list", "set": set})) {
        Ok(r) => r["elems"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["elem"].as_str().unwrap().to_string())
            .collect(),
        Err(_) => Vec::new(),
    }
}

#[test]
fn fail2ban_bans_and_unbans_through_parapetd() {
    if !ensure_fail2ban() {
        eprintln!("SKIPPED: fail2ban is not installed and could not be installed");
        return;
    }
    scenario(
        |sock| format!("parapet.py[socket=\"{}\"]", sock.display()),
        true,
    );
}

/// The shell variant (`parapet.conf`) through the `parapet` CLI: one
/// process per ban.
#[test]
fn fail2ban_shell_action_through_the_cli() {
    if !ensure_fail2ban() {
        eprintln!("SKIPPED: fail2ban is not installed and could not be installed");
        return;
    }
    let cli = parapet_cli();
    scenario(
        move |sock| {
            format!(
                "parapet[socket=\"{}\", parapet_bin=\"{}\"]",
                sock.display(),
                cli.display()
            )
        },
        false,
    );
}

/// The `parapet` binary of this build (target/debug/deps/fail2ban-HASH ->
/// target/debug/parapet), built first when it is not there yet: the
/// client command line lives in the `parapet` package, which depends on
/// this one.
fn parapet_cli() -> std::path::PathBuf {
    let exe = std::env::current_exe().unwrap();
    let cli = exe.parent().unwrap().parent().unwrap().join("parapet");
    if !cli.exists() {
        let status = std::process::Command::new(env!("CARGO"))
            .args(["build", "-p", "parapet", "--bin", "parapet"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .unwrap();
        assert!(status.success(), "building the parapet CLI failed");
    }
    assert!(cli.exists(), "{} not built", cli.display());
    cli
}

fn scenario(action: impl Fn(&Path) -> String, one_connection: bool) {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let conf = dir.path().join("f2b");
    fs::create_dir_all(conf.join("action.d")).unwrap();
    fs::create_dir_all(conf.join("filter.d")).unwrap();
    let contrib = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../contrib/fail2ban/action.d");
    for f in ["parapet.py", "parapet.conf"] {
        fs::copy(contrib.join(f), conf.join("action.d").join(f)).unwrap();
    }
    let p = |n: &str| dir.path().join(n).display().to_string();
    let log = dir.path().join("auth.log");
    fs::write(&log, "").unwrap();
    fs::write(
        conf.join("fail2ban.conf"),
        format!("[Definition]\nloglevel = INFO\nlogtarget = {}\nsocket = {}\npidfile = {}\ndbfile = :memory:\n", p("f2b.log"), p("f2b.sock"), p("f2b.pid")),
    )
    .unwrap();
    fs::write(
        conf.join("filter.d/test.conf"),
        "[Definition]\nfailregex = ^FAIL from <HOST>$\ndatepattern = {NONE}\n",
    )
    .unwrap();
    fs::write(
        conf.join("jail.conf"),
        format!(
            "[DEFAULT]\nbackend = polling\n\n[test]\nenabled = true\nfilter = test\nlogpath = {}\nmaxretry = 1\nfindtime = 600\nbantime = 4\naction = {}\n",
            log.display(),
            action(&d.socket)
        ),
    )
    .unwrap();
    let f2b = Kill(
        Command::new("fail2ban-server")
            .args(["-f", "-x", "-c"])
            .arg(&conf)
            .arg("-s")
            .arg(p("f2b.sock"))
            .arg("-p")
            .arg(p("f2b.pid"))
            .stdin(Stdio::null())
            .stdout(fs::File::create(p("f2b.out")).unwrap())
            .stderr(fs::File::create(p("f2b.err")).unwrap())
            .spawn()
            .expect("start fail2ban-server"),
    );
    let f2b_log = || {
        fs::read_to_string(p("f2b.log")).unwrap_or_default()
            + &fs::read_to_string(p("f2b.err")).unwrap_or_default()
    };
    let mut c = d.client();
    // Wait for the jail to run. The Python action's start() creates the
    // jail's sets right away; the shell action starts on the first ban
    // (fail2ban starts command actions on demand).
    wait_for("jail start", Duration::from_secs(60), &f2b_log, || {
        f2b_log().contains("Jail 'test' started")
    });
    if one_connection {
        wait_for(
            "sets created by start()",
            Duration::from_secs(60),
            &f2b_log,
            || {
                c.call(json!({"cmd": "set.list", "set": "f2b-test-v6"}))
                    .is_ok()
            },
        );
    }

    let v4: Vec<String> = (1..=20).map(|i| format!("192.0.2.{i}")).collect();
    let v6: Vec<String> = (1..=5).map(|i| format!("2001:db8::{i:x}")).collect();
    {
        let mut f = fs::OpenOptions::new().append(true).open(&log).unwrap();
        for a in v4.iter().chain(&v6) {
            writeln!(f, "FAIL from {a}").unwrap();
        }
    }
    let t0 = Instant::now();
    wait_for(
        "every offender banned in parapetd",
        Duration::from_secs(60),
        &f2b_log,
        || {
            let b4 = members(&mut c, "f2b-test");
            let b6 = members(&mut c, "f2b-test-v6");
            v4.iter().all(|a| b4.contains(a)) && v6.iter().all(|a| b6.contains(a))
        },
    );
    eprintln!(
        "all {} banned after {:?}",
        v4.len() + v6.len(),
        t0.elapsed()
    );
    // parapetd holds them with fail2ban's bantime plus the safety margin.
    let r = call(&mut c, json!({"cmd": "set.list", "set": "f2b-test"}));
    for e in r["elems"].as_array().unwrap() {
        let t = e["timeout"].as_u64().unwrap();
        assert!(t > 50 && t <= 64, "timeout {t}");
    }
    assert!(call(
        &mut c,
        json!({"cmd": "set.test", "set": "f2b-test", "elem": "192.0.2.7"})
    )["covered"]
        .as_bool()
        .unwrap());
    assert!(!call(
        &mut c,
        json!({"cmd": "set.test", "set": "f2b-test", "elem": "192.0.2.77"})
    )["covered"]
        .as_bool()
        .unwrap());

    // bantime (4 s) ends: fail2ban unbans, through the same connection.
    wait_for(
        "every ban lifted",
        Duration::from_secs(60),
        &f2b_log,
        || members(&mut c, "f2b-test").is_empty() && members(&mut c, "f2b-test-v6").is_empty(),
    );
    eprintln!("all unbanned after {:?}", t0.elapsed());
    let log_text = f2b_log();
    assert!(log_text.contains("Unban 192.0.2.1"), "{log_text}");
    assert!(!log_text.contains("ParapetError"), "{log_text}");
    assert!(
        !log_text.contains(" -- returned "),
        "an action command failed: {log_text}"
    );
    if one_connection {
        // One connection for the whole jail: not one per ban.
        let st = call(&mut c, json!({"cmd": "stats"}));
        assert!(
            st["connections"].as_u64().unwrap() < 15,
            "{:?}",
            st.body.get("connections")
        );
    }
    drop(f2b);
}

/// Drives `parapet.py` directly (fail2ban's ActionBase, no server): bans
/// are pipelined, `stop()` returns only once every one is acknowledged, an
/// error reply to a ban that already returned is logged with its address,
/// and after a `kill -9` and restart of parapetd the action reconnects by
/// itself.
#[test]
fn python_action_pipelines_logs_late_errors_and_reconnects() {
    if !ensure_fail2ban() {
        eprintln!("SKIPPED: fail2ban is not installed and could not be installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut d = Daemon::start(dir.path(), &[]);
    let action =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../contrib/fail2ban/action.d/parapet.py");
    // Bans 10.9.x.y (0..2000) in two halves; between them it says HALF and
    // waits for a line on stdin (the test restarts parapetd meanwhile).
    let driver = r#"
import importlib.util, logging, sys
logging.basicConfig(stream=sys.stderr, level=logging.INFO)
spec = importlib.util.spec_from_file_location("parapet_action", sys.argv[1])
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
class Jail: name = "pipe"
a = mod.Action(Jail(), "parapet", socket=sys.argv[2])
a.start()
def ban(i): a.ban({"ip": "10.9.%d.%d" % (i // 250, i % 250 + 1), "bantime": 600})
for i in range(1000): ban(i)
a.ban({"ip": "10.9.255.0/33", "bantime": 600})   # refused by parapetd, after ban() returned
a._call({"cmd": "ping"})                          # drain the window
print("HALF", flush=True)
sys.stdin.readline()
for i in range(1000, 2000): ban(i)
a.ban({"ip": "10.9.254.0/40", "bantime": 600})   # refused: stop() must wait for it
a.stop()
print("DONE", flush=True)
"#;
    let mut py = Kill(
        Command::new(fail2ban_python())
            .arg("-c")
            .arg(driver)
            .arg(&action)
            .arg(&d.socket)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(fs::File::create(dir.path().join("py.err")).unwrap())
            .spawn()
            .expect("python3"),
    );
    let mut out = std::io::BufReader::new(py.0.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    let py_err = || fs::read_to_string(dir.path().join("py.err")).unwrap_or_default();
    assert_eq!(line.trim(), "HALF", "{}", py_err());
    assert_eq!(members(&mut d.client(), "f2b-pipe").len(), 1000);
    // The late error names the refused element.
    assert!(py_err().contains("10.9.255.0/33"), "{}", py_err());

    d.kill9();
    let d = Daemon::start(dir.path(), &[]);
    writeln!(py.0.stdin.as_mut().unwrap()).unwrap();
    line.clear();
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    assert_eq!(line.trim(), "DONE", "{}", py_err());
    // stop() returned: every ban of both halves is in, none lost to the
    // window or to the restart.
    let got = members(&mut d.client(), "f2b-pipe");
    assert_eq!(got.len(), 2000, "{}", py_err());
    assert!(got.contains(&"10.9.7.250".to_string()));
    assert!(py_err().contains("10.9.254.0/40"), "{}", py_err());
    assert!(!py_err().contains("Traceback"), "{}", py_err());
}

/// The interpreter fail2ban-server runs under (its `#!` line): the one
/// whose path has the `fail2ban` package, unlike a pyenv `python3`.
fn fail2ban_python() -> String {
    let server = Command::new("sh")
        .args(["-c", "command -v fail2ban-server"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    fs::read_to_string(&server)
        .ok()
        .and_then(|t| {
            let first = t.lines().next()?.strip_prefix("#!")?.trim().to_string();
            // `#!/usr/bin/env python3` names no path.
            (!first.contains(' ')).then_some(first)
        })
        .unwrap_or_else(|| "python3".into())
}
