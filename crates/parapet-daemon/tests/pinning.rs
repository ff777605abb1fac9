//! Never fail open: parapetd pins its programs, maps and links under
//! bpffs, so the kernel keeps enforcing the last applied ruleset while the
//! daemon is dead, and a restarted daemon adopts what is pinned.
//!
//! The real `parapetd` runs in the receiver's network namespace, entered
//! with `nsenter --net` only (`ip netns exec` would give it a private mount
//! namespace, and its pins would die with it). The ruleset drops UDP to
//! port 9 and accepts everything else; the peer namespace floods port 9
//! and sends numbered probes to port 7000. Across `kill -9` and a restart,
//! an upgrade (a different build of the program, swapped in with
//! `BPF_LINK_UPDATE`) and a reboot simulation (pins removed, a fresh
//! daemon from the journal), no port-9 packet may reach the receiver and
//! the probes must keep arriving. At XDP, at tc, and at the netfilter
//! hooks (`attach` without an interface). Needs root.

mod pin_support;

use parapet_daemon::Client;
use parapet_testbed::{Pair, Veth};
use pin_support::*;
use serde_json::{json, Value};
use std::process::Command;
use std::sync::atomic::Ordering;
use std::time::Duration;

fn xdp_prog_on(pair: &Pair, dev: &str) -> bool {
    pair.b
        .ip(&["-d", "link", "show", "dev", dev])
        .unwrap()
        .contains("prog/xdp")
}

/// Without a daemon the port-9 packets arrive: the receiver counts them
/// (so zero in a test means filtered, not unseen).
fn assert_unfiltered(pair: &Pair, v: &Veth<'_>) {
    let run = Run::start(&pair.a, &pair.b, v.b_addr);
    settle_for(300);
    let seen = run.seen.clone();
    let _ = run.finish();
    let (port9, banned) = (
        seen.dropped_class.load(Ordering::SeqCst),
        seen.banned.load(Ordering::SeqCst),
    );
    let probes = seen.probes.load(Ordering::SeqCst);
    assert!(
        port9 > 0 && banned > 0 && probes > 0,
        "unfiltered: {port9} {banned} {probes}"
    );
}

/// Reboot simulation: kills `daemon`, removes the pins (then nothing
/// filters: the flood arrives), starts a fresh daemon that rebuilds
/// everything from the journal, and checks it filters again.
fn reboot(inst: &Instance, pair: &Pair, v: &Veth<'_>, hook: &str, daemon: Proc) -> Proc {
    kill9(daemon);
    inst.remove_pinned();
    assert!(!inst.pins.exists(), "--remove-pinned removed the directory");
    let run = Run::start(&pair.a, &pair.b, v.b_addr);
    settle_for(300);
    let (leaked, _, _) = run.finish();
    assert!(leaked > 0, "{hook}: without pins nothing filters");
    let d = inst.start(&[]);
    let run = Run::start(&pair.a, &pair.b, v.b_addr);
    settle_for(300);
    inst.counts_live(&format!("{hook}: after the reboot simulation"));
    check(
        &format!("{hook}: after the reboot simulation"),
        run.finish(),
    );
    d
}

