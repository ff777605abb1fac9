//! The kernel as the oracle for `-m recent`: the same ruleset goes into a
//! network namespace this test creates (`iptables-legacy-restore`), UDP
//! datagrams from several loopback sources go to 127.0.0.1 in a fixed
//! pseudo-random order of ports (each port a different use of the tables:
//! `--set`, `--rcheck`, `--update --seconds --hitcount`, `! --update`,
//! `--remove`, `--rdest`, `--mask`), and which of them arrive must equal,
//! datagram by datagram, what the linear engine decides for the same
//! sequence with its tables (`StatefulState`). Every `--seconds` window is
//! 60 s and the sequence takes a few seconds, so it does not depend on
//! timing; the SSH brute-force pair is its own sequence, and so is
//! `--rttl` (datagrams sent with different TTLs).

mod common;

use common::udp_lo;
use parapet_model::*;
use parapet_parse::*;
use parapet_testbed::Netns;
use std::net::Ipv4Addr;

/// The classic pair: `--set` every new attempt, drop the fourth within a
/// minute.
const SSH: &str = "*filter
:INPUT ACCEPT [0:0]
-A INPUT -i lo -p udp -m udp --dport 9022 -m recent --set --name SSH --rsource
-A INPUT -i lo -p udp -m udp --dport 9022 -m recent --update --seconds 60 --hitcount 4 --name SSH --rsource -j DROP
COMMIT
";

/// A `--hitcount` above 255, which Linux 6.11 and later accept (up to
/// 65,535; the corpus's `diekmann_typical_home_user.rules` has 348).
const MANY_HITS: &str = "*filter
:INPUT ACCEPT [0:0]
-A INPUT -i lo -p udp -m udp --dport 9030 -m recent --set --name H --rsource
-A INPUT -i lo -p udp -m udp --dport 9030 -m recent --rcheck --seconds 60 --hitcount 300 --name H --rsource -j DROP
COMMIT
";

/// Every command, sharing tables across rules.
const MIXED: &str = "*filter
:INPUT ACCEPT [0:0]
-A INPUT -i lo -p udp -m udp --dport 9001 -m recent --set --name A --rsource
-A INPUT -i lo -p udp -m udp --dport 9002 -m recent --rcheck --name A --rsource -j DROP
-A INPUT -i lo -p udp -m udp --dport 9003 -m recent --remove --name A --rsource -j DROP
-A INPUT -i lo -p udp -m udp --dport 9004 -m recent ! --update --seconds 60 --hitcount 2 --name A --rsource -j DROP
-A INPUT -i lo -p udp -m udp --dport 9005 -m recent --set --name B --mask 255.255.255.0 --rdest
-A INPUT -i lo -p udp -m udp --dport 9005 -m recent --update --hitcount 3 --name B --mask 255.255.255.0 --rdest -j DROP
-A INPUT -i lo -p udp -m udp --dport 9006 -m recent --rcheck --seconds 60 --hitcount 2 --name A --rsource -j DROP
-A INPUT -i lo -p udp -m udp --dport 9007 -m recent ! --rcheck --name B --mask 255.255.255.0 --rdest -j DROP
COMMIT
";

/// One datagram: (source host byte of 127.0.0.x, port, pause before it
/// in milliseconds).
type Send = (u8, u16, u64);

/// A [`Send`] with the TTL the datagram is sent with.
type SendTtl = (Send, u8);

fn arrivals(ns: &Netns, seq: &[SendTtl]) -> (Vec<bool>, Vec<u64>) {
    let seq: Vec<udp_lo::SendTtl> = seq
        .iter()
        .map(|((h, p, pause), ttl)| ((Ipv4Addr::new(127, 0, 0, *h), *p, *pause), *ttl))
        .collect();
    udp_lo::arrivals_ttl(ns, &seq)
}

