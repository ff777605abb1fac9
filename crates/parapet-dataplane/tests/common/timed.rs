//! The stateful matches' agreement check on the test clock, shared by
//! `hashlimit_bpf.rs` and `recent_bpf.rs`: per family and backend, a
//! ruleset is loaded into the real program, then a timed random sequence
//! of packets is decided by the linear engine (the specification), the
//! Rust walker and the BPF walker, packet by packet, with the same clock.

use super::lo::{dp_on_lo, run_on_lo};
use super::wire::frame_of;
use super::Rng;
use parapet_compile::{compile, Backend, CompileOptions, ImageState, KeyWords, Walker};
use parapet_dataplane::stateful::kernel_hz;
use parapet_model::*;

/// A few addresses: two in one /24 (one /64), one elsewhere.
pub fn addr(v6: bool, i: u64) -> u128 {
    let v4 = [0x0a00_0001u32, 0x0a00_0002, 0x0a00_0101][i as usize % 3];
    if v6 {
        (0x2001_0db8u128 << 96) | ((v4 as u128 & 0xff00) << 56) | (v4 as u128 & 0xff)
    } else {
        v4 as u128
    }
}

/// One match's timed runs.
pub struct Timed<'a> {
    /// The match (`hashlimit`, `recent`): the dataplane's and the
    /// ruleset's names, and the failure message's.
    pub what: &'a str,
    /// The rules, on tables suffixed with the tag (the BPF tables outlive
    /// an image, so each run names its own), IPv6 when asked.
    pub rules: fn(&str, bool) -> String,
    /// One random packet of the family.
    pub packet: fn(bool, &mut Rng) -> Packet,
    /// Added to the run number to seed each run's generator.
    pub seed: u64,
    /// Every this many steps the clock jumps by up to `long_ns`
    /// (beyond the tables' expiry or windows), otherwise by up to
    /// `short_ns`.
    pub long_every: u64,
    pub long_ns: u64,
    pub short_ns: u64,
}

const STEPS: u64 = 400;

/// Runs IPv4 and IPv6 on both backends; fails at the first packet the
/// three decide differently, or when fewer than 100 packets depended on
/// the match's state (the sequence did not exercise it).
pub fn agree_on_a_test_clock(t: &Timed<'_>) {
    let mut dp = dp_on_lo(&format!(
        "{}_bpf_walker_agrees_with_rust_and_linear",
        t.what
    ));
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
        let text = (t.rules)(&run_no.to_string(), v6);
        let format = if v6 {
            parapet_parse::Format::Ip6tablesSave
        } else {
            parapet_parse::Format::IptablesSave
        };
        let rs = parapet_parse::parse(&text, t.what, format)
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
        let mut rng = Rng::new(run_no as u64 + t.seed);
        for step in 0..STEPS {
            ns += rng.below(if step % t.long_every == 0 {
                t.long_ns
            } else {
                t.short_ns
            });
            dp.set_test_clock(ns).unwrap();
            spec.set_ns(ns);
            image_state.set_ns(ns);
            let p = (t.packet)(v6, &mut rng);
            let want = linear.classify_with(&p, &NoSets, &mut spec).unwrap();
            let rust = walker.decide_stateful(&KeyWords::new(&p, 0), &mut image_state);
            assert_eq!(rust, want, "run {run_no} step {step}: Rust walker, {p:?}");
            let got = run_on_lo(&dp, &frame_of(&p));
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
    assert_eq!(checked, 4 * STEPS);
    assert!(
        held > 100,
        "only {held} packets were decided otherwise than with every {} match assumed",
        t.what
    );
}
