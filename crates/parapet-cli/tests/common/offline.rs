//! The `parapet` binary run as a user runs it, offline (no daemon, no
//! namespace): the helpers the command-line tests share.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs `parapet ARGS` and waits for it.
pub fn parapet(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_parapet"))
        .args(args)
        .output()
        .expect("run parapet")
}

/// The standard output of a run that must have succeeded.
pub fn stdout(o: &Output) -> String {
    assert!(
        o.status.success(),
        "parapet failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).unwrap()
}

/// Writes `text` to `dir/name` and returns the path.
pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// A path as a command-line argument.
pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Runs `parapet classify RULES INPUT --verdict EXTRA… --engine E` for each
/// engine in `engines` and asserts that every one prints `want`: the
/// linear engine is the specification, the others must agree with it.
pub fn assert_verdicts(rules: &Path, input: &Path, extra: &[&str], engines: &[&str], want: &str) {
    for engine in engines {
        let mut args = vec!["classify", s(rules), s(input), "--verdict"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--engine", engine]);
        assert_eq!(stdout(&parapet(&args)), want, "engine {engine}");
    }
}