fn scenario(hook: &str) {
    parapet_testbed::require_root();
    let tag = format!("pin{hook}");
    let (pair, v) = bed(&tag);
    let tmp = tempfile::tempdir().unwrap();
    let inst = Instance::new(&pair.b, tmp.path(), hook);
    let _ = parapet_dataplane::remove_pins(&inst.pins);
    let settle = || std::thread::sleep(Duration::from_millis(300));
    assert_unfiltered(&pair, &v);

    let d1 = inst.start(&[]);
    let r = inst.call(json!({"cmd": "ban", "elems": [BANNED.to_string()]}));
    assert_eq!(r["ok"], Value::from(true), "{r}");
    let r = inst.call(json!({"cmd": "apply", "rules": RULES, "name": "r.v4"}));
    assert_eq!(r["ok"], Value::from(true), "{r}");
    let r = inst.call(json!({"cmd": "attach", "iface": v.b_dev, "hook": hook, "mode": "native"}));
    assert_eq!(r["ok"], Value::from(true), "{r}");
    let (link1, prog1) = inst.link();
    assert!(inst
        .pins
        .join("links")
        .join(format!("{}@{hook}", v.b_dev))
        .exists());

    // 1. kill -9 under the flood, restart: adopted, not re-attached.
    let d2 = restart_under_flood(
        &inst,
        (&pair.a, &pair.b, v.b_addr),
        d1,
        &[],
        1,
        format!("{hook}: kill -9 and restart"),
    );
    assert_eq!(
        inst.link(),
        (link1, prog1),
        "{hook}: same link, same program"
    );
    let said = inst.log();
    assert!(said.contains("adopted the pinned attachment"), "{said}");
    assert!(!said.contains("re-attached to"), "{said}");

    // 2. upgrade: another build of the program replaces the old one in
    // the same link.
    let d3 = restart_under_flood(
        &inst,
        (&pair.a, &pair.b, v.b_addr),
        d2,
        &["--test-program-variant"],
        1,
        format!("{hook}: upgrade"),
    );
    let (link3, prog3) = inst.link();
    assert_eq!(link3, link1, "{hook}: the upgrade keeps the link");
    assert_ne!(prog3, prog1, "{hook}: the upgrade swaps the program");
    assert!(inst.log().contains("swapped in place"), "{}", inst.log());

    // 3. a restart with larger image slots: the pinned maps do not fit
    // it, so fresh maps are filled from the journal first and then
    // swapped in with the program, in the same link.
    let d3 = restart_under_flood(
        &inst,
        (&pair.a, &pair.b, v.b_addr),
        d3,
        &[],
        2,
        format!("{hook}: resize"),
    );
    let (link5, prog5) = inst.link();
    assert_eq!(link5, link1, "{hook}: the resize keeps the link");
    assert_ne!(prog5, prog3, "{hook}: the resize swaps the program");
    let said = inst.log();
    assert!(
        said.matches("swapped in place").count() == 2 && said.contains("in fresh maps"),
        "{said}"
    );

    // 4. reboot simulation: the pins are gone (the kernel then filters
    // nothing), a fresh daemon rebuilds everything from the journal.
    let d4 = reboot(&inst, &pair, &v, hook, d3);
    let (link4, _) = inst.link();
    assert_ne!(link4, link1, "{hook}: a new link after the reboot");
    assert!(inst.log().contains("re-attached to"), "{}", inst.log());

    // 5. detach removes the attachment's pin, and the kernel lets port 9
    // through again.
    let r = inst.call(json!({"cmd": "detach", "iface": v.b_dev}));
    assert_eq!(r["ok"], Value::from(true), "{r}");
    assert!(!inst
        .pins
        .join("links")
        .join(format!("{}@{hook}", v.b_dev))
        .exists());
    if hook == "xdp" {
        assert!(!xdp_prog_on(&pair, v.b_dev), "detached");
    }
    let run = Run::start(&pair.a, &pair.b, v.b_addr);
    settle();
    let (leaked, _, _) = run.finish();
    assert!(leaked > 0, "{hook}: after detach port 9 passes");
    eprintln!("{}", inst.log());
    kill9(d4);
    inst.remove_pinned();
    assert!(!inst.pins.exists());
    let _ = std::fs::remove_dir(inst.pins.parent().unwrap());
}

#[test]
#[ignore = "needs root"]
fn kill9_upgrade_and_reboot_never_fail_open_at_xdp() {
    scenario("xdp");
}

#[test]
#[ignore = "needs root"]
fn kill9_upgrade_and_reboot_never_fail_open_at_tc() {
    scenario("tc");
}

