//! `parapet diff --rules` and `--ignore`, with known answers on two
//! hand-made rulesets that give every packet the same verdict.

use serde_json::Value;
use std::process::Command;

const A: &str = "*filter
:INPUT DROP [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -p tcp --dport 22 -j LOG --log-prefix ssh
-A INPUT -s 10.0.0.0/8
-A INPUT -p tcp --dport 22 -j ACCEPT
-A INPUT -p tcp --dport 20:30 -j ACCEPT
COMMIT
";

/// A with rules 3 and 4 swapped, the LOG rule widened to port 23 and the
/// counter-only rule narrowed to 10.0.0.0/9.
const B: &str = "*filter
:INPUT DROP [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -p tcp --dport 22:23 -j LOG --log-prefix ssh
-A INPUT -s 10.0.0.0/9
-A INPUT -p tcp --dport 20:30 -j ACCEPT
-A INPUT -p tcp --dport 22 -j ACCEPT
COMMIT
";

fn diff(extra: &[&str]) -> (i32, Value) {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.rules"), dir.path().join("b.rules"));
    std::fs::write(&a, A).unwrap();
    std::fs::write(&b, B).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_parapet"))
        .args(["diff", a.to_str().unwrap(), b.to_str().unwrap(), "--json"])
        .args(extra)
        .output()
        .unwrap();
    let json = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code().unwrap(), json)
}

/// Each difference as (a, b, nonterminal kind and rule and side).
fn summary(json: &Value) -> Vec<(u64, u64, String)> {
    json["differences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            let n = &d["nonterminal"];
            let what = if n.is_null() {
                String::new()
            } else {
                format!(
                    "{} {} in {}",
                    n["kind"].as_str().unwrap(),
                    n["rule"],
                    n["in"].as_str().unwrap()
                )
            };
            (d["a"].as_u64().unwrap(), d["b"].as_u64().unwrap(), what)
        })
        .collect()
}

#[test]
fn rules_and_ignore() {
    // Verdicts alone: equivalent.
    let (code, json) = diff(&[]);
    assert_eq!((code, json["equivalent"].as_bool()), (0, Some(true)));
    // By rule: ports 20-21 and 23-30 move from rule 4 to rule 3 (port 22
    // stays with rule id 3), the counter rule 2 matches 10.128.0.0/9 in A
    // only, the LOG rule 1 port 23 in B only (a and b: the deciding rules
    // of the witness).
    let (code, json) = diff(&["--rules"]);
    assert_eq!(code, 1);
    assert_eq!(
        summary(&json),
        [
            (4, 3, String::new()),
            (0, 0, "counter 2 in a".into()),
            (4, 3, "log 1 in b".into()),
        ]
    );
    let d = &json["differences"];
    assert!(d[0]["witness"].as_str().unwrap().contains(":20 "), "{d}");
    assert!(
        d[1]["witness"].as_str().unwrap().contains("10.128.0.0"),
        "{d}"
    );
    assert!(d[2]["witness"].as_str().unwrap().contains(":23 "), "{d}");
    // Ignoring LOG and counter rules leaves the moved packets.
    let (code, json) = diff(&["--rules", "--ignore", "logs,counters"]);
    assert_eq!((code, summary(&json)), (1, vec![(4, 3, String::new())]));
    let (_, json) = diff(&["--rules", "--ignore", "logs"]);
    assert_eq!(summary(&json).len(), 2);
    // A bad --ignore value is an error.
    assert_eq!(diff(&["--rules", "--ignore", "marks"]).0, 2);
}
