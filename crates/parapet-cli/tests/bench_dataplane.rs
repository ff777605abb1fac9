//! `parapet bench dataplane --json` reports the floor beside every figure
//! (issue 15): at XDP and tc, repeated and distinct, `floor_ns_per_packet`
//! is there and positive, parapet's program costs at least the floor, and
//! `above_floor_ns` is there; `--scale` adds packets per second on one
//! and on two CPUs. A presence and shape check with tiny
//! `--repeat`/`--runs`, not a timing assertion. Needs root (BPF).

use std::path::Path;
use std::process::Command;

fn bench(dir: &Path, hook: &str, distinct: bool, extra: &[&str]) -> serde_json::Value {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_parapet"));
    cmd.args(["bench", "dataplane"])
        .arg(dir.join("one.rules"))
        .arg(dir.join("one.trace"))
        .args(["--hook", hook, "--sample", "4", "--repeat", "10"])
        .args(["--runs", "5", "--json"]);
    if distinct {
        cmd.arg("--distinct");
    }
    cmd.args(extra);
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "bench dataplane --hook {hook}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
#[ignore = "needs root"]
fn bench_dataplane_reports_the_floor_at_xdp_and_tc() {
    parapet_testbed::require_root();
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("one.rules"),
        "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -p tcp --dport 9 -j DROP\nCOMMIT\n",
    )
    .unwrap();
    // 10.0.0.1 -> 10.0.0.2, tcp to 9 (dropped), udp to 53 and tcp to 80
    // (passed): src dst sport dport proto
    std::fs::write(
        tmp.path().join("one.trace"),
        "167772161 167772162 1024 9 6\n167772161 167772162 1024 53 17\n\
         167772161 167772162 1024 80 6\n167772161 167772162 2048 9 6\n",
    )
    .unwrap();
    for hook in ["xdp", "tc"] {
        for distinct in [false, true] {
            let v = bench(tmp.path(), hook, distinct, &[]);
            let what = format!("{hook} distinct={distinct}: {v}");
            assert_eq!(v["hook"], hook, "{what}");
            assert_eq!(v["rules"], 1, "{what}");
            let mode = if distinct { "distinct" } else { "repeated" };
            assert_eq!(v["mode"], mode, "{what}");
            let ns = v["ns_per_packet"].as_f64().expect("ns_per_packet");
            let floor = v["floor_ns_per_packet"].as_f64().expect("floor");
            assert!(floor > 0.0, "{what}");
            assert!(ns >= floor, "{what}");
            let (lo, hi) = (
                v["floor_ns_per_packet_min"].as_f64().expect("floor min"),
                v["floor_ns_per_packet_max"].as_f64().expect("floor max"),
            );
            assert!(lo <= floor && floor <= hi, "{what}");
            assert!(v["above_floor_ns"].as_f64().is_some(), "{what}");
            assert_eq!(v["sample"], 4, "{what}");
            assert_eq!(v["repeat"], if distinct { 1 } else { 10 }, "{what}");
        }
    }
    // --scale: the program on one CPU and on two at once
    let v = bench(tmp.path(), "xdp", false, &["--scale"]);
    let one = v["scale_pps_1cpu"].as_f64().expect("scale_pps_1cpu");
    let two = v["scale_pps_2cpu"].as_f64().expect("scale_pps_2cpu");
    let ratio = v["scale_ratio"].as_f64().expect("scale_ratio");
    assert!(one > 0.0 && two > 0.0 && ratio > 0.0, "{v}");
    assert!(v["floor_ns_per_packet"].as_f64().is_some(), "{v}");
}

/// `--engine generated` times the generated straight-line program (XDP),
/// `generated-attached` the program parapetd attaches, `generated-tree`
/// and `generated-tree-attached` the tree form on its own and attached:
/// the JSON says so and gives its instruction count, the verdicts were
/// checked (the command fails otherwise), and a ruleset the generator
/// does not take, or another hook, is refused with the reason.
#[test]
#[ignore = "needs root"]
fn bench_dataplane_times_the_generated_program() {
    parapet_testbed::require_root();
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("one.rules"),
        "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -p tcp --dport 9 -j DROP\nCOMMIT\n",
    )
    .unwrap();
    std::fs::write(
        tmp.path().join("one.trace"),
        "167772161 167772162 1024 9 6\n167772161 167772162 1024 53 17\n",
    )
    .unwrap();
    // and as parapetd attaches it (counting in the main program's maps)
    for (distinct, engine) in [
        (false, "generated"),
        (true, "generated"),
        (false, "generated-attached"),
        (false, "generated-tree"),
        (false, "generated-tree-attached"),
    ] {
        let v = bench(tmp.path(), "xdp", distinct, &["--engine", engine]);
        assert_eq!(v["engine"], engine, "{v}");
        assert!(
            v["program_insns"].as_u64().expect("program_insns") > 0,
            "{v}"
        );
        assert!(v["above_floor_ns"].as_f64().is_some(), "{v}");
    }
    let refused = |rules: &str, hook: &str| -> String {
        std::fs::write(tmp.path().join("two.rules"), rules).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_parapet"))
            .args(["bench", "dataplane"])
            .arg(tmp.path().join("two.rules"))
            .arg(tmp.path().join("one.trace"))
            .args(["--hook", hook, "--engine", "generated", "--runs", "5"])
            .output()
            .unwrap();
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let iface = "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -i lo -j DROP\nCOMMIT\n";
    assert!(refused(iface, "xdp").contains("not eligible"));
    let one = "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -p tcp --dport 9 -j DROP\nCOMMIT\n";
    assert!(refused(one, "tc").contains("--hook xdp"));
}
