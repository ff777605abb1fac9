//! The kernel as the oracle for `-m hashlimit`: the same ruleset goes into
//! a network namespace this test creates (`iptables-legacy-restore`), UDP
//! datagrams from several loopback sources (two in one /24, one in
//! another) go to 127.0.0.1 in a fixed pseudo-random order of ports (each
//! port a different use of the tables: per source, per source and port, a
//! source mask, one bucket for all, upto and above, a table two rules
//! share), and which of them arrive must equal, datagram by datagram, what
//! the linear engine decides for the same sequence with its tables
//! (`StatefulState`). The rates are 1/hour there, so the sequence does not
//! depend on timing; the refill and the expiry on the real clock are a
//! sequence of their own, with pauses far from the thresholds.

mod common;

use common::udp_lo::{self, Send};
use parapet_model::*;
use parapet_parse::*;
use parapet_testbed::Netns;
use std::net::Ipv4Addr;

const MIXED: &str = "*filter
:INPUT ACCEPT [0:0]
-A INPUT -i lo -p udp -m udp --dport 9001 -m hashlimit --hashlimit-upto 1/hour --hashlimit-burst 3 --hashlimit-mode srcip --hashlimit-name A -j ACCEPT
-A INPUT -i lo -p udp -m udp --dport 9001 -j DROP
-A INPUT -i lo -p udp -m udp --dport 9002 -m hashlimit --hashlimit-above 1/hour --hashlimit-burst 2 --hashlimit-mode srcip,dstport --hashlimit-name B -j DROP
-A INPUT -i lo -p udp -m udp --dport 9003 -m hashlimit --hashlimit-above 1/hour --hashlimit-burst 2 --hashlimit-mode srcip,dstport --hashlimit-name B -j DROP
-A INPUT -i lo -p udp -m udp --dport 9004 -m hashlimit --hashlimit-upto 1/hour --hashlimit-burst 4 --hashlimit-mode srcip --hashlimit-name C --hashlimit-srcmask 24 -j ACCEPT
-A INPUT -i lo -p udp -m udp --dport 9004 -j DROP
-A INPUT -i lo -p udp -m udp --dport 9005:9006 -m hashlimit --hashlimit-upto 1/hour --hashlimit-burst 5 --hashlimit-name D -j ACCEPT
-A INPUT -i lo -p udp -m udp --dport 9005:9006 -j DROP
-A INPUT -i lo -p udp -m udp --dport 9007 -m hashlimit --hashlimit-upto 1/hour --hashlimit-burst 2 --hashlimit-mode srcport,dstip,dstport --hashlimit-name E -j ACCEPT
-A INPUT -i lo -p udp -m udp --dport 9007 -j DROP
COMMIT
";

/// Rules of one chain naming one table with other settings (the corpus's
/// `diekmann_typical_home_user.rules`): the first configures the table;
/// the second's burst 9 and `srcip,dstport` key are not what counts, its
/// `--hashlimit-above` is.
const SHARED: &str = "*filter
:INPUT ACCEPT [0:0]
-A INPUT -i lo -p udp -m udp --dport 9201 -m hashlimit --hashlimit-upto 1/hour --hashlimit-burst 3 --hashlimit-mode srcip --hashlimit-name S -j ACCEPT
-A INPUT -i lo -p udp -m udp --dport 9201 -j DROP
-A INPUT -i lo -p udp -m udp --dport 9202 -m hashlimit --hashlimit-above 2/hour --hashlimit-burst 9 --hashlimit-mode srcip,dstport --hashlimit-name S -j DROP
COMMIT
";

/// Refill at the rate and expiry, on the real clock.
const TIMED: &str = "*filter
:INPUT ACCEPT [0:0]
-A INPUT -i lo -p udp -m udp --dport 9101 -m hashlimit --hashlimit-upto 2/sec --hashlimit-burst 2 --hashlimit-mode srcip --hashlimit-name T --hashlimit-htable-expire 10000 -j ACCEPT
-A INPUT -i lo -p udp -m udp --dport 9101 -j DROP
-A INPUT -i lo -p udp -m udp --dport 9102 -m hashlimit --hashlimit-upto 1/min --hashlimit-burst 1 --hashlimit-name X --hashlimit-htable-gcinterval 100 --hashlimit-htable-expire 400 -j ACCEPT
-A INPUT -i lo -p udp -m udp --dport 9102 -j DROP
COMMIT
";

