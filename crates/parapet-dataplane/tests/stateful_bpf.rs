//! Stateful conditions (`limit`) in the BPF walker (BPF_PROG_TEST_RUN on
//! the real program): on the kernel's own clocks, a 1/hour burst-5 limit
//! lets exactly 5 of 20 quick packets through, for iptables' and nft's
//! arithmetic; with the test clock, timed random sequences over random
//! rulesets give, packet by packet, what the Rust walker and the linear
//! engine (the specification) give on the same clock.

mod common;

use common::lo::{dp_on_lo as dp, run_on_lo as run};
use common::wire::{frame_of, wire_packet};
use common::Rng;
use parapet_compile::{compile, Backend, CompileOptions, ImageState, Walker};
use parapet_dataplane::stateful::kernel_hz;
use parapet_dataplane::Dataplane;
use parapet_gen::{packets_for, random_ruleset, with_random_limits, RandomSpec};
use parapet_model::*;

fn install(dp: &mut Dataplane, rs: &Ruleset) -> parapet_compile::Image {
    let list = flatten(rs, rs.select_chain(None).unwrap()).unwrap();
    let (image, _) = compile(&list, &CompileOptions::default()).unwrap();
    dp.write_image(&image.to_bytes()).unwrap();
    dp.swap().unwrap();
    image
}

#[test]
#[ignore = "needs root"]
fn burst_of_five_on_the_kernels_clocks() {
    let mut dp = dp("burst_of_five_on_the_kernels_clocks");
    assert!(kernel_hz().is_some(), "the kernel's HZ must be known");
    let p = wire_packet(Packet::v4(0x0a00_0001, 0x0a00_0002, 17, 1000, 9));
    let frame = frame_of(&p);
    for (name, text, format) in [
        (
            "iptables",
            "*filter\n:INPUT DROP [0:0]\n-A INPUT -p udp -m udp --dport 9 -m limit --limit 1/hour --limit-burst 5 -j ACCEPT\nCOMMIT\n",
            parapet_parse::Format::IptablesSave,
        ),
        (
            "nft",
            "table inet t {\n\tchain input {\n\t\ttype filter hook input priority 0; policy drop;\n\t\tudp dport 9 limit rate 1/hour burst 5 packets accept\n\t}\n}\n",
            parapet_parse::Format::Nft,
        ),
    ] {
        let rs = parapet_parse::parse(text, name, format).unwrap().ruleset;
        install(&mut dp, &rs);
        let accepted = (0..20).filter(|_| run(&dp, &frame).0 == 1).count();
        assert_eq!(accepted, 5, "{name}");
        // A new ruleset starts with a full bucket, as the kernel's does.
        install(&mut dp, &rs);
        let again = (0..20).filter(|_| run(&dp, &frame).0 == 1).count();
        assert_eq!(again, 5, "{name} after a reload");
    }
}

#[test]
#[ignore = "needs root"]
fn bpf_walker_agrees_with_rust_and_linear_on_a_test_clock() {
    let mut dp = dp("bpf_walker_agrees_with_rust_and_linear_on_a_test_clock");
    let hz = kernel_hz().expect("the kernel's HZ must be known");
    let (mut checked, mut limited) = (0, 0);
    for seed in 0..8u64 {
        let mut rng = Rng::new(seed + 1);
        let spec = RandomSpec {
            rules: 10 + (seed as usize * 13) % 50,
            ipv6: seed % 2 == 1,
            ..RandomSpec::default()
        };
        let rs = with_random_limits(random_ruleset(seed, &spec), seed);
        let start = rs.select_chain(None).unwrap();
        let linear = LinearEngine::new(&rs, start).unwrap();
        let list = flatten(&rs, start).unwrap();
        let pkts: Vec<Packet> = packets_for(&rs, seed, 40)
            .into_iter()
            .map(wire_packet)
            .collect();
        for backend in [Backend::Linear, Backend::Tree] {
            let opts = CompileOptions {
                backend,
                ..CompileOptions::default()
            };
            let (image, _) = compile(&list, &opts).unwrap();
            let mut ns = 1_000_000_000u64 * (1 + seed);
            dp.set_test_clock(ns).unwrap();
            dp.write_image(&image.to_bytes()).unwrap();
            dp.swap().unwrap();
            let walker = Walker::new(image.clone());
            let clock = Clock { ns, hz };
            let mut spec_state = StatefulState::new(clock);
            let mut image_state = ImageState::new(&image, clock);
            for step in 0..300 {
                ns += rng.below(if step % 7 == 0 {
                    400_000_000
                } else {
                    3_000_000
                });
                dp.set_test_clock(ns).unwrap();
                spec_state.set_ns(ns);
                image_state.set_ns(ns);
                let p = &pkts[rng.below(pkts.len() as u64) as usize];
                let want = linear.classify_with(p, &NoSets, &mut spec_state).unwrap();
                let rust =
                    walker.decide_stateful(&parapet_compile::KeyWords::new(p, 0), &mut image_state);
                assert_eq!(
                    rust, want,
                    "seed {seed} step {step} {backend:?}: Rust walker"
                );
                let (rule, nonterm) = run(&dp, &frame_of(p));
                assert_eq!(
                    (rule, nonterm),
                    (want.rule_id, want.nonterminal.clone()),
                    "seed {seed} step {step} {backend:?}: BPF walker, {p:?}"
                );
                limited += (linear.classify(p, &NoSets).unwrap() != want) as usize;
                checked += 1;
            }
        }
    }
    dp.set_test_clock(0).unwrap();
    assert_eq!(checked, 8 * 2 * 300);
    assert!(
        limited > 50,
        "only {limited} packets were held back by a limit"
    );
}
