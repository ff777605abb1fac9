//! The examples in docs/cli.md run, and print what the doc shows.
//!
//! Every fenced block line `$ $P …` is run with bash (`P` = this build's
//! binary, in the repository root); the lines after it, up to the next `$`
//! line or the end of the block, must be its output (stdout and stderr).
//! Lines starting with `# parapet` or `# ip ` are root-only examples and are
//! not run.

use std::path::Path;
use std::process::Command;

#[test]
fn cli_doc_examples_print_what_the_doc_shows() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let doc = std::fs::read_to_string(root.join("docs/cli.md")).unwrap();
    let mut in_block = false;
    let mut cases: Vec<(String, Vec<String>)> = Vec::new();
    for line in doc.lines() {
        if line.starts_with("```") {
            in_block = !in_block;
            // Output never runs across blocks: start each with no command.
            cases.push((String::new(), Vec::new()));
            continue;
        }
        if !in_block {
            continue;
        }
        if let Some(cmd) = line.strip_prefix("$ ") {
            cases.push((cmd.to_string(), Vec::new()));
        } else if line.starts_with("# parapet") || line.starts_with("# ip ") {
            // A root-only example: neither run nor compared.
            cases.push((String::new(), Vec::new()));
        } else if let Some((_, out)) = cases.last_mut() {
            out.push(line.to_string());
        }
    }
    let cases: Vec<_> = cases
        .into_iter()
        .filter(|(c, _)| c.contains("$P"))
        .collect();
    assert!(cases.len() >= 6, "docs/cli.md lost its examples");
    let tmp = tempfile::tempdir().unwrap();
    // Files the examples write go to a scratch directory, not the repo.
    let scratch = [
        "bad.rules",
        "router.rules",
        "mss.rules",
        "bl.ipset",
        "weekend.rules",
    ];
    let in_tmp = |name: &str| tmp.path().join(name).display().to_string();
    for (cmd, want) in cases {
        let cmd = scratch
            .iter()
            .fold(cmd.to_string(), |c, f| c.replace(f, &in_tmp(f)));
        let out = Command::new("bash")
            .arg("-c")
            .arg(format!("cd {} && {} 2>&1", root.display(), cmd))
            .env("P", env!("CARGO_BIN_EXE_parapet"))
            .output()
            .unwrap();
        let got = scratch
            .iter()
            .fold(String::from_utf8_lossy(&out.stdout).into_owned(), |g, f| {
                g.replace(&in_tmp(f), f)
            });
        let got: Vec<&str> = got.lines().collect();
        // Build times vary from run to run, and the classifier's internals
        // (node counts, memory) move whenever it is tuned: compare those
        // lines by their label only.
        let label = |l: &str| -> String { l.split(':').next().unwrap_or("").to_string() };
        for (g, w) in got.iter().zip(want.iter()) {
            if w.contains(" ms")
                || w.contains("build:")
                || w.starts_with("  partition ")
                || w.starts_with("  memory:")
                || w.starts_with("  worst case")
            {
                assert_eq!(
                    label(g),
                    label(w),
                    "docs/cli.md: `{cmd}` prints\n{}\n",
                    got.join("\n")
                );
                continue;
            }
            assert_eq!(g, w, "docs/cli.md: `{cmd}` prints\n{}\n", got.join("\n"));
        }
        assert_eq!(
            got.len(),
            want.len(),
            "docs/cli.md: `{cmd}` prints\n{}\n",
            got.join("\n")
        );
    }
}
