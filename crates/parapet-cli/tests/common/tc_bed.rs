//! The tc placement's end-to-end bed (tc_placement_new_links.rs,
//! tc_placement_staged_pins.rs): parapetd in the router bed's R with a
//! ruleset applied and attached without an interface, a veth pair made
//! after that (`nw0` in R, `nw1` in L), and the placement's links as
//! `stats` shows them.

use super::daemon::{ok, parapet, stats};
use super::router::{
    run_probes, start_daemon_pinned, start_daemon_with, topo, Daemon, Outcome, Probe, RemovePins,
    Topo,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// R's address on the interface made after `attach`.
pub const NEW_R: &str = "10.71.9.1";
/// L's address on it.
pub const NEW_L: &str = "10.71.9.2";

/// A router bed with parapetd in R. Fields drop in order: the daemon is
/// killed, then its pins go, then the namespaces (whose drop checks that
/// no pin is left), then the state directory.
pub struct TcBed {
    pub daemon: Option<Daemon>,
    /// The daemon's pins (host bpffs) when started pinned: removed on
    /// drop, also when an assertion fails.
    pub pins: Option<RemovePins>,
    pub t: Topo,
    /// The daemon's socket.
    pub sock: PathBuf,
    /// The ruleset file applied at the start.
    pub rules: PathBuf,
    pinned: bool,
    pub dir: tempfile::TempDir,
}

impl TcBed {
    /// parapetd (with `flags`) in a fresh router bed named `tag`; `rules`
    /// applied and attached without an interface. `pinned`: the daemon
    /// enters only R's network namespace, so its pins outlive it
    /// ([`start_daemon_pinned`]).
    pub fn new(tag: &str, rules: &str, pinned: bool, flags: &[&str]) -> TcBed {
        let t = topo(tag);
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("parapetd.sock");
        let file = dir.path().join("rules");
        std::fs::write(&file, rules).unwrap();
        let mut bed = TcBed {
            daemon: None,
            pins: pinned.then(|| RemovePins::of(&t.r, dir.path())),
            t,
            sock,
            rules: file,
            pinned,
            dir,
        };
        bed.start(flags);
        ok(&bed.sock, &["apply", bed.rules.to_str().unwrap()]);
        let o = parapet(&bed.sock, &["attach"]);
        assert!(o.status.success(), "{o:?}");
        if let Some(pins) = &bed.pins {
            pins.assert_daemon_pins_here(&bed.sock);
        }
        bed
    }

    /// Starts parapetd (again) with `flags`, as [`TcBed::new`] did.
    pub fn start(&mut self, flags: &[&str]) {
        let (r, dir, sock) = (&self.t.r, self.dir.path(), &self.sock);
        self.daemon = Some(if self.pinned {
            start_daemon_pinned(r, dir, sock, flags)
        } else {
            start_daemon_with(r, dir, sock, flags)
        });
    }

    /// The pin directory (started pinned).
    pub fn pin_dir(&self) -> PathBuf {
        self.pins.as_ref().expect("started pinned").dir()
    }

    /// `parapet apply` of the bed's ruleset file, started and left running
    /// (its output piped): with `--test-apply-hold-ms` it holds the state
    /// lock while the test acts.
    pub fn apply_in_background(&self) -> Child {
        Command::new(env!("CARGO_BIN_EXE_parapet"))
            .args(["--socket", self.sock.to_str().unwrap(), "apply"])
            .arg(&self.rules)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// parapetd's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("parapetd.log")).unwrap_or_default()
    }
}

/// A veth pair made after `attach`: `nw0` in R ([`NEW_R`]), `nw1` in L
/// ([`NEW_L`]), both up — an interface new to the daemon. Made in L, one
/// end moved to R: R never sees `nw1`.
pub fn late_veth(t: &Topo) {
    t.l.ip(&["link", "add", "nw1", "type", "veth", "peer", "name", "nw0"])
        .unwrap();
    t.l.ip(&["link", "set", "nw0", "netns", t.r.name()])
        .unwrap();
    t.r.ip(&["addr", "add", &format!("{NEW_R}/24"), "dev", "nw0"])
        .unwrap();
    t.r.ip(&["link", "set", "nw0", "up"]).unwrap();
    t.l.ip(&["addr", "add", &format!("{NEW_L}/24"), "dev", "nw1"])
        .unwrap();
    t.l.ip(&["link", "set", "nw1", "up"]).unwrap();
}

/// One interface's tc placement links in `stats`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcLinkIds {
    pub ingress: u64,
    pub egress: u64,
    /// The program the ingress link runs.
    pub ingress_prog: u64,
}

/// The tc placement's links in `stats`, by interface.
pub fn tc_links(sock: &Path) -> BTreeMap<String, TcLinkIds> {
    let s = stats(sock);
    s["dataplane"]["attachments"][0]["tc_links"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|l| {
                    let id = |d: &str, k: &str| l[d][k].as_u64().unwrap_or(0);
                    let ids = TcLinkIds {
                        ingress: id("ingress", "link_id"),
                        egress: id("egress", "link_id"),
                        ingress_prog: id("ingress", "prog_id"),
                    };
                    (l["iface"].as_str().unwrap_or("").to_string(), ids)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The interfaces carrying the tc placement's links (`stats`).
pub fn tc_ifaces(sock: &Path) -> Vec<String> {
    tc_links(sock).into_keys().collect()
}

/// Sends `probes` ([`run_probes`], `counters` read for each) again and
/// again until their outcome is `want`, for at most 30 s.
pub fn outcome_becomes(
    t: &Topo,
    what: &str,
    probes: &[Probe],
    counters: &dyn Fn() -> BTreeMap<u32, u64>,
    want: &Outcome,
) {
    let t0 = Instant::now();
    loop {
        let got = run_probes(t, false, probes, counters);
        if &got == want {
            return;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "{what}: {got:?}, not {want:?}"
        );
    }
}