/// The linear engine's fates for the same sequence at the same times.
fn engine_fates(rs: &Ruleset, seq: &[SendTtl], times: &[u64]) -> Vec<bool> {
    let engine = LinearEngine::new(rs, rs.select_chain(None).unwrap()).unwrap();
    let mut state = StatefulState::new(Clock {
        ns: 1_000_000,
        hz: 250,
    });
    seq.iter()
        .enumerate()
        .map(|(i, ((h, port, _), ttl))| {
            let src = u32::from(Ipv4Addr::new(127, 0, 0, *h));
            let mut pkt = Packet::v4(src, 0x7f00_0001, 17, 40000, *port);
            pkt.iif = IfName::new("lo").unwrap();
            pkt.ttl = *ttl;
            state.set_ns(1_000_000 + times[i]);
            let d = engine.classify_with(&pkt, &NoSets, &mut state).unwrap();
            d.verdict == Verdict::Accept
        })
        .collect()
}

fn compare(name: &str, text: &str, seq: &[Send]) -> Vec<bool> {
    let seq: Vec<SendTtl> = seq.iter().map(|s| (*s, 64)).collect();
    compare_ttl(name, text, &seq)
}

fn compare_ttl(name: &str, text: &str, seq: &[SendTtl]) -> Vec<bool> {
    // One namespace per test: the tests run at once.
    let ns = Netns::create(&format!("recent-{name}")).unwrap();
    udp_lo::load(&ns, &format!("recent-{name}"), text);
    let rs = parse(text, "recent.v4", Format::IptablesSave)
        .unwrap()
        .ruleset;
    let (kernel, times) = arrivals(&ns, seq);
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
fn ssh_brute_force_pair_agrees_with_iptables_legacy() {
    parapet_testbed::require_root();
    let seq: Vec<Send> = (0..8).map(|_| (2, 9022, 0)).chain([(3, 9022, 0)]).collect();
    let kernel = compare("ssh", SSH, &seq);
    // The fourth attempt within the minute and later ones are dropped; a
    // second address starts afresh.
    assert_eq!(
        kernel,
        [true, true, true, false, false, false, false, false, true]
    );
}

#[test]
#[ignore = "needs root"]
fn a_hitcount_above_255_agrees_with_iptables_legacy() {
    parapet_testbed::require_root();
    // 302 datagrams from one source, then one from another: the 300th
    // `--set` makes 300 stamps, and from then on `--rcheck` drops.
    let seq: Vec<Send> = (0..302)
        .map(|_| (2, 9030, 0))
        .chain([(3, 9030, 0)])
        .collect();
    let kernel = compare("many", MANY_HITS, &seq);
    let dropped: Vec<usize> = (0..kernel.len()).filter(|&i| !kernel[i]).collect();
    assert_eq!(dropped, [299, 300, 301], "the datagrams the kernel dropped");
}

#[test]
#[ignore = "needs root"]
fn every_command_agrees_with_iptables_legacy() {
    parapet_testbed::require_root();
    // A fixed pseudo-random sequence over three sources and seven ports.
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let seq: Vec<Send> = (0..90)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (2 + (x % 3) as u8, 9001 + ((x >> 8) % 7) as u16, 0)
        })
        .collect();
    let kernel = compare("mixed", MIXED, &seq);
    let dropped = kernel.iter().filter(|a| !**a).count();
    assert!(
        dropped > 10 && dropped < 80,
        "a sequence that tests something: {dropped} of 90 dropped"
    );
}

/// `--seconds` windows crossed on the real clock (pauses of 1.4 s around
/// 1 s windows, far from the edges), and `--reap`.
const TIMED: &str = "*filter
:INPUT ACCEPT [0:0]
-A INPUT -i lo -p udp -m udp --dport 9101 -m recent --set --name T --rsource
-A INPUT -i lo -p udp -m udp --dport 9102 -m recent --rcheck --seconds 1 --name T --rsource -j DROP
-A INPUT -i lo -p udp -m udp --dport 9103 -m recent --update --seconds 1 --hitcount 2 --name T --rsource -j DROP
-A INPUT -i lo -p udp -m udp --dport 9104 -m recent --rcheck --seconds 1 --reap --name T --rsource
-A INPUT -i lo -p udp -m udp --dport 9105 -m recent --rcheck --name T --rsource -j DROP
COMMIT
";

