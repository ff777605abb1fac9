//! `parapet lint`'s findings beyond unreachable and redundant rules (empty
//! matches, chains never reached, chains that always return, correlation
//! warnings) and `--explain`, with known answers on a hand-made ruleset;
//! every explanation's `parapet trace` command is run and must show what
//! the finding says.

use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// Rule ids are file positions: 1 on line 8, ..., 8 on line 15.
const RULES: &str = "*filter
:INPUT DROP [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:NEVER - [0:0]
:ONLYLOG - [0:0]
:LOST - [0:0]
-A INPUT -p tcp --dport 22 -m multiport ! --dports 20:30 -j ACCEPT
-A INPUT -j ONLYLOG
-A INPUT -p tcp -j LOST
-A INPUT -s 10.0.0.0/8 -p tcp --dport 1:1000 -j DROP
-A INPUT -p tcp --dport 80:2000 -j ACCEPT
-A ONLYLOG -j LOG --log-prefix seen
-A LOST -p udp -j ACCEPT
-A NEVER -j ACCEPT
COMMIT
";

fn parapet(args: &[&str]) -> (i32, String) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new(env!("CARGO_BIN_EXE_parapet"))
        .args(args)
        .current_dir(root)
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

fn lint_json(path: &str, extra: &[&str]) -> (i32, Value) {
    let mut args = vec!["lint", path, "--json"];
    args.extend_from_slice(extra);
    let (code, out) = parapet(&args);
    (code, serde_json::from_str(&out).expect(&out))
}

/// (kind, rule) of every entry of a JSON list.
fn kinds(list: &Value) -> Vec<(String, u64)> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["kind"].as_str().unwrap().into(),
                f["rule"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// Runs an explanation's `trace` command (its arguments after `parapet`).
fn run_trace(f: &Value) -> String {
    let cmd = f["explain"]["trace"].as_str().expect("a trace command");
    let rest = cmd.strip_prefix("parapet trace ").unwrap();
    let (head, packet) = rest.split_once(" --packet ").unwrap();
    let packet = packet.trim_matches('\'');
    let mut args = vec!["trace"];
    args.extend(head.split(' '));
    args.extend(["--packet", packet]);
    parapet(&args).1
}

fn fixture() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("findings.rules"), RULES).unwrap();
    dir
}

#[test]
fn known_findings_and_warnings() {
    let dir = fixture();
    let path = dir.path().join("findings.rules");
    let path = path.to_str().unwrap();
    let (code, json) = lint_json(path, &["--explain"]);
    assert_eq!(code, 1, "{json}");
    assert_eq!(
        kinds(&json["findings"]),
        [
            ("empty-match".into(), 1),
            ("unreachable".into(), 7),
            ("unreachable".into(), 8),
            ("unreached-chain".into(), 8),
        ]
    );
    let findings = json["findings"].as_array().unwrap();
    assert_eq!(findings[0]["explain"]["empty_fields"][0], "dport");
    assert_eq!(findings[3]["chain"], "filter/NEVER");
    assert_eq!(
        kinds(&json["warnings"]),
        [
            ("returning-chain".into(), 2),
            ("returning-chain".into(), 3),
            ("correlation".into(), 5),
        ]
    );
    let warnings = json["warnings"].as_array().unwrap();
    assert_eq!(warnings[0]["chain"], "filter/ONLYLOG");
    assert_eq!(warnings[1]["chain"], "filter/LOST");
    // The correlation: rule 5 (ACCEPT tcp 80-2000) shares 10/8 tcp 80-1000
    // with rule 4 (DROP), which decides those packets first.
    let c = &warnings[2];
    assert_eq!(c["by"][0], 4);
    let b = &c["explain"]["boxes"][0];
    assert_eq!(
        (b["saddr"].as_str(), b["dport"].as_str()),
        (Some("10.0.0.0/8"), Some("80-1000"))
    );
    let trace = run_trace(c);
    assert!(trace.contains("decided by rule 4"), "{trace}");
    // Without correlations asked for, none.
    let (_, json) = lint_json(path, &["--correlations", "0"]);
    assert_eq!(kinds(&json["warnings"]).len(), 2);
}