/// At the netfilter hooks (`attach` without an interface): the INPUT
/// chain's link is pinned as `links/input-ipv4@netfilter`; `kill -9` and a
/// restart take it over (same link, same program); an upgrade and a resize
/// renew it make-before-break (the kernel cannot swap a netfilter link's
/// program: a second link goes in beside it first); a reboot simulation
/// attaches it again from the journal. No port-9 or banned packet arrives
/// throughout, and the probes keep arriving.
#[test]
#[ignore = "needs root"]
fn kill9_upgrade_and_reboot_never_fail_open_at_netfilter() {
    parapet_testbed::require_root();
    let (pair, v) = bed("pinnf");
    let tmp = tempfile::tempdir().unwrap();
    let inst = Instance::new(&pair.b, tmp.path(), "netfilter");
    let _ = parapet_dataplane::remove_pins(&inst.pins);
    let settle = || settle_for(300);
    assert_unfiltered(&pair, &v);
    let pin = "input-ipv4@netfilter".to_string();

    let d1 = inst.start(&[]);
    let r = inst.call(json!({"cmd": "ban", "elems": [BANNED.to_string()]}));
    assert_eq!(r["ok"], Value::from(true), "{r}");
    let r = inst.call(json!({"cmd": "apply", "rules": RULES, "name": "r.v4"}));
    assert_eq!(r["ok"], Value::from(true), "{r}");
    let r = inst.call(json!({"cmd": "attach"}));
    assert_eq!(r["ok"], Value::from(true), "{r}");
    let links1 = inst.nf_links();
    assert_eq!(links1.len(), 1, "{links1:?}");
    assert_eq!(links1[0].0, "INPUT-ipv4");
    assert_eq!(inst.link_pins(), vec![pin.clone()]);
    let (_, link1, prog1, _) = links1[0].clone();

    // 1. kill -9 under the flood, restart: adopted, not re-attached.
    let d2 = restart_under_flood(
        &inst,
        (&pair.a, &pair.b, v.b_addr),
        d1,
        &[],
        1,
        "netfilter: kill -9 and restart",
    );
    assert_eq!(
        inst.nf_links(),
        links1,
        "netfilter: same link, same program"
    );
    let said = inst.log();
    assert!(said.contains("adopted the pinned netfilter link"), "{said}");
    assert!(!said.contains("re-attached to"), "{said}");

    // 2. upgrade: another build of the program, in a new link made before
    // the old one goes.
    let d3 = restart_under_flood(
        &inst,
        (&pair.a, &pair.b, v.b_addr),
        d2,
        &["--test-program-variant"],
        1,
        "netfilter: upgrade",
    );
    let links3 = inst.nf_links();
    assert_eq!(links3.len(), 1, "{links3:?}");
    let (_, link3, prog3, _) = links3[0].clone();
    assert_ne!(
        link3,
        link1,
        "netfilter: the upgrade makes a new link: {}",
        inst.log()
    );
    assert_ne!(prog3, prog1, "netfilter: the upgrade runs another program");
    assert_eq!(inst.link_pins(), vec![pin.clone()], "one pin, renamed over");
    assert_eq!(nf_links_held(&d3), vec![link3], "the old link is closed");
    assert_eq!(
        inst.log().matches("renewed make-before-break").count(),
        1,
        "{}",
        inst.log()
    );

    // 3. a resize: fresh maps, filled from the journal, then a new link
    // running the program that reads them.
    let d4 = restart_under_flood(
        &inst,
        (&pair.a, &pair.b, v.b_addr),
        d3,
        &[],
        2,
        "netfilter: resize",
    );
    let links4 = inst.nf_links();
    assert_eq!(links4.len(), 1, "{links4:?}");
    assert_ne!(links4[0].1, link3, "netfilter: the resize makes a new link");
    assert_eq!(inst.link_pins(), vec![pin.clone()]);
    let said = inst.log();
    assert!(
        said.matches("renewed make-before-break").count() == 2 && said.contains("in fresh maps"),
        "{said}"
    );

    // 4. reboot simulation: the pins are gone, a fresh daemon attaches
    // again from the journal.
    let d5 = reboot(&inst, &pair, &v, "netfilter", d4);
    let links5 = inst.nf_links();
    assert_eq!(links5.len(), 1, "{links5:?}");
    assert!(inst.log().contains("re-attached"), "{}", inst.log());
    assert_eq!(inst.link_pins(), vec![pin.clone()]);

    // 5. an apply whose ruleset has a FORWARD chain too pins a link
    // there; one without it removes that link and its pin.
    let with_forward = RULES.replace(
        "COMMIT",
        ":FORWARD ACCEPT [0:0]\n-A FORWARD -p udp -j DROP\nCOMMIT",
    );
    let r = inst.call(json!({"cmd": "apply", "rules": with_forward, "name": "f.v4"}));
    assert_eq!(r["ok"], Value::from(true), "{r}");
    assert_eq!(
        inst.link_pins(),
        vec!["forward-ipv4@netfilter".to_string(), pin.clone()]
    );
    assert_eq!(inst.nf_links().len(), 2);
    let r = inst.call(json!({"cmd": "apply", "rules": RULES, "name": "r.v4"}));
    assert_eq!(r["ok"], Value::from(true), "{r}");
    assert_eq!(inst.link_pins(), vec![pin.clone()]);

    // 6. detach removes the pins, and the kernel lets port 9 through.
    let r = inst.call(json!({"cmd": "detach"}));
    assert_eq!(r["ok"], Value::from(true), "{r}");
    assert!(inst.link_pins().is_empty(), "{:?}", inst.link_pins());
    let run = Run::start(&pair.a, &pair.b, v.b_addr);
    settle();
    let (leaked, _, _) = run.finish();
    assert!(leaked > 0, "netfilter: after detach port 9 passes");

    // 7. pins the journal does not name go: a daemon with the same pin
    // directory and an empty state directory removes the link.
    let r = inst.call(json!({"cmd": "attach"}));
    assert_eq!(r["ok"], Value::from(true), "{r}");
    assert_eq!(inst.link_pins(), vec![pin.clone()]);
    eprintln!("{}", inst.log());
    kill9(d5);
    let tmp2 = tempfile::tempdir().unwrap();
    let other = Instance::new(&pair.b, tmp2.path(), "netfilter");
    assert_eq!(other.pins, inst.pins);
    let d6 = other.start(&[]);
    assert!(other.link_pins().is_empty(), "{:?}", other.link_pins());
    assert!(
        other.log().contains("the journal wants no netfilter link"),
        "{}",
        other.log()
    );
    kill9(d6);
    inst.remove_pinned();
    assert!(!inst.pins.exists());
    let _ = std::fs::remove_dir(inst.pins.parent().unwrap());
}