#[test]
#[ignore = "needs root"]
fn seconds_windows_and_reap_agree_with_iptables_legacy_on_the_real_clock() {
    parapet_testbed::require_root();
    let seq: Vec<Send> = vec![
        (2, 9101, 0),    // set
        (2, 9102, 0),    // young: dropped
        (2, 9102, 1400), // old: passes
        (2, 9105, 0),    // no --seconds: still there, dropped
        (2, 9101, 0),    // set again
        (2, 9103, 0),    // 2 stamps, 1 young: passes
        (2, 9101, 0),    // set
        (2, 9103, 0),    // 2 young: dropped (and updated)
        (2, 9103, 300),  // 3 young: dropped
        (2, 9103, 1400), // none young: passes
        (3, 9101, 0),    // a second address, newer
        (2, 9104, 0),    // reap: .2 is the oldest and stale: removed
        (2, 9105, 0),    // so no longer there: passes
        (3, 9105, 0),    // .3 stays: dropped
    ];
    let kernel = compare("timed", TIMED, &seq);
    assert_eq!(
        kernel,
        [true, false, true, false, true, true, true, false, false, true, true, true, true, false]
    );
}

/// `--rttl`: `--rcheck`/`--update` find an entry only when the datagram's
/// TTL is the one the last `--set`/`--update` recorded; without `--rttl`
/// the TTL does not matter.
const RTTL: &str = "*filter
:INPUT ACCEPT [0:0]
-A INPUT -i lo -p udp -m udp --dport 9201 -m recent --set --name L --rsource
-A INPUT -i lo -p udp -m udp --dport 9202 -m recent --rcheck --rttl --name L --rsource -j DROP
-A INPUT -i lo -p udp -m udp --dport 9203 -m recent --update --hitcount 2 --rttl --name L --rsource -j DROP
-A INPUT -i lo -p udp -m udp --dport 9204 -m recent --rcheck --name L --rsource -j DROP
-A INPUT -i lo -p udp -m udp --dport 9205 -m recent ! --rcheck --rttl --name L --rsource -j DROP
COMMIT
";

#[test]
#[ignore = "needs root"]
fn rttl_agrees_with_iptables_legacy() {
    parapet_testbed::require_root();
    let mut seq: Vec<SendTtl> = vec![
        ((2, 9201, 0), 64), // set, recording 64
        ((2, 9202, 0), 64), // the same TTL: dropped
        ((2, 9202, 0), 63), // another: not found, passes
        ((2, 9204, 0), 63), // without --rttl: dropped
        ((2, 9205, 0), 63), // ! and not found: dropped
        ((2, 9201, 0), 63), // set again, recording 63
        ((2, 9202, 0), 64), // passes now
        ((2, 9202, 0), 63), // dropped
        ((2, 9203, 0), 63), // 2 stamps at 63: dropped, records 63
        ((2, 9203, 0), 40), // another TTL: passes
        ((3, 9202, 0), 64), // a second address, never set: passes
    ];
    // Then a fixed pseudo-random sequence over two sources, the five
    // ports and three TTLs.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    seq.extend((0..80).map(|_| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let ttl = [1, 63, 64][(x >> 20) as usize % 3];
        ((2 + (x % 2) as u8, 9201 + ((x >> 8) % 5) as u16, 0), ttl)
    }));
    let kernel = compare_ttl("rttl", RTTL, &seq);
    assert_eq!(
        kernel[..11],
        [true, false, true, false, false, true, true, false, false, true, true]
    );
}
