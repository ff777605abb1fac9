//! Smoke test of the FORWARD-position experiment (issue 14, item 6): the
//! quick mode on two sizes, every filter, checked for the shape of its
//! output. Needs root, iperf3, iptables, nft and parapet's binaries
//! (`PARAPET_BIN`, else the workspace's `target/debug/parapet` and
//! `parapetd`); without them it fails.

use parapet_peers::forward::{self, Form, FwdConfig, FILTERS};
use std::path::Path;

fn parapet_bins() {
    if std::env::var_os("PARAPET_BIN").is_none() {
        let cli = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/debug/parapet");
        assert!(
            cli.is_file() && cli.with_file_name("parapetd").is_file(),
            "build parapet and parapetd first (cargo build -p parapet -p parapet-daemon) or set PARAPET_BIN"
        );
        std::env::set_var("PARAPET_BIN", cli);
    }
}

#[test]
#[ignore = "needs root"]
fn quick_forward_run_has_every_point_and_parapet_is_in_force() {
    parapet_testbed::require_root();
    parapet_bins();
    let cfg = FwdConfig::quick();
    let res = forward::run(&cfg).expect("forward run");
    assert!(res.skipped.is_empty(), "skipped: {:?}", res.skipped);
    // Every (form, frame, filter, size) measured once, with a positive rate:
    // each filter forwards the flow its last rule accepts.
    let forms = 1 + cfg.frames.len();
    assert_eq!(res.points.len(), forms * FILTERS.len() * cfg.rules.len());
    for p in &res.points {
        assert_eq!(p.samples.len(), cfg.rounds, "{p:?}");
        assert!(
            p.samples.iter().all(|&x| x > 0.0),
            "nothing forwarded: {p:?}"
        );
    }
    assert!(res
        .median(Form::Flood, 64, "parapet-forward", 400)
        .is_some());
    let md = forward::markdown(&res, &cfg);
    assert!(
        md.contains("| rules | none | iptables-legacy | iptables-nft | nft | parapet-forward |"),
        "{md}"
    );
    assert!(md.contains("TCP stream (iperf3), 128-byte frames"), "{md}");
    assert_eq!(forward::targets(&res, &cfg).len(), forms);
}
