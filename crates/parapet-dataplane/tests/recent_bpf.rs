//! `-m recent` in the BPF walker (BPF_PROG_TEST_RUN on the real program):
//! on the test clock, a timed random sequence of packets from a few
//! addresses (some sharing a /24 or a /64, so `--mask` matters) over rules
//! using every command (and a `--hitcount` above 32), with `--seconds` windows the clock crosses, gives
//! packet by packet what the Rust walker and the linear engine (the
//! specification, itself checked against iptables-legacy by
//! `parapet-parse/tests/recent_kernel.rs`) give; the SSH brute-force pair
//! drops the fourth attempt on the kernel's own clock.

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
        1000,
        1 + rng.below(8) as u16,
    ))
}

#[test]
#[ignore = "needs root"]
fn bpf_walker_agrees_with_rust_and_linear_on_a_test_clock() {
    let mut dp = dp("recent_bpf_walker_agrees_with_rust_and_linear");
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
        let rs = parapet_parse::parse(&text, "recent", format)
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
        let mut rng = Rng::new(run_no as u64 + 7);
        for step in 0..400 {
            // Mostly quick packets, now and then a pause longer than the
            // windows.
            ns += rng.below(if step % 9 == 0 {
                3_500_000_000
            } else {
                150_000_000
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
        "only {held} packets were decided otherwise than with every recent match assumed"
    );
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
