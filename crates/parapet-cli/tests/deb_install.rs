//! The Debian package end to end, as an administrator would use it on a
//! fresh machine: `dpkg -i target/deb/parapet_VERSION_ARCH.deb`, the
//! files in place (binaries, conffiles, man pages, completions, unit;
//! `systemd-analyze verify` of the unit), `parapet check
//! /etc/parapet/rules` and `parapetd --version` from the installed paths;
//! then the installed parapetd started as the unit starts it (its
//! `ExecStartPre=` and `ExecStart=` lines read from the installed unit,
//! plus the documented `--metrics 127.0.0.1:9464` drop-in) inside a fresh
//! network namespace, the test's rules appended to `/etc/parapet/rules`
//! and reloaded as `systemctl reload` does (`ExecReload=`: check, then
//! SIGHUP), `parapet attach VETH --hook xdp`, datagrams over the veth that
//! the ruleset accepts and drops (the receiver gets exactly the accepted
//! ones), a real Prometheus scraping the installed daemon and reading the
//! rules' counters and the XDP hook's drops, `man parapet` rendering,
//! `parapet top --once --json` ranking the rule the traffic hits first;
//! SIGTERM, and `dpkg --purge` leaving nothing behind.
//!
//! It reuses the package `make deb` built (a release build takes minutes;
//! `make test` runs `make deb` first as root) and fails when that package
//! is missing or older than the sources. Needs root (`#[ignore = "needs
//! root"]`), Debian's `prometheus`, `man-db` and `systemd-analyze`
//! (`scripts/deps.sh test`); refuses to run over a parapet package
//! installed otherwise.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::SystemTime;

