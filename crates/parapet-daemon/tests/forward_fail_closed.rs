//! Never fail open at FORWARD: a router namespace R between hosts L and H
//! (`parapet_testbed::router`), parapetd in R (network namespace only, so
//! its pins outlive it) enforcing a FORWARD chain at the netfilter hook.
//! L floods UDP port 9 to H (dropped by FORWARD) and sends probes to port
//! 7000 (accepted) from its own address and from a banned one (dropped by
//! the ban set). Across `kill -9` and a restart (the pinned link adopted,
//! not re-attached), an upgrade (`--test-program-variant`: a new link made
//! before the old one goes), a refused ruleset (a parse error: the links
//! stay), two base chains at FORWARD (joined: the second drops what the
//! first accepts), a downgrade, and pins of an older pin ABI (maps not
//! reused: fresh ones from the journal, links renewed make-before-break),
//! no port-9 or banned packet reaches H and the probes keep arriving.
//! Needs root.

mod pin_support;

use parapet_testbed::router::{Router, V4};
use pin_support::*;
use serde_json::{json, Value};
use std::net::Ipv4Addr;
use std::sync::atomic::Ordering;

/// FORWARD drops port 9 and banned sources; rule 1 counts the flood.
/// (INPUT, empty, as iptables-save always writes it.)
const FWD_RULES: &str = "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n\
                         -A FORWARD -p udp --dport 9 -j DROP\n\
                         -A FORWARD -m set --match-set parapet-ban4 src -j DROP\nCOMMIT\n";

/// The router bed, with the banned address on L too (R forwards it
/// without a reverse-path check).
fn bed() -> Router {
    parapet_testbed::remove_stale("ffc");
    let t = Router::create("ffc").unwrap();
    t.l.ip(&["addr", "add", &format!("{BANNED}/32"), "dev", "lv"])
        .unwrap();
    for key in [
        "net.ipv4.conf.all.rp_filter=0",
        "net.ipv4.conf.rl.rp_filter=0",
    ] {
        t.r.exec(&["sysctl", "-qw", key]).unwrap();
    }
    t
}

/// The flood through R, `ms` long; what H received.
fn through(t: &Router, h: Ipv4Addr, ms: u64) -> (u64, u64, u64) {
    let run = Run::start(&t.l, &t.h, h);
    settle_for(ms);
    run.finish()
}

/// The instance's netfilter links, by chain name (adoption may list them
/// in another order).
fn sorted_links(inst: &Instance) -> Vec<(String, u64, u64, i64)> {
    let mut l = inst.nf_links();
    l.sort();
    l
}

