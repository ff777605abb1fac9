//! `parapet run` end to end: a ruleset file compiled, loaded as eBPF and
//! attached (XDP and tc) to a veth in a network namespace this test
//! creates; UDP sent from a second namespace; every packet must be
//! delivered or dropped exactly as the linear engine says, and the
//! per-rule counters must count what was sent. Needs root (`#[ignore = "needs root"]`).

use parapet_model::{IfName, LinearEngine, NoSets, Packet, Verdict};
use std::io::{BufRead, BufReader};
use std::net::UdpSocket;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{host, in_netns, require_root, testbed, A_ADDR, B_ADDR};

/// (sport, dport) pairs sent, each probing a rule edge or a gap.
fn flows() -> Vec<(u16, u16)> {
    let mut v = Vec::new();
    for dport in [
        5000u16, 5001, 5009, 5010, 5011, 5020, 5021, 5030, 5099, 5100,
    ] {
        for sport in [40000u16, 40001, 41000] {
            v.push((sport, dport));
        }
    }
    v
}

const RULES: &str = "*filter
:INPUT ACCEPT [0:0]
:sub - [0:0]
-A INPUT -p udp -m udp --dport 5000 -j DROP
-A INPUT -p udp -m udp --dport 5001:5010 --sport 40000 -j DROP
-A INPUT -p udp -m udp --sport 40001 -j sub
-A INPUT -s 10.203.0.0/24 -p udp -m multiport --dports 5020,5030 -j REJECT --reject-with icmp-port-unreachable
-A INPUT -p udp -m udp --dport 5099 -j LOG --log-prefix \"e2e \"
-A INPUT -p udp -m udp --dport 5099:5100 -j DROP
-A sub -p udp -m udp --dport 5011 -j RETURN
-A sub -p udp -j DROP
COMMIT
";

