//! The Debian package installs, works from the installed paths, and
//! purges without leftovers: `dpkg -i target/deb/parapet_VERSION_ARCH.deb`,
//! then `/usr/bin/parapet check /etc/parapet/rules`, `/usr/bin/parapetd
//! --version`, the man page, completions and unit in place, the default
//! ruleset a conffile; then `dpkg --purge` and nothing of it remains.
//!
//! It reuses the package `make deb` built (a release build takes minutes;
//! `make test` runs `make deb` first as root) and fails when that package
//! is missing or older than the sources. Needs root (`#[ignore = "needs
//! root"]`); refuses to run over a parapet package installed otherwise.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::SystemTime;

const INSTALLED: [&str; 9] = [
    "/usr/bin/parapet",
    "/usr/bin/parapetd",
    "/etc/parapet/rules",
    "/etc/fail2ban/action.d/parapet.py",
    "/lib/systemd/system/parapetd.service",
    "/usr/share/man/man8/parapet.8.gz",
    "/usr/share/man/man8/parapet-ban.8.gz",
    "/usr/share/bash-completion/completions/parapet",
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

fn installed() -> bool {
    run("dpkg-query", &["-W", "-f=${Status}", "parapet"])
        .stdout
        .starts_with(b"install ok")
}

/// Purges the package when the test ends, also on failure.
struct Purge;

impl Drop for Purge {
    fn drop(&mut self) {
        let _ = run("dpkg", &["--purge", "parapet"]);
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
    let unit = std::fs::read_to_string("/lib/systemd/system/parapetd.service").unwrap();
    assert!(unit.contains("ExecStart=/usr/bin/parapetd"), "{unit}");
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