#[test]
#[ignore = "needs root"]
fn kill9_and_upgrade_never_fail_open_at_forward() {
    parapet_testbed::require_root();
    let t = bed();
    let h: Ipv4Addr = V4.h.parse().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let inst = Instance::new(&t.r, tmp.path(), "forward");
    let _ = parapet_dataplane::remove_pins(&inst.pins);
    let pins = ["forward-ipv4@netfilter", "input-ipv4@netfilter"].map(String::from);

    // without a filter the dropped class arrives: zero below means filtered
    let run = Run::start(&t.l, &t.h, h);
    settle_for(300);
    let seen = run.seen.clone();
    let (leaked, probes, _) = run.finish();
    assert!(
        seen.dropped_class.load(Ordering::SeqCst) > 0
            && seen.banned.load(Ordering::SeqCst) > 0
            && probes > 0,
        "unfiltered: {leaked} {probes}"
    );

    let d1 = inst.start(&[]);
    let r = inst.call(json!({"cmd": "ban", "elems": [BANNED.to_string()]}));
    assert_eq!(r["ok"], Value::from(true), "{r}");
    let r = inst.call(json!({"cmd": "apply", "rules": FWD_RULES, "name": "f.v4"}));
    assert_eq!(r["ok"], Value::from(true), "{r}");
    let r = inst.call(json!({"cmd": "attach"}));
    assert_eq!(r["ok"], Value::from(true), "{r}");
    let links1 = sorted_links(&inst);
    let names: Vec<&str> = links1.iter().map(|l| l.0.as_str()).collect();
    assert_eq!(names, ["FORWARD-ipv4", "INPUT-ipv4"], "{links1:?}");
    assert_eq!(inst.link_pins(), pins);
    check("forward: attached", through(&t, h, 800));
    let flow = (&t.l, &t.h, h);

    // 1. kill -9 under the flood, restart: the pinned link is adopted
    let d2 = restart_under_flood(&inst, flow, d1, &[], 1, "forward: kill -9 and restart");
    assert_eq!(
        sorted_links(&inst),
        links1,
        "forward: same link, same program"
    );
    let said = inst.log();
    assert!(said.contains("adopted the pinned netfilter link"), "{said}");
    assert_eq!(
        said.matches("re-attached").count(),
        said.matches("not re-attached").count(),
        "{said}"
    );

    // 2. upgrade: another build of the program in a new link, made before
    // the old one goes
    let d3 = restart_under_flood(
        &inst,
        flow,
        d2,
        &["--test-program-variant"],
        1,
        "forward: upgrade",
    );
    let links3 = sorted_links(&inst);
    assert_eq!(links3.len(), 2, "{links3:?}");
    for (new, old) in links3.iter().zip(&links1) {
        assert_eq!(new.0, old.0);
        assert_ne!(new.1, old.1, "a new link: {}", inst.log());
        assert_ne!(new.2, old.2, "another program");
    }
    assert_eq!(inst.link_pins(), pins, "one pin each, renamed over");
    let mut held: Vec<u64> = links3.iter().map(|l| l.1).collect();
    held.sort_unstable();
    assert_eq!(nf_links_held(&d3), held, "the old links are closed");
    assert!(
        inst.log().contains("renewed make-before-break"),
        "{}",
        inst.log()
    );

    // 3. a refused ruleset changes nothing: the link and its program stay,
    // and the flood stays out
    let bad = FWD_RULES.replace("--dport 9", "--dport 99999");
    let mut c = parapet_daemon::Client::connect(&inst.dir.join("sock")).unwrap();
    let e = c
        .call(json!({"cmd": "apply", "rules": bad, "name": "bad.v4"}))
        .expect_err("a bad port must be refused");
    assert!(e.to_string().contains("bad.v4:4:27:"), "FILE:LINE:COL: {e}");
    assert_eq!(
        sorted_links(&inst),
        links3,
        "the refused apply kept the link"
    );
    check("forward: after a refused apply", through(&t, h, 800));

    // 3b. two base chains at FORWARD (nft, priorities 0 and 10) run as
    // one: the first accepts port 9 and the banned source, the second
    // drops them — a drop in any chain is final, as in the kernel. The
    // links stay (same hooks, family and priority); then the first
    // ruleset again
    let two = format!(
        "table ip filter {{\n\tchain a {{\n\t\ttype filter hook forward priority 0; policy accept;\n\t\tudp dport 9 accept\n\t\tip saddr {BANNED} accept\n\t}}\n\tchain b {{\n\t\ttype filter hook forward priority 10; policy accept;\n\t\tudp dport 9 drop\n\t\tip saddr {BANNED} drop\n\t}}\n\tchain INPUT {{\n\t\ttype filter hook input priority 0; policy accept;\n\t}}\n}}\n"
    );
    let r = inst.call(json!({"cmd": "apply", "rules": two, "name": "two.nft"}));
    assert_eq!(r["ok"], Value::from(true), "{r}");
    assert_eq!(
        sorted_links(&inst),
        links3,
        "the same links run the joined chains"
    );
    check("forward: two chains at one hook", through(&t, h, 800));
    let r = inst.call(json!({"cmd": "apply", "rules": FWD_RULES, "name": "f.v4"}));
    assert_eq!(r["ok"], Value::from(true), "{r}");

    // 3c. back to the first build (a downgrade): renewed again, closed
    let d3 = restart_under_flood(&inst, flow, d3, &[], 1, "forward: downgrade");
    assert_eq!(
        inst.log().matches("renewed make-before-break").count(),
        4,
        "{}",
        inst.log()
    );

    // 3d. pins of an older pin ABI (the maps directory renamed to
    // `maps-v0` while the daemon is dead): not reused — fresh maps filled
    // from the journal, the links renewed make-before-break — and never
    // a moment open; the old maps' pins go
    let v1 = std::fs::read_dir(&inst.pins)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("maps-v")
        })
        .expect("the pinned maps' directory");
    let v0 = inst.pins.join("maps-v0");
    assert_ne!(v1, v0);
    let run = Run::start(&t.l, &t.h, h);
    settle_for(300);
    kill9(d3);
    std::fs::rename(&v1, &v0).unwrap();
    settle_for(300);
    let d3 = inst.start(&[]);
    settle_for(300);
    inst.counts_live("forward: after an older pin ABI");
    check("forward: older pin ABI", run.finish());
    let said = inst.log();
    assert!(said.contains("in fresh maps"), "{said}");
    assert_eq!(
        said.matches("renewed make-before-break").count(),
        6,
        "{said}"
    );
    assert!(
        v1.exists() && !v0.exists(),
        "the old ABI's maps are unpinned"
    );
    check("forward: after the ABI change", through(&t, h, 800));

    // 4. detach: the link and its pin go, the flood arrives
    let r = inst.call(json!({"cmd": "detach"}));
    assert_eq!(r["ok"], Value::from(true), "{r}");
    assert!(inst.link_pins().is_empty(), "{:?}", inst.link_pins());
    let (leaked, _, _) = through(&t, h, 800);
    assert!(leaked > 0, "forward: after detach port 9 passes");
    kill9(d3);
    inst.remove_pinned();
    assert!(!inst.pins.exists());
    let _ = std::fs::remove_dir(inst.pins.parent().unwrap());
}