#[test]
fn explain_shows_the_shadowing_rule() {
    let (code, json) = lint_json("examples/lint.rules", &["--explain"]);
    assert_eq!(code, 1);
    let f = &json["findings"][0];
    assert_eq!(
        (f["kind"].as_str(), f["rule"].as_u64()),
        (Some("unreachable"), Some(3))
    );
    // The responsible rules with their lines: rule 3 itself and rule 2.
    let rules: Vec<(u64, u64)> = f["explain"]["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["rule"].as_u64().unwrap(), r["line"].as_u64().unwrap()))
        .collect();
    assert_eq!(rules, [(3, 8), (2, 7)]);
    let trace = run_trace(f);
    assert!(trace.contains("decided by rule 2"), "{trace}");
    // The redundant rule's witness is decided by the rule itself.
    let r = &json["findings"][2];
    assert_eq!(r["kind"], "redundant");
    let trace = run_trace(r);
    assert!(trace.contains("decided by rule 8"), "{trace}");
    // Text: FILE:LINE of every rule, and the command.
    let (_, text) = parapet(&["lint", "examples/lint.rules", "--explain"]);
    assert!(text.contains("rule 2 at examples/lint.rules:7"), "{text}");
    assert!(
        text.contains("confirm: parapet trace examples/lint.rules --chain filter/INPUT --packet '"),
        "{text}"
    );
}

/// Sets: membership is a field of its own, free of the others, so findings
/// hold whatever the sets hold; a rule that needs a member of a set that is
/// empty now is a warning that says it depends on the set's contents.
const SETS: &str = "table inet filter {
  set banned { type ipv4_addr; }
  set friends { type ipv4_addr; elements = { 192.0.2.1 } }
  chain input {
    type filter hook input priority 0; policy drop;
    ip saddr @friends accept
    ip saddr 192.0.2.1 drop
    ip saddr @banned drop
    ip saddr @banned tcp dport 22 accept
    tcp dport 22 ip saddr 10.0.0.0/8 tcp dport 80 accept
  }
}
";

#[test]
fn sets_are_fields_and_empty_sets_are_warned_of() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sets.nft");
    std::fs::write(&path, SETS).unwrap();
    let (code, json) = lint_json(path.to_str().unwrap(), &["--explain"]);
    assert_eq!(code, 1, "{json}");
    // Rule 4 is shadowed by rule 3 whatever @banned holds; rule 2 is not
    // (the set may lose 192.0.2.1), but it and rule 3 drop before the
    // policy drop; rule 5 matches nothing.
    assert_eq!(
        kinds(&json["findings"]),
        [
            ("redundant".into(), 2),
            ("redundant".into(), 3),
            ("unreachable".into(), 4),
            ("empty-match".into(), 5)
        ]
    );
    assert_eq!(json["findings"][2]["by"][0], 3);
    assert!(json["findings"][2].get("depends_on_sets").is_none());
    let warnings = json["warnings"].as_array().unwrap();
    let empty: Vec<&Value> = warnings
        .iter()
        .filter(|w| w["kind"] == "empty-set")
        .collect();
    assert_eq!(empty.len(), 2, "{json}");
    assert_eq!(
        (empty[0]["rule"].as_u64(), empty[1]["rule"].as_u64()),
        (Some(3), Some(4))
    );
    assert_eq!(empty[0]["depends_on_sets"][0], "banned");
    // The correlation of rule 2 with rule 1 shares 192.0.2.1 in @friends:
    // the witness stands for a member, and says so.
    let c = warnings
        .iter()
        .find(|w| w["kind"] == "correlation" && w["rule"] == 2)
        .expect("rule 2 correlates with rule 1");
    assert_eq!(c["by"][0], 1);
    assert_eq!(c["explain"]["witness_sets"][0], "in @friends");
    assert!(c["explain"]["witness"]
        .as_str()
        .unwrap()
        .contains("192.0.2.1"));
    let trace = run_trace(c);
    assert!(trace.contains("decided by rule 1"), "{trace}");
}
