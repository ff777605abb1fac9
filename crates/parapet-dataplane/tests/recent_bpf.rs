//! `-m recent` in the BPF walker (BPF_PROG_TEST_RUN on the real program):
//! on the test clock, a timed random sequence of packets from a few
//! addresses (some sharing a /24 or a /64, so `--mask` matters) over rules
//! using every command (and a `--hitcount` above 32, and `--rttl` with
//! two TTLs), with `--seconds` windows the clock crosses, gives
//! packet by packet what the Rust walker and the linear engine (the
//! specification, itself checked against iptables-legacy by
//! `parapet-parse/tests/recent_kernel.rs`) give; the SSH brute-force pair
//! drops the fourth attempt on the kernel's own clock.

mod common;

use common::lo::{dp_on_lo as dp, run_on_lo as run};
use common::timed::{addr, agree_on_a_test_clock, Timed};
use common::wire::{frame_of, wire_packet};
use common::Rng;
use parapet_compile::{compile, CompileOptions};
use parapet_dataplane::stateful::kernel_hz;
use parapet_model::*;

/// The rules, on tables suffixed with `tag` (the BPF tables outlive an
/// image, so each run names its own).
fn rules(tag: &str, v6: bool) -> String {
    let mask = if v6 {
        "ffff:ffff:ffff:ffff::"
    } else {
        "255.255.255.0"
    };
    // Every address in one entry: a hit count above the kernel's default
    // ring of 32 is reached.
    let zero = if v6 { "::" } else { "0.0.0.0" };
    format!(
        "*filter
:INPUT ACCEPT [0:0]
-A INPUT -p udp -m udp --dport 1 -m recent --set --name A{tag}
-A INPUT -p udp -m udp --dport 1 -m recent --update --seconds 2 --hitcount 3 --name A{tag} -j DROP
-A INPUT -p udp -m udp --dport 2 -m recent --rcheck --seconds 1 --name A{tag} -j DROP
-A INPUT -p udp -m udp --dport 3 -m recent --remove --name A{tag} -j REJECT
-A INPUT -p udp -m udp --dport 4 -m recent ! --update --seconds 3 --hitcount 2 --name A{tag} -j DROP
-A INPUT -p udp -m udp --dport 5 -m recent --set --name B{tag} --mask {mask} --rdest
-A INPUT -p udp -m udp --dport 5 -m recent --rcheck --hitcount 4 --name B{tag} --mask {mask} --rdest -j DROP
-A INPUT -p udp -m udp --dport 6 -m recent ! --rcheck --name B{tag} --mask {mask} --rdest -j DROP
-A INPUT -p udp -m udp --dport 7 -m recent --set --name C{tag} --mask {mask}
-A INPUT -p udp -m udp --dport 7 -m recent --rcheck --seconds 2 --hitcount 2 --name C{tag} --mask {mask} -j DROP
-A INPUT -p udp -m udp --dport 8 -m recent --set --name D{tag} --mask {zero}
-A INPUT -p udp -m udp --dport 8 -m recent --update --hitcount 40 --name D{tag} --mask {zero} -j DROP
-A INPUT -p udp -m udp --dport 9 -m recent --rcheck --rttl --name A{tag} -j DROP
-A INPUT -p udp -m udp --dport 10 -m recent --update --hitcount 2 --rttl --name C{tag} --mask {mask} -j DROP
COMMIT
"
    )
}

fn packet(v6: bool, rng: &mut Rng) -> Packet {
    let fam = if v6 { Family::V6 } else { Family::V4 };
    let (s, d) = (rng.below(3), rng.below(3));
    let mut p = Packet::new(
        fam,
        addr(v6, s),
        addr(v6, d),
        17,
        1000,
        1 + rng.below(10) as u16,
    );
    // two TTLs, so --rttl finds and misses
    p.ttl = 63 + rng.below(2) as u8;
    wire_packet(p)
}

#[test]
#[ignore = "needs root"]
fn bpf_walker_agrees_with_rust_and_linear_on_a_test_clock() {
    // Mostly quick packets, now and then a pause longer than the
    // windows.
    agree_on_a_test_clock(&Timed {
        what: "recent",
        rules,
        packet,
        seed: 7,
        long_every: 9,
        long_ns: 3_500_000_000,
        short_ns: 150_000_000,
    });
}

/// Two stateful matches in one rule, in both orders (the corpus's
/// `cfg_AG7GN_rmsgw_rules.v4` writes `-m recent --update … -m limit …`),
/// and a hashlimit, a recent and a port match after both: flattened into
/// chained guards, one stateful row per condition.
fn paired_rules(tag: &str, _v6: bool) -> String {
    format!(
        "*filter
:INPUT ACCEPT [0:0]
-A INPUT -p udp -m udp --dport 1 -m recent --set --name P{tag}
-A INPUT -p udp -m udp --dport 1 -m recent --update --seconds 2 --hitcount 3 --name P{tag} -m limit --limit 2/sec --limit-burst 2 -j DROP
-A INPUT -p udp -m udp --dport 2 -m limit --limit 3/sec --limit-burst 2 -m recent --set --name Q{tag} -j DROP
-A INPUT -p udp -m udp --dport 3 -m recent --rcheck --seconds 2 --name Q{tag} -j DROP
-A INPUT -p udp -m hashlimit --hashlimit-upto 2/sec --hashlimit-burst 2 --hashlimit-name H{tag} -m recent --rcheck --name P{tag} -m udp --dport 4:5 -j DROP
COMMIT
"
    )
}

#[test]
#[ignore = "needs root"]
fn two_conditions_in_one_rule_agree_on_a_test_clock() {
    agree_on_a_test_clock(&Timed {
        what: "recent",
        rules: paired_rules,
        packet,
        seed: 11,
        long_every: 9,
        long_ns: 3_500_000_000,
        short_ns: 150_000_000,
    });
}

#[test]
#[ignore = "needs root"]
fn ssh_pair_on_the_kernels_clock() {
    let mut dp = dp("recent_ssh_pair_on_the_kernels_clock");
    assert!(kernel_hz().is_some(), "the kernel's HZ must be known");
    let text = "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -p udp -m udp --dport 22 -m recent --set --name SSHK\n-A INPUT -p udp -m udp --dport 22 -m recent --update --seconds 60 --hitcount 4 --name SSHK -j DROP\nCOMMIT\n";
    let rs = parapet_parse::parse(text, "ssh.v4", parapet_parse::Format::IptablesSave)
        .unwrap()
        .ruleset;
    let list = flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
    let (image, _) = compile(&list, &CompileOptions::default()).unwrap();
    dp.write_image(&image.to_bytes()).unwrap();
    dp.swap().unwrap();
    let attempt = |src: u32| frame_of(&wire_packet(Packet::v4(src, 0x0a00_0002, 17, 1000, 22)));
    let fates: Vec<u32> = (0..6).map(|_| run(&dp, &attempt(0x0a00_0001)).0).collect();
    assert_eq!(fates, [0, 0, 0, 2, 2, 2], "rule 2 drops from the fourth");
    assert_eq!(run(&dp, &attempt(0x0a00_0003)).0, 0, "another address");
    // The table outlives a reload, as the kernel's does while a rule names
    // it.
    dp.write_image(&image.to_bytes()).unwrap();
    dp.swap().unwrap();
    assert_eq!(run(&dp, &attempt(0x0a00_0001)).0, 2, "after a reload");
}
