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
    let mut args = vec!["--verdict"];
    args.extend_from_slice(extra);
    assert_classified("", rules, input, &args, engines, want);
}

/// Runs `parapet classify RULES INPUT ARGS… --engine E` for each engine in
/// `engines` and asserts that every one prints `want`; `what` names the
/// case in the message.
pub fn assert_classified(
    what: &str,
    rules: &Path,
    input: &Path,
    args: &[&str],
    engines: &[&str],
    want: &str,
) {
    for engine in engines {
        let mut all = vec!["classify", s(rules), s(input)];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--engine", engine]);
        let case = if what.is_empty() {
            format!("engine {engine}")
        } else {
            format!("{what}, engine {engine}")
        };
        assert_eq!(stdout(&parapet(&all)), want, "{case}");
    }
}

/// The files of a `classify --sets` case, written by [`assert_set_verdicts`].
pub struct SetCase {
    pub rules: PathBuf,
    pub trace: PathBuf,
    pub ipset: PathBuf,
}

/// Writes `ipset` (an `ipset save` file), `rules` and a text `trace` to
/// `dir` as `NAME.ipset`, `NAME.rules` and `NAME.trace`, and asserts that
/// `classify --verdict --sets NAME.ipset` prints `want` with the linear
/// engine and with auto.
pub fn assert_set_verdicts(
    dir: &Path,
    name: &str,
    [ipset, rules, trace]: [&str; 3],
    want: &str,
) -> SetCase {
    let case = SetCase {
        rules: write(dir, &format!("{name}.rules"), rules),
        trace: write(dir, &format!("{name}.trace"), trace),
        ipset: write(dir, &format!("{name}.ipset"), ipset),
    };
    assert_verdicts(
        &case.rules,
        &case.trace,
        &["--sets", s(&case.ipset)],
        &["linear", "auto"],
        want,
    );
    case
}

/// The `decided by …` line of `parapet trace RULES --packet PKT EXTRA…`
/// ("" when there is none).
pub fn decided(rules: &Path, pkt: &str, extra: &[&str]) -> String {
    let mut args = vec!["trace", s(rules), "--packet", pkt];
    args.extend_from_slice(extra);
    let out = stdout(&parapet(&args));
    out.lines()
        .find(|l| l.starts_with("decided by"))
        .unwrap_or_default()
        .to_string()
}

/// Writes `frames` (Ethernet) as a pcap capture to `dir/name`: the global
/// header (microsecond magic, v2.4, Ethernet), then one record a frame.
pub fn write_pcap(dir: &Path, name: &str, frames: &[Vec<u8>]) -> PathBuf {
    let mut pcap = Vec::new();
    pcap.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    pcap.extend_from_slice(&2u16.to_le_bytes());
    pcap.extend_from_slice(&4u16.to_le_bytes());
    pcap.extend_from_slice(&[0; 8]);
    pcap.extend_from_slice(&65535u32.to_le_bytes());
    pcap.extend_from_slice(&1u32.to_le_bytes());
    for f in frames {
        pcap.extend_from_slice(&[0; 8]);
        pcap.extend_from_slice(&(f.len() as u32).to_le_bytes());
        pcap.extend_from_slice(&(f.len() as u32).to_le_bytes());
        pcap.extend_from_slice(f);
    }
    let p = dir.join(name);
    std::fs::write(&p, pcap).unwrap();
    p
}
