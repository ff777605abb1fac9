//! `parapet lint` and `parapet diff`: exit codes and JSON as
//! `conventions.md` fixes them, on the files in examples/.

use std::path::Path;
use std::process::Command;

fn run(args: &[&str]) -> (i32, serde_json::Value, String) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new(env!("CARGO_BIN_EXE_parapet"))
        .args(args)
        .current_dir(root)
        .output()
        .unwrap();
    let json = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (
        out.status.code().unwrap(),
        json,
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn lint_exit_codes_and_json() {
    let (code, json, _) = run(&["lint", "examples/lint.rules", "--json"]);
    assert_eq!(code, 1);
    let kinds: Vec<(String, u64)> = json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["kind"].as_str().unwrap().into(),
                f["rule"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("unreachable".into(), 3),
            ("unreachable".into(), 6),
            ("redundant".into(), 8)
        ]
    );
    assert!(json["findings"][2]["witness"]
        .as_str()
        .unwrap()
        .contains(":6000"));
    let (code, json, _) = run(&["lint", "examples/host.rules", "--json"]);
    assert_eq!((code, json["findings"].as_array().unwrap().len()), (0, 0));
    // Errors exit 2: a missing file.
    assert_eq!(run(&["lint", "examples/missing.rules", "--json"]).0, 2);
    // A ruleset with a named set is analysed with the set's membership as a
    // free field: the final `log ... drop` before the policy drop is
    // redundant whatever the set holds.
    let (code, json, err) = run(&["lint", "examples/home.nft", "--json"]);
    assert_eq!(code, 1, "{err}");
    let f = &json["findings"][0];
    assert_eq!(
        (f["kind"].as_str(), f["rule"].as_u64()),
        (Some("redundant"), Some(9))
    );
}