/// The program id on `dev`'s XDP hook in namespace `ns`, per `ip`.
fn xdp_prog_id(ns: &parapet_testbed::Netns, dev: &str) -> Option<u64> {
    let out = ns.ip(&["-d", "link", "show", "dev", dev]).unwrap();
    let at = out.find("prog/xdp id ")? + "prog/xdp id ".len();
    out[at..].split_whitespace().next()?.parse().ok()
}

/// Another XDP program on the interface is never replaced: a second
/// parapetd (another state directory, so another instance with its own
/// pins) and a program attached with `ip link set … xdp` (no link) are
/// both refused by name, keep running, and the refused instance still
/// attaches at tc beside them.
#[test]
#[ignore = "needs root"]
fn a_foreign_xdp_program_is_not_clobbered() {
    parapet_testbed::require_root();
    let tag = "pinforeign";
    let (pair, v) = bed(tag);
    let (ta, tb) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (a, b) = (
        Instance::new(&pair.b, ta.path(), "foreign-a"),
        Instance::new(&pair.b, tb.path(), "foreign-b"),
    );
    let (da, db) = (a.start(&[]), b.start(&[]));
    for i in [&a, &b] {
        let r = i.call(json!({"cmd": "ban", "elems": [BANNED.to_string()]}));
        assert_eq!(r["ok"], Value::from(true), "{r}");
        let r = i.call(json!({"cmd": "apply", "rules": RULES, "name": "r.v4"}));
        assert_eq!(r["ok"], Value::from(true), "{r}");
    }
    let attach = |i: &Instance, hook: &str| {
        let mut c = Client::connect(&i.dir.join("sock")).unwrap();
        c.call(json!({"cmd": "attach", "iface": v.b_dev, "hook": hook, "mode": "skb"}))
    };
    attach(&a, "xdp").expect("the first instance attaches");
    let (link_a, prog_a) = a.link();
    assert_eq!(xdp_prog_id(&pair.b, v.b_dev), Some(prog_a));

    // 1. another parapetd: refused, naming the program; A keeps running
    let e = attach(&b, "xdp").expect_err("the second instance must be refused");
    let said = e.to_string();
    assert!(
        said.contains(&format!("id {prog_a}")) && said.contains("parapet_xdp"),
        "{said}"
    );
    assert_eq!(a.link(), (link_a, prog_a));
    assert_eq!(xdp_prog_id(&pair.b, v.b_dev), Some(prog_a));
    let run = Run::start(&pair.a, &pair.b, v.b_addr);
    settle_for(300);
    check("two instances", run.finish());
    // beside it at tc: the instances coexist
    attach(&b, "tc").expect("the second instance attaches at tc");

    // 2. a program attached without a link (netlink, as `ip` does)
    let r = a.call(json!({"cmd": "detach", "iface": v.b_dev}));
    assert_eq!(r["ok"], Value::from(true), "{r}");
    assert_eq!(xdp_prog_id(&pair.b, v.b_dev), None);
    let progs = a.pins.join("progs");
    let pinned_prog = std::fs::read_dir(&progs)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().ends_with("-parapet_xdp"))
        .expect("A's pinned XDP program");
    // `ip -n` would remount /sys, hiding the host's bpffs: enter the
    // network namespace only
    let o = Command::new("nsenter")
        .arg(format!("--net=/run/netns/{}", pair.b.name()))
        .args(["ip", "link", "set", "dev", v.b_dev, "xdpgeneric", "pinned"])
        .arg(&pinned_prog)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let foreign = xdp_prog_id(&pair.b, v.b_dev).expect("ip attached a program");
    let e = attach(&a, "xdp").expect_err("a netlink-attached program must be refused");
    assert!(e.to_string().contains(&format!("id {foreign}")), "{e}");
    assert_eq!(
        xdp_prog_id(&pair.b, v.b_dev),
        Some(foreign),
        "left in place"
    );
    pair.b
        .ip(&["link", "set", "dev", v.b_dev, "xdpgeneric", "off"])
        .unwrap();
    kill9(da);
    kill9(db);
    a.remove_pinned();
    b.remove_pinned();
    let _ = std::fs::remove_dir(a.pins.parent().unwrap());
}

