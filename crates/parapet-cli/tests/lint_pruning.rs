//! Issue 16, item 4: the rules `lint` finds (unreachable, redundant),
//! removed from the file, leave every packet's verdict unchanged, and
//! every packet they did not decide is decided by the same rule — on
//! ClassBench traces, classified by the linear engine (the reference).
//! The built-in ClassBench set (`examples/synthetic_2k.cb`, every rule
//! ACCEPT) always runs; with `../shared/data/classbench`, acl1/fw1/ipc1
//! 1k with every second rule DROP (`bench/analysis/mixed_verdicts.sh`)
//! against 20,000 packets of their family's 10k trace.

mod common;

use common::offline::{parapet, s, write};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `parapet classify --engine linear --verdict`: (rule id, verdict) per packet.
fn classified(rules: &Path, trace: &Path) -> Vec<(u32, String)> {
    let out = parapet(&[
        "classify",
        s(rules),
        s(trace),
        "--engine",
        "linear",
        "--verdict",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let (id, verdict) = l.split_once('\t').expect("id TAB verdict");
            (id.parse().unwrap(), verdict.to_string())
        })
        .collect()
}

/// Lints `rules`, removes every finding's line, and compares the two files'
/// decisions of `trace`. Returns (findings, packets compared).
fn prune_and_compare(dir: &Path, rules: &Path, trace: &Path) -> (usize, usize) {
    let out = parapet(&["lint", s(rules), "--json", "--correlations", "0"]);
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "lint {}: {}",
        rules.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["complete"], true, "{}: not proven", rules.display());
    let findings = report["findings"].as_array().unwrap();
    let lines: BTreeSet<u64> = findings
        .iter()
        .map(|f| f["line"].as_u64().unwrap())
        .collect();
    let removed: BTreeSet<u32> = findings
        .iter()
        .map(|f| f["rule"].as_u64().unwrap() as u32)
        .collect();
    let text = std::fs::read_to_string(rules).unwrap();
    let pruned: String = text
        .lines()
        .enumerate()
        .filter(|(i, _)| !lines.contains(&(*i as u64 + 1)))
        .map(|(_, l)| format!("{l}\n"))
        .collect();
    let name = rules.file_name().unwrap().to_string_lossy();
    let pruned = write(dir, &format!("pruned-{name}"), &pruned);
    let (before, after) = (classified(rules, trace), classified(&pruned, trace));
    assert_eq!(before.len(), after.len());
    // Rule ids are positions: a kept rule moves up by the removed rules before it.
    let renumbered = |id: u32| id - removed.range(..id).count() as u32;
    for (i, ((id, verdict), (id2, verdict2))) in before.iter().zip(&after).enumerate() {
        assert_eq!(
            verdict,
            verdict2,
            "{}: packet {}: rule {id} vs {id2} after pruning",
            rules.display(),
            i + 1
        );
        if !removed.contains(id) {
            let want = if *id == 0 { 0 } else { renumbered(*id) };
            assert_eq!(
                *id2,
                want,
                "{}: packet {}: rule {id} now {id2}",
                rules.display(),
                i + 1
            );
        }
    }
    (findings.len(), before.len())
}

#[test]
fn removing_the_findings_keeps_the_builtin_classbench_trace_decisions() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = tempfile::tempdir().unwrap();
    let (found, packets) = prune_and_compare(
        dir.path(),
        &root.join("examples/synthetic_2k.cb"),
        &root.join("examples/synthetic_2k.trace"),
    );
    assert!(
        found > 100 && packets == 20_000,
        "{found} findings, {packets} packets"
    );
}

fn classbench_dir() -> Option<PathBuf> {
    let d = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/classbench");
    d.is_dir().then_some(d)
}

#[test]
fn removing_the_findings_keeps_mixed_verdict_classbench_decisions() {
    let Some(data) = classbench_dir() else {
        eprintln!("not run: ../shared/data/classbench is not here");
        return;
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = tempfile::tempdir().unwrap();
    for family in ["acl1", "fw1", "ipc1"] {
        let mixed = dir.path().join(format!("{family}_1k.mixed"));
        let made = Command::new(root.join("bench/analysis/mixed_verdicts.sh"))
            .args([
                env!("CARGO_BIN_EXE_parapet"),
                s(&data.join(format!("{family}_1k"))),
                s(&mixed),
            ])
            .status()
            .unwrap();
        assert!(made.success(), "mixed_verdicts.sh {family}_1k");
        let trace = Command::new("gzip")
            .args(["-dc", s(&data.join(format!("{family}_10k_trace.gz")))])
            .output()
            .unwrap();
        assert!(trace.status.success(), "gzip -dc {family}_10k_trace.gz");
        let head: String = String::from_utf8(trace.stdout)
            .unwrap()
            .lines()
            .take(20_000)
            .map(|l| format!("{l}\n"))
            .collect();
        let trace = write(dir.path(), &format!("{family}.trace"), &head);
        let (found, packets) = prune_and_compare(dir.path(), &mixed, &trace);
        assert!(
            found > 10 && packets == 20_000,
            "{family}: {found} findings, {packets} packets"
        );
    }
}
