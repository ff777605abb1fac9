//! `-m statistic` in the BPF walker (BPF_PROG_TEST_RUN on the real
//! program): `--mode nth` rules (plain, `!`, behind a match that fails for
//! some packets and with a match after it) decide, packet by packet, what
//! the Rust walker and the linear engine decide, from both backends and
//! again after a reload (the counter starts again); `--mode random` with
//! probability 0 and 1 exactly, 0.5 within a binomial bound that a walker
//! matching always or never fails.

mod common;

use common::lo::{dp_on_lo as dp, run_on_lo as run};
use common::wire::{frame_of, wire_packet};
use parapet_compile::{compile, Backend, CompileOptions, ImageState, KeyWords, Walker};
use parapet_model::*;

const NTH: &str = "*filter
:INPUT ACCEPT [0:0]
-A INPUT -p udp -m udp --dport 9001 -m statistic --mode nth --every 3 --packet 1 -j DROP
-A INPUT -p udp -m udp --dport 9002 -m statistic --mode nth ! --every 4 --packet 2 -j DROP
-A INPUT -s 10.0.0.1/32 -p udp -m statistic --mode nth --every 2 --packet 0 -m udp --dport 9003 -j DROP
-A INPUT -p udp -m udp --dport 9004 -m statistic --mode random --probability 0 -j DROP
-A INPUT -p udp -m udp --dport 9005 -m statistic --mode random --probability 1 -j DROP
COMMIT
";

fn packets() -> Vec<Packet> {
    let ports = [
        9001, 9003, 9002, 9001, 9003, 9004, 9003, 9005, 9001, 9002, 9003,
    ];
    (0..90u32)
        .map(|i| {
            let src = if (i / 5) % 3 == 2 {
                0x0a00_0009
            } else {
                0x0a00_0001
            };
            let port = ports[i as usize % ports.len()];
            wire_packet(Packet::v4(src, 0x0a00_0002, 17, 40000, port))
        })
        .collect()
}

#[test]
#[ignore = "needs root"]
fn nth_and_random_extremes_agree_with_rust_and_linear() {
    let mut dp = dp("nth_and_random_extremes_agree_with_rust_and_linear");
    let rs = parapet_parse::parse(NTH, "nth.v4", parapet_parse::Format::IptablesSave)
        .unwrap()
        .ruleset;
    let start = rs.select_chain(None).unwrap();
    let linear = LinearEngine::new(&rs, start).unwrap();
    let list = flatten(&rs, start).unwrap();
    let pkts = packets();
    let mut dropped = 0;
    for backend in [Backend::Linear, Backend::Tree] {
        let (image, _) = compile(
            &list,
            &CompileOptions {
                backend,
                ..CompileOptions::default()
            },
        )
        .unwrap();
        // Twice: a reload starts every counter again, as in the kernel.
        for round in 0..2 {
            dp.write_image(&image.to_bytes()).unwrap();
            dp.swap().unwrap();
            let walker = Walker::new(image.clone());
            let clock = Clock { ns: 1, hz: 250 };
            let mut spec_state = StatefulState::new(clock);
            let mut image_state = ImageState::new(&image, clock);
            for (i, p) in pkts.iter().enumerate() {
                let want = linear.classify_with(p, &NoSets, &mut spec_state).unwrap();
                let rust = walker.decide_stateful(&KeyWords::new(p, 0), &mut image_state);
                assert_eq!(
                    rust, want,
                    "{backend:?} round {round} packet {i}: Rust walker"
                );
                assert_eq!(
                    run(&dp, &frame_of(p)),
                    (want.rule_id, want.nonterminal.clone()),
                    "{backend:?} round {round} packet {i}: BPF walker, {p:?}"
                );
                dropped += (want.verdict == Verdict::Drop) as usize;
            }
        }
    }
    assert!(
        dropped > 40 && dropped < 4 * pkts.len() - 40,
        "{dropped} drops: the sequence tells nothing"
    );
}

#[test]
#[ignore = "needs root"]
fn random_half_is_within_five_sigma() {
    const N: usize = 2000;
    // 5 sigma of Binomial(2000, 1/2): 5 × sqrt(500) ≈ 112.
    const BOUND: usize = 112;
    let mut dp = dp("random_half_is_within_five_sigma");
    for (text, lo, hi) in [
        (
            "-m statistic --mode random --probability 0.5",
            N / 2 - BOUND,
            N / 2 + BOUND,
        ),
        (
            "-m statistic --mode random ! --probability 0.5",
            N / 2 - BOUND,
            N / 2 + BOUND,
        ),
        ("-m statistic --mode random --probability 0.0", 0, 0),
        ("-m statistic --mode random ! --probability 1.0", 0, 0),
        ("-m statistic --mode random --probability 1.0", N, N),
    ] {
        let file =
            format!("*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -p udp {text} -j DROP\nCOMMIT\n");
        let rs = parapet_parse::parse(&file, "r.v4", parapet_parse::Format::IptablesSave)
            .unwrap()
            .ruleset;
        let list = flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
        let (image, _) = compile(&list, &CompileOptions::default()).unwrap();
        dp.write_image(&image.to_bytes()).unwrap();
        dp.swap().unwrap();
        let frame = frame_of(&wire_packet(Packet::v4(
            0x0a00_0001,
            0x0a00_0002,
            17,
            40000,
            9,
        )));
        let rule = rs.rules().next().unwrap().id;
        let matched = (0..N).filter(|_| run(&dp, &frame).0 == rule).count();
        assert!(
            (lo..=hi).contains(&matched),
            "{text}: the BPF walker matched {matched} of {N}"
        );
    }
}
