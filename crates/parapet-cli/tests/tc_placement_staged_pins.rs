//! Never fail open in the window before the takeover (issue 14): the tc
//! placement's links of an interface made while an apply holds the state
//! lock are made ahead of the lock by the link watcher and pinned at once
//! under staged names (`links/staged:<iface>@hooks-tc-in|out`). A
//! `kill -9` of parapetd in that window leaves them enforcing; a restarted
//! parapetd adopts them (the same links, renamed to their own pins, none
//! left staged); an upgrade from that pin set (another build of the
//! program) swaps the program in the same links, and no pin is leaked.
//! Needs root.

mod common;

use common::daemon::{ok, parapet, stats};
use common::router::{
    p, run_probes, start_daemon_pinned, topo, Daemon, Fate, RemovePins, Side, Topo,
};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

/// 6000 is accepted, the INPUT policy drops the rest.
const FILTER4: &str = "*filter
:INPUT DROP [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -p udp -m udp --dport 6000 -j ACCEPT
COMMIT
";

const NEW_R: &str = "10.71.9.1";

/// How long the second apply holds the state lock: the window in which
/// the daemon is killed.
const HOLD: Duration = Duration::from_secs(20);

/// A veth pair made while the lock is held: `nw0` in R, `nw1` in L.
fn late_veth(t: &Topo) {
    t.r.ip(&["link", "add", "nw0", "type", "veth", "peer", "name", "nw1"])
        .unwrap();
    t.r.ip(&["link", "set", "nw1", "netns", t.l.name()])
        .unwrap();
    t.r.ip(&["addr", "add", "10.71.9.1/24", "dev", "nw0"])
        .unwrap();
    t.r.ip(&["link", "set", "nw0", "up"]).unwrap();
    t.l.ip(&["addr", "add", "10.71.9.2/24", "dev", "nw1"])
        .unwrap();
    t.l.ip(&["link", "set", "nw1", "up"]).unwrap();
}

/// The link pins of the instance.
fn link_pins(pins: &Path) -> BTreeSet<String> {
    std::fs::read_dir(pins.join("links"))
        .map(|r| {
            r.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The ids of the TCX links `daemon` holds open (its fdinfo).
fn tcx_links_held(daemon: &Daemon) -> BTreeSet<u64> {
    let pid = daemon.0.id();
    let mut ids = BTreeSet::new();
    for e in std::fs::read_dir(format!("/proc/{pid}/fdinfo"))
        .unwrap()
        .flatten()
    {
        let info = std::fs::read_to_string(e.path()).unwrap_or_default();
        if !info.contains("link_type:\ttcx") {
            continue;
        }
        if let Some(id) = info
            .lines()
            .find_map(|l| l.strip_prefix("link_id:"))
            .and_then(|v| v.trim().parse().ok())
        {
            ids.insert(id);
        }
    }
    ids
}

/// The tc placement's links in `stats`: interface → (ingress link id,
/// egress link id, ingress program id).
fn tc_links(sock: &Path) -> BTreeMap<String, (u64, u64, u64)> {
    let s = stats(sock);
    s["dataplane"]["attachments"][0]["tc_links"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|l| {
                    let id = |d: &str, k: &str| l[d][k].as_u64().unwrap_or(0);
                    (
                        l["iface"].as_str().unwrap_or("").to_string(),
                        (
                            id("ingress", "link_id"),
                            id("egress", "link_id"),
                            id("ingress", "prog_id"),
                        ),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The pins the tc placement's links of `links` have, and no others.
fn pins_of(links: &BTreeMap<String, (u64, u64, u64)>) -> BTreeSet<String> {
    links
        .keys()
        .flat_map(|i| [format!("{i}@hooks-tc-in"), format!("{i}@hooks-tc-out")])
        .collect()
}

/// Probes on `nw0` until judged as the ruleset says (bounded).
fn judged_on_nw0(t: &Topo, what: &str) {
    let probes = [
        p(Side::L, 0, NEW_R, 6002, Side::R),
        p(Side::L, 0, NEW_R, 6000, Side::R),
    ];
    let want = vec![
        (Fate::Dropped, BTreeMap::new()),
        (Fate::Delivered, BTreeMap::new()),
    ];
    let t0 = Instant::now();
    loop {
        let got = run_probes(t, false, &probes, &BTreeMap::new);
        if got == want {
            return;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "{what}: nw0 not judged as the ruleset says: {got:?}"
        );
    }
}

#[test]
#[ignore = "needs root"]
fn links_made_ahead_of_the_takeover_survive_a_kill_and_are_adopted() {
    common::require_root();
    let t = topo("tcst");
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("parapetd.sock");
    let hold = HOLD.as_millis().to_string();
    let daemon = start_daemon_pinned(
        &t.r,
        dir.path(),
        &sock,
        &["--hook-placement", "tc", "--test-apply-hold-ms", &hold],
    );
    let file = dir.path().join("rules");
    std::fs::write(&file, FILTER4).unwrap();
    ok(&sock, &["apply", file.to_str().unwrap()]);
    let o = parapet(&sock, &["attach"]);
    // the pins outlive the daemon (host bpffs): removed at the end, also
    // when an assertion fails
    let pins = std::path::PathBuf::from(stats(&sock)["dataplane"]["pin_dir"].as_str().unwrap());
    let _cleanup = RemovePins(Some(pins.clone()));
    assert!(o.status.success(), "{o:?}");
    let before = tc_links(&sock);
    assert!(
        !before.is_empty() && !before.contains_key("nw0"),
        "{before:?}"
    );

    // an apply that holds the state lock: the takeover cannot happen
    let mut apply = std::process::Command::new(env!("CARGO_BIN_EXE_parapet"))
        .args(["--socket", sock.to_str().unwrap(), "apply"])
        .arg(&file)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    std::thread::sleep(Duration::from_millis(500));
    late_veth(&t);
    judged_on_nw0(&t, "linked ahead of the lock");
    let staged: BTreeSet<String> = ["staged:nw0@hooks-tc-in", "staged:nw0@hooks-tc-out"]
        .map(String::from)
        .into();
    let now = link_pins(&pins);
    assert!(staged.is_subset(&now), "pinned under staged names: {now:?}");
    let held = tcx_links_held(&daemon);
    assert!(
        apply.try_wait().unwrap().is_none() && started.elapsed() < HOLD,
        "the apply must still hold the lock: the kill is to come before the takeover"
    );

    // kill -9 before the takeover: the staged links keep judging
    drop(daemon);
    let _ = apply.wait();
    judged_on_nw0(&t, "after kill -9 before the takeover");

    // a restart adopts them: the same links, under their own pins
    let daemon = start_daemon_pinned(&t.r, dir.path(), &sock, &["--hook-placement", "tc"]);
    let log = std::fs::read_to_string(dir.path().join("parapetd.log")).unwrap_or_default();
    let after = tc_links(&sock);
    let nw0 = after
        .get("nw0")
        .copied()
        .unwrap_or_else(|| panic!("nw0 in the tc placement after the restart: {after:?}\n{log}"));
    assert!(
        held.contains(&nw0.0) && held.contains(&nw0.1),
        "nw0's links {nw0:?} are the staged ones the killed daemon held {held:?}\n{log}"
    );
    assert!(
        log.contains("adopted the pinned tc placement links of nw0"),
        "{log}"
    );
    for (i, ids) in &before {
        assert_eq!(after.get(i), Some(ids), "{i}: adopted, not re-attached");
    }
    assert_eq!(link_pins(&pins), pins_of(&after), "no staged or stray pin");
    let all: BTreeSet<u64> = after.values().flat_map(|l| [l.0, l.1]).collect();
    assert_eq!(
        tcx_links_held(&daemon),
        all,
        "no link held beside the placement's"
    );
    judged_on_nw0(&t, "after the restart");

    // an upgrade from that pin set: the same links run the new build
    drop(daemon);
    let _daemon = start_daemon_pinned(
        &t.r,
        dir.path(),
        &sock,
        &["--hook-placement", "tc", "--test-program-variant"],
    );
    let upgraded = tc_links(&sock);
    for (i, (inl, outl, prog)) in &after {
        let (inl2, outl2, prog2) = upgraded[i];
        assert_eq!(
            (inl2, outl2),
            (*inl, *outl),
            "{i}: the upgrade keeps the links"
        );
        assert_ne!(prog2, *prog, "{i}: the upgrade swaps the program");
    }
    assert_eq!(link_pins(&pins), pins_of(&upgraded), "no pin leaked");
    judged_on_nw0(&t, "after the upgrade");
    ok(&sock, &["detach"]);
    assert!(link_pins(&pins).is_empty(), "detach removes every link pin");
}