const INSTALLED: [&str; 12] = [
    "/usr/bin/parapet",
    "/usr/bin/parapetd",
    "/etc/parapet/rules",
    "/etc/fail2ban/action.d/parapet.py",
    "/lib/systemd/system/parapetd.service",
    "/usr/share/man/man8/parapet.8.gz",
    "/usr/share/man/man8/parapet-ban.8.gz",
    "/usr/share/man/man8/parapetd.8.gz",
    "/usr/share/bash-completion/completions/parapet",
    "/usr/share/zsh/vendor-completions/_parapet",
    "/usr/share/fish/vendor_completions.d/parapet.fish",
    "/usr/share/doc/parapet/copyright",
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn run(prog: &str, args: &[&str]) -> Output {
    Command::new(prog)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{prog}: {e}"))
}

fn ok(prog: &str, args: &[&str]) -> String {
    let o = run(prog, args);
    assert!(
        o.status.success(),
        "{prog} {args:?}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Newest modification time of the files under `dir` (sources only).
fn newest(dir: &Path) -> SystemTime {
    let mut t = SystemTime::UNIX_EPOCH;
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        let m = e.metadata().unwrap();
        let name = e.file_name();
        if m.is_dir() && name != "target" && name != "tests" {
            t = t.max(newest(&p));
        } else if m.is_file()
            && p.extension()
                .is_some_and(|x| x == "rs" || x == "c" || x == "h")
        {
            t = t.max(m.modified().unwrap());
        }
    }
    t
}

/// `prog args` with `env` set, asserting success; its stdout.
fn run_env(prog: &str, args: &[&str], env: &[(&str, &str)]) -> String {
    let o = Command::new(prog)
        .args(args)
        .envs(env.iter().copied())
        .output()
        .unwrap_or_else(|e| panic!("{prog}: {e}"));
    assert!(
        o.status.success(),
        "{prog} {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn installed() -> bool {
    run("dpkg-query", &["-W", "-f=${Status}", "parapet"])
        .stdout
        .starts_with(b"install ok")
}

/// Purges the package when the test ends, also on failure, and removes
/// the runtime directory the test made in systemd's place.
struct Purge;

impl Drop for Purge {
    fn drop(&mut self) {
        let _ = run("dpkg", &["--purge", "parapet"]);
        let _ = std::fs::remove_dir_all(RUNTIME_DIR);
    }
}

#[test]
#[ignore = "needs root"]
fn the_package_installs_works_and_purges_cleanly() {
    parapet_testbed::require_root();
    let arch = ok("dpkg", &["--print-architecture"]);
    let version = env!("CARGO_PKG_VERSION");
    let deb = root().join(format!("target/deb/parapet_{version}_{}.deb", arch.trim()));
    let built = std::fs::metadata(&deb)
        .and_then(|m| m.modified())
        .unwrap_or_else(|e| panic!("{}: {e}; run `make deb` first", deb.display()));
    assert!(
        built >= newest(&root().join("crates")),
        "{} is older than the sources; run `make deb` again",
        deb.display()
    );
    assert!(
        !installed() && !Path::new("/usr/bin/parapetd").exists(),
        "parapet is already installed here; this test installs and purges its own"
    );
    let _purge = Purge;
    ok("dpkg", &["-i", deb.to_str().unwrap()]);
    for f in INSTALLED {
        assert!(Path::new(f).is_file(), "{f} not installed");
    }
    let check = ok("/usr/bin/parapet", &["check", "/etc/parapet/rules"]);
    assert!(check.contains("ok"), "{check}");
    let v = ok("/usr/bin/parapetd", &["--version"]);
    assert_eq!(v.trim(), format!("parapetd {version}"));
    let conffiles = ok("dpkg-query", &["-W", "-f=${Conffiles}", "parapet"]);
    for c in ["/etc/parapet/rules", "/etc/fail2ban/action.d/parapet.conf"] {
        assert!(conffiles.contains(c), "{c} not a conffile: {conffiles}");
    }
    let man = ok("man", &["-w", "8", "parapet"]);
    assert!(
        man.trim().ends_with("/usr/share/man/man8/parapet.8.gz"),
        "{man}"
    );
    let man = run_env(
        "man",
        &["parapet"],
        &[("MANPAGER", "cat"), ("MANWIDTH", "80")],
    );
    assert!(
        man.contains("parapet") && man.contains("SYNOPSIS") && man.contains("top"),
        "man parapet:\n{man}"
    );
    let man = run_env("man", &["parapet-top"], &[("MANPAGER", "cat")]);
    assert!(man.contains("--once"), "man parapet-top:\n{man}");
    let unit_path = "/lib/systemd/system/parapetd.service";
    let unit = std::fs::read_to_string(unit_path).unwrap();
    assert!(unit.contains("ExecStart=/usr/bin/parapetd"), "{unit}");
    let verify = run("systemd-analyze", &["verify", unit_path]);
    assert!(
        verify.status.success() && verify.stderr.is_empty(),
        "systemd-analyze verify {unit_path}: {}",
        String::from_utf8_lossy(&verify.stderr)
    );
    service::run_the_installed_service(&unit);
    // The state parapetd would keep goes with a purge too.
    std::fs::create_dir_all("/var/lib/parapet").unwrap();
    std::fs::write("/var/lib/parapet/journal", b"x").unwrap();
    ok("dpkg", &["--purge", "parapet"]);
    assert!(!installed());
    // Unknown to dpkg, or known only as not installed (no config-files).
    let q = run("dpkg-query", &["-W", "-f=${db:Status-Status}", "parapet"]);
    assert!(
        !q.status.success() || q.stdout == b"not-installed",
        "{}",
        String::from_utf8_lossy(&q.stdout)
    );
    for f in INSTALLED
        .iter()
        .chain(&["/etc/parapet", "/var/lib/parapet", "/usr/share/doc/parapet"])
    {
        assert!(!Path::new(f).exists(), "{f} left after purge");
    }
}

/// The runtime directory the unit's `RuntimeDirectory=parapet` makes.
const RUNTIME_DIR: &str = "/run/parapet";

/// The installed daemon run as its unit runs it, scraped, enforcing.
mod service {
    use super::common::prometheus::{self, query, spawn_in, wait_for};
    use super::common::{in_netns, testbed, B_ADDR};
    use super::{ok, RUNTIME_DIR};
    use std::net::{Ipv4Addr, UdpSocket};
    use std::os::unix::fs::PermissionsExt;
    use std::process::Command;
    use std::time::{Duration, Instant};

    /// The datagrams of each kind the test sends.
    const SENT: usize = 29;
    /// A port the test's rule 5 accepts and one its rule 6 drops (the
    /// default ruleset's four rules come first).
    const ACCEPTED_PORT: u16 = 5555;
    const DROPPED_PORT: u16 = 5556;
    /// The documented metrics address (docs/operations.md).
    const METRICS: &str = "127.0.0.1:9464";
    const RULES: &str = "/etc/parapet/rules";

    /// The values of the unit's `KEY=` lines, in order, without systemd's
    /// `+`/`-` prefixes.
    fn unit_values(unit: &str, key: &str) -> Vec<String> {
        unit.lines()
            .filter_map(|l| l.strip_prefix(key)?.strip_prefix('='))
            .map(|v| v.trim_start_matches(['+', '-']).to_string())
            .collect()
    }

    /// A unit command line run through the shell, as systemd would (it
    /// quotes like a shell), asserting success.
    fn sh(cmd: &str) {
        let o = Command::new("sh").args(["-c", cmd]).output().unwrap();
        assert!(
            o.status.success(),
            "{cmd}: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    }

    /// `/usr/bin/parapet ARGS` on the default socket, as documented.
    fn parapet(args: &[&str]) -> String {
        ok("/usr/bin/parapet", args)
    }

    fn stats() -> serde_json::Value {
        serde_json::from_str(&parapet(&["stats", "--json"])).unwrap()
    }

    /// Sockets in namespace `ns` receiving on `ports`.
    fn receivers(ns: &str, ports: &[u16]) -> Vec<UdpSocket> {
        in_netns(ns, || {
            ports
                .iter()
                .map(|p| {
                    let s = UdpSocket::bind(("0.0.0.0", *p)).unwrap();
                    s.set_read_timeout(Some(Duration::from_millis(300)))
                        .unwrap();
                    s
                })
                .collect()
        })
    }

    /// Datagrams that arrive at `s` until it has been quiet for 300 ms.
    fn drain(s: &UdpSocket) -> usize {
        let mut buf = [0u8; 64];
        let mut n = 0;
        while n < 10_000 && s.recv(&mut buf).is_ok() {
            n += 1;
        }
        n
    }

    fn send(ns: &str, port: u16, n: usize, gap: Duration) {
        in_netns(ns, || {
            let s = UdpSocket::bind("0.0.0.0:0").unwrap();
            for _ in 0..n {
                s.send_to(b"e2e", (Ipv4Addr::from(B_ADDR), port)).unwrap();
                std::thread::sleep(gap);
            }
        });
    }

    pub fn run_the_installed_service(unit: &str) {
        let bed = testbed("deb", &[]);
        let dir = tempfile::tempdir().unwrap();
        // What systemd makes before starting the unit: RuntimeDirectory=
        // and StateDirectory= with their modes.
        for (d, mode) in [(RUNTIME_DIR, 0o750), ("/var/lib/parapet", 0o700)] {
            std::fs::create_dir_all(d).unwrap();
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        for pre in unit_values(unit, "ExecStartPre") {
            sh(&pre);
        }
        let start = unit_values(unit, "ExecStart");
        assert_eq!(start.len(), 1, "{start:?}");
        let mut argv: Vec<&str> = start[0].split_whitespace().collect();
        argv.extend(["--metrics", METRICS]);
        let log = dir.path().join("parapetd.log");
        let mut daemon = spawn_in(&bed.b, argv[0], &argv[1..], &log);
        let t0 = Instant::now();
        while !Command::new("/usr/bin/parapet")
            .arg("stats")
            .output()
            .unwrap()
            .status
            .success()
        {
            assert!(
                daemon.0.try_wait().unwrap().is_none() && t0.elapsed() < Duration::from_secs(30),
                "the installed parapetd did not come up: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        // It applied the packaged default (--config) at start.
        assert_eq!(stats()["rules"], 4, "{}", stats());

        // The administrator's rules go after the default ones; `systemctl
        // reload` runs ExecReload=: the check, then SIGHUP.
        let default = std::fs::read_to_string(RULES).unwrap();
        let mine = format!(
            "-A INPUT -p udp --dport {ACCEPTED_PORT} -m comment --comment \"e2e probe\" -j ACCEPT\n\
             -A INPUT -p udp --dport {DROPPED_PORT} -m comment --comment \"e2e blocked\" -j DROP\n\
             COMMIT\n"
        );
        let edited = default.replacen("COMMIT\n", &mine, 1);
        assert_ne!(edited, default, "no COMMIT line in {RULES}");
        std::fs::write(RULES, edited).unwrap();
        let generation = stats()["generation"].as_u64().unwrap();
        for reload in unit_values(unit, "ExecReload") {
            sh(&reload.replace("$MAINPID", &daemon.0.id().to_string()));
        }
        let t0 = Instant::now();
        while stats()["generation"].as_u64() == Some(generation) {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "SIGHUP did not re-apply {RULES}: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        assert_eq!(stats()["rules"], 6);
        parapet(&["attach", &bed.vb, "--hook", "xdp"]);

        // Enforced: the receiver gets exactly the accepted datagrams.
        let rx = receivers(&bed.b, &[ACCEPTED_PORT, DROPPED_PORT]);
        send(&bed.a, ACCEPTED_PORT, SENT, Duration::ZERO);
        send(&bed.a, DROPPED_PORT, SENT, Duration::ZERO);
        assert_eq!(drain(&rx[0]), SENT, "accepted datagrams received");
        assert_eq!(drain(&rx[1]), 0, "dropped datagrams received");

        // Scraped: a real Prometheus reads the rules' counters and the
        // XDP hook's drops on the veth from the installed daemon.
        let _prom = prometheus::start(&bed.b, dir.path(), METRICS);
        let prom_log = dir.path().join("prometheus.log");
        let probe = "parapet_rule_packets_total{job=\"parapet\",rule=\"5\",comment=\"e2e probe\"}";
        wait_for(
            &bed.b,
            probe,
            SENT as f64,
            Duration::from_secs(60),
            &prom_log,
        );
        assert_eq!(query(&bed.b, probe), Some(SENT as f64));
        assert_eq!(
            query(
                &bed.b,
                "parapet_rule_packets_total{rule=\"6\",chain=\"filter/INPUT\"}"
            ),
            Some(SENT as f64)
        );
        let xdp = format!(
            "parapet_hook_dropped_total{{hook=\"xdp\",interface=\"{}\"}}",
            bed.vb
        );
        assert_eq!(query(&bed.b, &xdp), Some(SENT as f64));
        assert_eq!(
            query(&bed.b, "parapet_build_info{job=\"parapet\"}"),
            Some(1.0)
        );

        // `parapet top` shows the rule the traffic hits now, first.
        let a = bed.a.clone();
        let sender =
            std::thread::spawn(move || send(&a, ACCEPTED_PORT, 60, Duration::from_millis(15)));
        let top = parapet(&["top", "--once", "--json", "--interval", "2"]);
        sender.join().unwrap();
        let top: serde_json::Value = serde_json::from_str(&top).unwrap();
        assert_eq!(top["rules"][0]["rule"], 5, "{top}");
        assert!(
            top["rules"][0]["text"]
                .as_str()
                .is_some_and(|t| t.contains("e2e probe")),
            "{top}"
        );
        assert!(
            top["rules"][0]["packets_per_s"].as_f64().unwrap() > 5.0,
            "{top}"
        );

        // Stopped as the unit stops it: SIGTERM, a clean exit.
        // SAFETY: kill(2) on the daemon's pid, which this test spawned and
        // has not reaped.
        unsafe { libc::kill(daemon.0.id() as i32, libc::SIGTERM) };
        let t0 = Instant::now();
        let status = loop {
            if let Some(s) = daemon.0.try_wait().unwrap() {
                break s;
            }
            assert!(t0.elapsed() < Duration::from_secs(60), "no exit on SIGTERM");
            std::thread::sleep(Duration::from_millis(100));
        };
        assert!(
            status.success(),
            "parapetd exited {status}: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    }
}
