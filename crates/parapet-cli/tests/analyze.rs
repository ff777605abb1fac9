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