fn scenario(hook: &str, background: bool) {
    require_root();
    let t = testbed(&hook[..1], &[]);
    let (_guard, a, b, va, vb) = (t.guard, t.a, t.b, t.va, t.vb);
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("e2e.rules");
    std::fs::write(&rules, RULES).unwrap();
    // Expected fate of each flow, from the reference engine.
    let parsed = parapet_parse::parse(RULES, "e2e.rules", parapet_parse::Format::Auto).unwrap();
    let rs = parsed.ruleset;
    let linear = LinearEngine::new(&rs, rs.select_chain(None).unwrap()).unwrap();
    let expect: Vec<(u16, u16, u32, bool)> = flows()
        .into_iter()
        .map(|(sport, dport)| {
            let mut p = Packet::v4(
                u32::from_be_bytes(A_ADDR),
                u32::from_be_bytes(B_ADDR),
                17,
                sport,
                dport,
            );
            p.iif = IfName::new(&vb).unwrap();
            let d = linear.classify(&p, &NoSets).unwrap();
            (sport, dport, d.rule_id, d.verdict == Verdict::Accept)
        })
        .collect();
    assert!(
        expect.iter().any(|e| e.3) && expect.iter().any(|e| !e.3),
        "the scenario must both pass and drop"
    );

    // XDP runs in the foreground; tc goes through --background / stop, so
    // both ways of running are covered.
    let pidfile = dir.path().join("run.pid");
    let mut child = None;
    if background {
        let out = Command::new("ip")
            .args([
                "netns",
                "exec",
                &b,
                env!("CARGO_BIN_EXE_parapet"),
                "run",
                rules.to_str().unwrap(),
                "--iface",
                &vb,
                "--hook",
                hook,
                "--seconds",
                "60",
                "--json",
                "--background",
            ])
            .arg(&pidfile)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr).to_string();
        if !out.status.success() {
            panic!("parapet run --background failed: {said}");
        }
        assert!(said.contains("attached"), "{said}");
    } else {
        let mut c = Command::new("ip")
            .args([
                "netns",
                "exec",
                &b,
                env!("CARGO_BIN_EXE_parapet"),
                "run",
                rules.to_str().unwrap(),
                "--iface",
                &vb,
                "--hook",
                hook,
                "--seconds",
                "20",
                "--json",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Wait until it says it is attached.
        let mut err = BufReader::new(c.stderr.take().unwrap());
        let mut line = String::new();
        let mut said = String::new();
        let t0 = Instant::now();
        while !line.contains("attached") {
            line.clear();
            if err.read_line(&mut line).unwrap() == 0 || t0.elapsed() > Duration::from_secs(30) {
                let _ = c.kill();
                let _ = c.wait();
                panic!("parapet run did not attach: {said}");
            }
            said.push_str(&line);
        }
        std::thread::spawn(move || for _ in err.lines() {});
        child = Some(c);
    }

    // Receivers in the filter namespace, one socket per destination port.
    let dports: Vec<u16> = {
        let mut d: Vec<u16> = flows().iter().map(|f| f.1).collect();
        d.dedup();
        d
    };
    let receivers: Vec<UdpSocket> = in_netns(&b, move || {
        dports
            .iter()
            .map(|p| {
                let s = UdpSocket::bind(("10.203.0.2", *p)).unwrap();
                s.set_read_timeout(Some(Duration::from_millis(300)))
                    .unwrap();
                s
            })
            .collect()
    });
    // Each flow sends ROUNDS packets, paced, from its own source port.
    const ROUNDS: usize = 3;
    in_netns(&a, || {
        let socks: Vec<(u16, UdpSocket)> = flows()
            .iter()
            .map(|f| f.0)
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .map(|sp| (sp, UdpSocket::bind(("10.203.0.1", sp)).unwrap()))
            .collect();
        for _ in 0..ROUNDS {
            for (sport, dport) in flows() {
                let s = &socks.iter().find(|(p, _)| *p == sport).unwrap().1;
                s.send_to(b"parapet e2e", ("10.203.0.2", dport)).unwrap();
                std::thread::sleep(Duration::from_millis(2));
            }
        }
    });
    let mut got: std::collections::HashMap<(u16, u16), usize> = Default::default();
    let mut buf = [0u8; 64];
    for s in &receivers {
        let dport = s.local_addr().unwrap().port();
        while let Ok((_, from)) = s.recv_from(&mut buf) {
            *got.entry((from.port(), dport)).or_default() += 1;
        }
    }
    for (sport, dport, rule, pass) in &expect {
        let n = got.get(&(*sport, *dport)).copied().unwrap_or(0);
        assert_eq!(
            n,
            if *pass { ROUNDS } else { 0 },
            "{hook}: flow {sport}->{dport} (rule {rule}, pass {pass}) delivered {n} of {ROUNDS}"
        );
    }
    // Stop it and read the counters (the last line of its output).
    let stdout = match child {
        Some(c) => {
            let _ = Command::new("kill")
                .args(["-INT", &c.id().to_string()])
                .status();
            c.wait_with_output().unwrap().stdout
        }
        None => {
            let out = Command::new("ip")
                .args(["netns", "exec", &b, env!("CARGO_BIN_EXE_parapet"), "stop"])
                .arg(&pidfile)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "parapet stop: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(!pidfile.exists(), "parapet stop leaves no pid file");
            out.stdout
        }
    };
    let text = String::from_utf8_lossy(&stdout).to_string();
    let last = text.lines().last().unwrap_or("");
    let report: serde_json::Value =
        serde_json::from_str(last).unwrap_or_else(|e| panic!("bad JSON {e}: {text}"));
    let counted = |id: u32| -> u64 {
        report["rules"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["rule"] == id)
            .map_or(0, |r| r["packets"].as_u64().unwrap())
    };
    // a REJECT flow's fate cannot tell a packet rejected from one lost on
    // the way: the veths' drop counters and the packets the program saw
    // (the report's) tell a lost packet from a miscounted one
    let sent = flows().len() * ROUNDS;
    let veth_stats = || {
        [(&a, &va), (&b, &vb)]
            .iter()
            .map(|(ns, dev)| {
                parapet_testbed::ip(&["-n", ns.as_str(), "-s", "link", "show", dev.as_str()])
                    .unwrap_or_else(|e| e)
            })
            .collect::<Vec<_>>()
            .join("")
    };
    for rule in 1..=rs.rule_count() as u32 {
        let want = expect.iter().filter(|e| e.2 == rule).count() * ROUNDS;
        if want > 0 && counted(rule) != want as u64 {
            panic!(
                "{hook}: counter of deciding rule {rule}: {} of {want} ({sent} packets sent); \
                 the report: {last}\nthe veths:\n{}",
                counted(rule),
                veth_stats()
            );
        }
    }
    assert_eq!(report["image_errors"], 0);
}

#[test]
#[ignore = "needs root"]
fn run_at_xdp_delivers_exactly_what_the_linear_engine_accepts() {
    scenario("xdp", false);
}

#[test]
#[ignore = "needs root"]
fn run_in_background_at_tc_delivers_exactly_what_the_linear_engine_accepts() {
    scenario("tc", true);
}

/// `parapet run` as a host firewall (`common::host`): the ruleset matches
/// ctstate, so the program runs with the conntrack lookup on and the nft
/// table `inet parapet_run_ct` exists while it runs and goes with it; the
/// host's own connections get their replies, the REJECT rules answer and
/// the rest is dropped.
fn host_scenario(hook: &str) {
    require_root();
    let bed = testbed(&format!("r{}", &hook[..1]), &[]);
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("host.rules");
    std::fs::write(&rules, host::rules()).unwrap();
    let _peer = host::xdp_peer(&bed, dir.path(), hook)
        .unwrap_or_else(|e| panic!("cannot run XDP on the peer: {e}"));
    let run = match host::run_background(&bed.b, dir.path(), "host", &rules, &bed.vb, hook) {
        Ok(r) => r,
        Err(e) => panic!("parapet run: {e}"),
    };
    assert!(host::nft_tables(&bed.b).contains("inet parapet_run_ct"));
    host::probe(&bed, hook);
    let said = run.stop();
    assert!(said.contains("conntrack lookup on"), "{said}");
    assert!(
        !host::nft_tables(&bed.b).contains("parapet_run_ct"),
        "{hook}: the conntrack table outlived parapet run"
    );
}

#[test]
#[ignore = "needs root"]
fn run_as_host_firewall_at_xdp_tracks_and_rejects() {
    host_scenario("xdp");
}

#[test]
#[ignore = "needs root"]
fn run_as_host_firewall_at_tc_tracks_and_rejects() {
    host_scenario("tc");
}