/// libxdp's object of a pass-everything filter (`xdp-tools`), wherever the
/// architecture's library directory is.
fn libxdp_pass_object() -> std::path::PathBuf {
    std::fs::read_dir("/usr/lib")
        .unwrap()
        .flatten()
        .map(|e| e.path().join("bpf/xdpfilt_alw_all.o"))
        .chain([std::path::PathBuf::from("/usr/lib/bpf/xdpfilt_alw_all.o")])
        .find(|p| p.exists())
        .expect("xdp-tools' xdpfilt_alw_all.o (scripts/deps.sh test installs xdp-tools)")
}

/// `xdp-loader ARGS` in the bed's namespace (network namespace only: the
/// host's bpffs, where libxdp keeps its state).
fn xdp_loader(ns: &parapet_testbed::Netns, args: &[&str]) -> std::process::Output {
    Command::new("nsenter")
        .arg(format!("--net=/run/netns/{}", ns.name()))
        .arg("xdp-loader")
        .args(args)
        .output()
        .unwrap()
}

/// The other XDP user of the libxdp convention: a program that `xdp-loader`
/// placed is refused by name and left running (parapet does not chain
/// through libxdp's dispatcher: this kernel refuses the dispatcher's
/// multi-program mode, and chaining would run parapet after programs it
/// does not know), parapet enforces beside it at tc; and the other way
/// round `xdp-loader` cannot replace parapet's XDP link.
#[test]
#[ignore = "needs root"]
fn a_libxdp_program_is_not_clobbered_and_does_not_clobber() {
    parapet_testbed::require_root();
    let obj = libxdp_pass_object();
    let obj = obj.to_str().unwrap();
    let (pair, v) = bed("pinlibxdp");
    let ta = tempfile::tempdir().unwrap();
    let a = Instance::new(&pair.b, ta.path(), "libxdp");
    let da = a.start(&[]);
    let r = a.call(json!({"cmd": "ban", "elems": [BANNED.to_string()]}));
    assert_eq!(r["ok"], Value::from(true), "{r}");
    let r = a.call(json!({"cmd": "apply", "rules": RULES, "name": "r.v4"}));
    assert_eq!(r["ok"], Value::from(true), "{r}");
    let attach = |hook: &str| {
        let mut c = Client::connect(&a.dir.join("sock")).unwrap();
        c.call(json!({"cmd": "attach", "iface": v.b_dev, "hook": hook, "mode": "skb"}))
    };

    // 1. xdp-loader first: parapet refuses by name, the program stays
    let o = xdp_loader(&pair.b, &["load", "-m", "skb", v.b_dev, obj]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let foreign = xdp_prog_id(&pair.b, v.b_dev).expect("xdp-loader attached a program");
    let e = attach("xdp").expect_err("a libxdp program must be refused");
    let said = e.to_string();
    assert!(
        said.contains(&format!("id {foreign}")) && said.contains("xdpfilt_alw_all"),
        "{said}"
    );
    assert_eq!(
        xdp_prog_id(&pair.b, v.b_dev),
        Some(foreign),
        "left in place"
    );
    let status = xdp_loader(&pair.b, &["status", v.b_dev]);
    assert!(
        String::from_utf8_lossy(&status.stdout).contains("xdpfilt_alw_all"),
        "{}",
        String::from_utf8_lossy(&status.stdout)
    );
    // beside it at tc parapet enforces: the dropped class stays out
    attach("tc").expect("parapet attaches at tc beside the libxdp program");
    let run = Run::start(&pair.a, &pair.b, v.b_addr);
    settle_for(300);
    check("libxdp at xdp, parapet at tc", run.finish());
    assert_eq!(xdp_prog_id(&pair.b, v.b_dev), Some(foreign));

    // 2. parapet first: xdp-loader cannot replace its link
    let o = xdp_loader(&pair.b, &["unload", "-a", v.b_dev]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = a.call(json!({"cmd": "detach", "iface": v.b_dev}));
    assert_eq!(r["ok"], Value::from(true), "{r}");
    attach("xdp").expect("parapet attaches once the libxdp program is gone");
    let (link, prog) = a.link();
    let o = xdp_loader(&pair.b, &["load", "-m", "skb", v.b_dev, obj]);
    assert!(
        !o.status.success(),
        "xdp-loader must not replace parapet's link: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert_eq!(xdp_prog_id(&pair.b, v.b_dev), Some(prog));
    assert_eq!(a.link(), (link, prog));
    let run = Run::start(&pair.a, &pair.b, v.b_addr);
    settle_for(300);
    check("parapet at xdp after xdp-loader tried", run.finish());

    kill9(da);
    a.remove_pinned();
    let _ = std::fs::remove_dir(a.pins.parent().unwrap());
}