#[test]
fn diff_exit_codes_and_json() {
    let (code, json, _) = run(&[
        "diff",
        "examples/host.rules",
        "examples/host.rules",
        "--json",
    ]);
    assert_eq!((code, json["equivalent"].as_bool()), (0, Some(true)));
    let (code, json, _) = run(&[
        "diff",
        "examples/host.rules",
        "examples/host_edited.rules",
        "--json",
    ]);
    assert_eq!((code, json["equivalent"].as_bool()), (1, Some(false)));
    for d in json["differences"].as_array().unwrap() {
        assert_eq!(d["a_verdict"], "DROP");
        assert_eq!(
            (d["b"].as_u64(), d["b_verdict"].as_str()),
            (Some(5), Some("ACCEPT"))
        );
        // The witness is a `trace --packet` string: trace confirms it.
        let w = d["witness"].as_str().unwrap();
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let trace = |file: &str| {
            let out = Command::new(env!("CARGO_BIN_EXE_parapet"))
                .args(["trace", file, "--packet", w])
                .current_dir(&root)
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        assert!(trace("examples/host.rules").contains("DROP"));
        assert!(
            trace("examples/host_edited.rules").contains("decided by rule 5"),
            "{}",
            trace("examples/host_edited.rules")
        );
    }
    assert_eq!(
        run(&["diff", "examples/host.rules", "examples/missing.rules"]).0,
        2
    );
    // --chain per side: INPUT against itself under another spelling is
    // equivalent; INPUT (policy DROP) against OUTPUT (ACCEPT) is not.
    let mapped = |map: &str| {
        run(&[
            "diff",
            "examples/host.rules",
            "examples/host.rules",
            "--chain",
            map,
            "--json",
        ])
    };
    let (code, json, _) = mapped("A:INPUT=B:ip/filter/INPUT");
    assert_eq!((code, json["equivalent"].as_bool()), (0, Some(true)));
    let (code, json, _) = mapped("A:INPUT=B:OUTPUT");
    assert_eq!((code, json["equivalent"].as_bool()), (1, Some(false)));
    assert!(json["differences"]
        .as_array()
        .unwrap()
        .iter()
        .all(|d| d["b_verdict"] != d["a_verdict"]));
    // A tight budget leaves regions unproven: never a wrong "equivalent".
    // (The set against itself is proven equivalent without any search, as
    // every rule is common to both; against its reversal, where all but
    // one rule changed place, every rule's box is compared.)
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let text = std::fs::read_to_string(root.join("examples/synthetic_2k.cb")).unwrap();
    let reversed: Vec<&str> = text.lines().rev().collect();
    let path = std::env::temp_dir().join(format!("parapet-reversed-{}.cb", std::process::id()));
    std::fs::write(&path, reversed.join("\n") + "\n").unwrap();
    let (same, _, _) = run(&[
        "diff",
        "examples/synthetic_2k.cb",
        "examples/synthetic_2k.cb",
        "--budget",
        "1",
    ]);
    let (code, json, _) = run(&[
        "diff",
        "examples/synthetic_2k.cb",
        path.to_str().unwrap(),
        "--budget",
        "1",
        "--json",
    ]);
    std::fs::remove_file(&path).unwrap();
    assert_eq!(same, 0);
    assert_eq!(code, 2);
    assert_eq!(json["complete"].as_bool(), Some(false));
    assert_eq!(json["equivalent"].as_bool(), Some(false));
}

/// A rule moved out of a chain that starts with a RETURN to right after
/// the jump into it (and the chain's last rule edited): the moved rule's
/// entry is the same in both lists (the jump matches every packet) and in
/// the same order among the common ones, but A's RETURN skips it and B's
/// does not. The packets of the RETURN's source block to TCP port 22
/// differ (A: the policy accepts them; B: dropped); matching the RETURNs
/// by their match alone, without checking what they skip, misses them.
#[test]
fn diff_sees_a_rule_moved_out_of_a_returning_chain() {
    let dir = std::env::temp_dir();
    let write = |name: &str, rules: &str| {
        let path = dir.join(format!("parapet-moved-{}-{name}.rules", std::process::id()));
        let text = format!("*filter\n:INPUT ACCEPT [0:0]\n:C - [0:0]\n{rules}COMMIT\n");
        std::fs::write(&path, text).unwrap();
        path
    };
    let a = write(
        "a",
        "-A INPUT -j C\n-A C -s 10.0.0.0/8 -j RETURN\n\
         -A C -p tcp -m tcp --dport 22 -j DROP\n-A C -p udp -m udp --dport 53 -j DROP\n",
    );
    let b = write(
        "b",
        "-A INPUT -j C\n-A INPUT -p tcp -m tcp --dport 22 -j DROP\n\
         -A C -s 10.0.0.0/8 -j RETURN\n-A C -p udp -m udp --dport 54 -j DROP\n",
    );
    let (code, json, err) = run(&["diff", a.to_str().unwrap(), b.to_str().unwrap(), "--json"]);
    std::fs::remove_file(&a).unwrap();
    std::fs::remove_file(&b).unwrap();
    assert_eq!(code, 1, "{json} {err}");
    let moved: Vec<&serde_json::Value> = json["differences"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["witness"].as_str().unwrap().starts_with("tcp "))
        .collect();
    assert!(!moved.is_empty(), "{json}");
    for d in &moved {
        assert_eq!(
            (d["a_verdict"].as_str(), d["b_verdict"].as_str()),
            (Some("ACCEPT"), Some("DROP")),
            "{d}"
        );
        let w = d["witness"].as_str().unwrap();
        assert!(w.contains(" 10.") && w.contains(":22 "), "{w}");
    }
    // 2^24 sources times 2^32 destinations (addresses are always analysed;
    // no other field but protocol and port is).
    let points: f64 = moved
        .iter()
        .map(|d| d["points_log2"].as_f64().unwrap().exp2())
        .sum();
    assert!((points.log2() - 56.0).abs() < 0.01, "{points}");
}