/// The linear engine's fates for the same sequence at the same times.
fn engine_fates(rs: &Ruleset, seq: &[Send], times: &[u64]) -> Vec<bool> {
    let engine = LinearEngine::new(rs, rs.select_chain(None).unwrap()).unwrap();
    let hz = kernel_hz();
    let mut state = StatefulState::new(Clock { ns: 1_000_000, hz });
    seq.iter()
        .enumerate()
        .map(|(i, (a, port, _))| {
            let mut pkt = Packet::v4(u32::from(*a), 0x7f00_0001, 17, 40000, *port);
            pkt.iif = IfName::new("lo").unwrap();
            state.set_ns(1_000_000 + times[i]);
            let d = engine.classify_with(&pkt, &NoSets, &mut state).unwrap();
            d.verdict == Verdict::Accept
        })
        .collect()
}

/// The running kernel's `CONFIG_HZ` (the credits per jiffy depend on it),
/// from its configuration; 250 when it does not say.
fn kernel_hz() -> u32 {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let config = std::process::Command::new("sh")
        .args([
            "-c",
            "zcat /proc/config.gz 2>/dev/null || cat /boot/config-$1",
        ])
        .arg("-")
        .arg(release.trim())
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    config
        .lines()
        .find_map(|l| l.strip_prefix("CONFIG_HZ="))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(250)
}

fn compare(name: &str, text: &str, seq: &[Send]) -> Vec<bool> {
    // One namespace per test: the tests run at once.
    let ns = Netns::create(&format!("hashlimit-{name}")).unwrap();
    udp_lo::load(&ns, &format!("hashlimit-{name}"), text);
    let rs = parse(text, "hashlimit.v4", Format::IptablesSave)
        .unwrap()
        .ruleset;
    let (kernel, times) = udp_lo::arrivals(&ns, seq);
    let parapet = engine_fates(&rs, seq, &times);
    for (i, (k, p)) in kernel.iter().zip(&parapet).enumerate() {
        assert_eq!(
            p, k,
            "{name}: datagram {i} {:?}: parapet vs the kernel (kernel: {kernel:?})",
            seq[i]
        );
    }
    kernel
}

#[test]
#[ignore = "needs root"]
fn every_mode_agrees_with_iptables_legacy() {
    parapet_testbed::require_root();
    let srcs = [
        Ipv4Addr::new(127, 0, 0, 2),
        Ipv4Addr::new(127, 0, 0, 3),
        Ipv4Addr::new(127, 0, 1, 2),
    ];
    // A fixed pseudo-random sequence over three sources and seven ports.
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let seq: Vec<Send> = (0..120)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (srcs[(x % 3) as usize], 9001 + ((x >> 8) % 7) as u16, 0)
        })
        .collect();
    let kernel = compare("mixed", MIXED, &seq);
    let dropped = kernel.iter().filter(|a| !**a).count();
    assert!(
        dropped > 20 && dropped < 100,
        "a sequence that tests something: {dropped} of 120 dropped"
    );
}

#[test]
#[ignore = "needs root"]
fn a_table_shared_with_other_settings_agrees_with_iptables_legacy() {
    parapet_testbed::require_root();
    let srcs = [Ipv4Addr::new(127, 0, 0, 2), Ipv4Addr::new(127, 0, 0, 3)];
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let seq: Vec<Send> = (0..40)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (srcs[(x % 2) as usize], 9201 + ((x >> 8) % 2) as u16, 0)
        })
        .collect();
    let kernel = compare("shared", SHARED, &seq);
    let dropped = kernel.iter().filter(|a| !**a).count();
    assert!(
        dropped > 10 && dropped < 35,
        "a sequence that tests something: {dropped} of 40 dropped"
    );
}

#[test]
#[ignore = "needs root"]
fn refill_and_expiry_agree_with_iptables_legacy_on_the_real_clock() {
    parapet_testbed::require_root();
    let a = Ipv4Addr::new(127, 0, 0, 2);
    let b = Ipv4Addr::new(127, 0, 0, 3);
    let seq: Vec<Send> = vec![
        (a, 9101, 0),    // burst
        (a, 9101, 0),    // burst
        (a, 9101, 0),    // empty: dropped
        (b, 9101, 0),    // another source: its own bucket
        (a, 9101, 250),  // 0.5 of a packet's credit: dropped
        (a, 9101, 350),  // 1.2: passes
        (a, 9101, 0),    // 0.2: dropped
        (a, 9101, 1600), // refilled to the burst: passes
        (a, 9101, 0),    // passes
        (a, 9101, 0),    // dropped
        (a, 9102, 0),    // 1/min, burst 1: passes
        (a, 9102, 0),    // dropped
        (a, 9102, 100),  // still the entry (expire 400 ms): dropped
        (a, 9102, 2500), // expired and collected: a full entry, passes
        (a, 9102, 0),    // dropped
    ];
    let kernel = compare("timed", TIMED, &seq);
    assert_eq!(
        kernel,
        [
            true, true, false, true, false, true, false, true, true, false, true, false, false,
            true, false
        ]
    );
}
