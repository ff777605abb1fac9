//! `-m hashlimit` in the BPF walker (BPF_PROG_TEST_RUN on the real
//! program): on the test clock, a timed random sequence of packets from a
//! few addresses and ports (some sharing a /24 or a /64, so the masks
//! matter) over rules using every mode, upto and above, with pauses longer
//! than the tables' expiry, gives packet by packet what the Rust walker and
//! the linear engine (the specification, itself checked against
//! iptables-legacy by `parapet-parse/tests/hashlimit_kernel.rs`) give.

mod common;

use common::timed::{addr, agree_on_a_test_clock, Timed};
use common::wire::wire_packet;
use common::Rng;
use parapet_model::*;

/// The rules, on tables suffixed with `tag` (the BPF tables outlive an
/// image, so each run names its own).
fn rules(tag: &str, v6: bool) -> String {
    let (smask, dmask) = if v6 { (64, 120) } else { (24, 31) };
    format!(
        "*filter
:INPUT ACCEPT [0:0]
-A INPUT -p udp -m udp --dport 1 -m hashlimit --hashlimit-upto 4/sec --hashlimit-burst 3 --hashlimit-mode srcip --hashlimit-name A{tag} -j ACCEPT
-A INPUT -p udp -m udp --dport 1 -j DROP
-A INPUT -p udp -m udp --dport 2 -m hashlimit --hashlimit-above 2/sec --hashlimit-burst 2 --hashlimit-mode srcip,dstport --hashlimit-name B{tag} --hashlimit-srcmask {smask} -j DROP
-A INPUT -p udp -m udp --dport 3 -m hashlimit --hashlimit-upto 30/min --hashlimit-burst 4 --hashlimit-mode dstip,srcport --hashlimit-name C{tag} --hashlimit-htable-expire 1500 --hashlimit-dstmask {dmask} -j ACCEPT
-A INPUT -p udp -m udp --dport 3 -j REJECT
-A INPUT -p udp -m hashlimit --hashlimit-upto 10/sec --hashlimit-burst 5 --hashlimit-name D{tag} -j ACCEPT
-A INPUT -p udp -j DROP
COMMIT
"
    )
}

fn packet(v6: bool, rng: &mut Rng) -> Packet {
    let fam = if v6 { Family::V6 } else { Family::V4 };
    let (s, d) = (rng.below(3), rng.below(3));
    wire_packet(Packet::new(
        fam,
        addr(v6, s),
        addr(v6, d),
        17,
        1000 + rng.below(2) as u16,
        1 + rng.below(4) as u16,
    ))
}

#[test]
#[ignore = "needs root"]
fn bpf_walker_agrees_with_rust_and_linear_on_a_test_clock() {
    // Mostly quick packets, now and then a pause longer than the
    // expiry.
    agree_on_a_test_clock(&Timed {
        what: "hashlimit",
        rules,
        packet,
        seed: 11,
        long_every: 23,
        long_ns: 2_500_000_000,
        short_ns: 60_000_000,
    });
}
