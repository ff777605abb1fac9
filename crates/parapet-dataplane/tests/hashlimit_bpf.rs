//! `-m hashlimit` in the BPF walker (BPF_PROG_TEST_RUN on the real
//! program): on the test clock, a timed random sequence of packets from a
//! few addresses and ports (some sharing a /24 or a /64, so the masks
//! matter) over rules using every mode, upto and above, with pauses longer
//! than the tables' expiry, gives packet by packet what the Rust walker and
//! the linear engine (the specification, itself checked against
//! iptables-legacy by `parapet-parse/tests/hashlimit_kernel.rs`) give.

mod common;

use common::lo::{dp_on_lo as dp, run_on_lo as run};
use common::wire::{frame_of, wire_packet};
use common::Rng;
use parapet_compile::{compile, Backend, CompileOptions, ImageState, KeyWords, Walker};
use parapet_dataplane::stateful::kernel_hz;
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

/// A few addresses: two in one /24 (/64), one elsewhere.
fn addr(v6: bool, i: u64) -> u128 {
    let v4 = [0x0a00_0001u32, 0x0a00_0002, 0x0a00_0101][i as usize % 3];
    if v6 {
        (0x2001_0db8u128 << 96) | ((v4 as u128 & 0xff00) << 56) | (v4 as u128 & 0xff)
    } else {
        v4 as u128
    }
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
    let mut dp = dp("hashlimit_bpf_walker_agrees_with_rust_and_linear");
    let hz = kernel_hz().expect("the kernel's HZ must be known");
    let (mut checked, mut held) = (0, 0);
    for (run_no, (v6, backend)) in [
        (false, Backend::Linear),
        (false, Backend::Tree),
        (true, Backend::Linear),
        (true, Backend::Tree),
    ]
    .into_iter()
    .enumerate()
    {
        let text = rules(&run_no.to_string(), v6);
        let format = if v6 {
            parapet_parse::Format::Ip6tablesSave
        } else {
            parapet_parse::Format::IptablesSave
        };
        let rs = parapet_parse::parse(&text, "hashlimit", format)
            .unwrap_or_else(|e| panic!("{e:?}"))
            .ruleset;
        let start = rs.select_chain(None).unwrap();
        let linear = LinearEngine::new(&rs, start).unwrap();
        let list = flatten(&rs, start).unwrap();
        let opts = CompileOptions {
            backend,
            ..CompileOptions::default()
        };
        let (image, _) = compile(&list, &opts).unwrap();
        let mut ns = 1_000_000_000u64 * (1 + run_no as u64);
        dp.set_test_clock(ns).unwrap();
        dp.write_image(&image.to_bytes()).unwrap();
        dp.swap().unwrap();
        let walker = Walker::new(image.clone());
        let clock = Clock { ns, hz };
        let mut spec = StatefulState::new(clock);
        let mut image_state = ImageState::new(&image, clock);
        let mut rng = Rng::new(run_no as u64 + 11);
        for step in 0..400 {
            // Mostly quick packets, now and then a pause longer than the
            // expiry.
            ns += rng.below(if step % 23 == 0 {
                2_500_000_000
            } else {
                60_000_000
            });
            dp.set_test_clock(ns).unwrap();
            spec.set_ns(ns);
            image_state.set_ns(ns);
            let p = packet(v6, &mut rng);
            let want = linear.classify_with(&p, &NoSets, &mut spec).unwrap();
            let rust = walker.decide_stateful(&KeyWords::new(&p, 0), &mut image_state);
            assert_eq!(rust, want, "run {run_no} step {step}: Rust walker, {p:?}");
            let got = run(&dp, &frame_of(&p));
            assert_eq!(
                got,
                (want.rule_id, want.nonterminal.clone()),
                "run {run_no} step {step} {backend:?}: BPF walker, {p:?}"
            );
            held += (linear.classify(&p, &NoSets).unwrap() != want) as usize;
            checked += 1;
        }
    }
    dp.set_test_clock(0).unwrap();
    assert_eq!(checked, 4 * 400);
    assert!(
        held > 100,
        "only {held} packets were decided otherwise than with every hashlimit match assumed"
    );
}
