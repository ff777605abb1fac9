//! nft dynamic sets in the BPF walker (BPF_PROG_TEST_RUN on the real
//! program): on the test clock, a timed random sequence of packets from a
//! few addresses to a few addresses over rules using every op (`add`,
//! `update`, `delete`, lookups with `==` and `!=`, source and destination
//! keys, a per-element limit with and without `over`, a set that fills to
//! its size, timeouts the clock crosses, keys of an address and a service
//! — the packet's port or a constant one —, a lookup before a statement
//! in one rule) and nft quotas (plain and `over`,
//! crossed within the run) gives, packet by packet, what the
//! Rust walker and the linear engine (the specification, itself checked
//! against `nft -f` by `parapet-parse/tests/dynset_kernel.rs`) give.

mod common;

use common::lo::{dp_on_lo as dp, run_on_lo as run};
use common::wire::{frame_of, wire_packet};
use common::Rng;
use parapet_compile::{compile, Backend, CompileOptions, ImageState, KeyWords, Walker};
use parapet_dataplane::ruleset::Install;
use parapet_dataplane::stateful::kernel_hz;
use parapet_model::*;

/// The rules, in a table named after `tag` (the BPF sets outlive an image,
/// and a set's id is its table's and its own name).
fn rules(tag: &str, v6: bool) -> String {
    let (ty, ip) = if v6 {
        ("ipv6_addr", "ip6")
    } else {
        ("ipv4_addr", "ip")
    };
    format!(
        "table inet t{tag} {{
\tset a {{ type {ty}; size 16; flags dynamic,timeout; timeout 2s; }}
\tset b {{ type {ty}; size 2; flags dynamic; }}
\tset m {{ type {ty}; size 16; flags dynamic; }}
\tset p {{ type {ty} . inet_service; size 4; flags dynamic,timeout; timeout 2s; }}
\tset q {{ type {ty}; size 16; flags dynamic; }}
\tchain input {{
\t\ttype filter hook input priority 0; policy accept;
\t\tudp dport 1 update @a {{ {ip} saddr }}
\t\tudp dport 2 {ip} saddr @a drop
\t\tudp dport 3 add @a {{ {ip} saddr timeout 3s }} accept
\t\tudp dport 4 add @m {{ {ip} saddr limit rate over 2/second burst 3 packets }} drop
\t\tudp dport 5 add @b {{ {ip} daddr }}
\t\tudp dport 5 {ip} daddr @b drop
\t\tudp dport 6 {ip} daddr != @b drop
\t\tudp dport 7 delete @a {{ {ip} saddr }}
\t\tudp dport 7 {ip} saddr != @a drop
\t\tudp dport 8 update @m {{ {ip} daddr limit rate 1/second burst 2 packets }} accept
\t\tudp dport 8 drop
\t\tudp dport 9 quota 1500 bytes accept
\t\tudp dport 9 drop
\t\tudp dport 10 quota over 1 kbytes drop
\t\tudp dport 11 add @p {{ {ip} saddr . udp sport }}
\t\tudp dport 12 {ip} saddr . udp sport @p drop
\t\tudp dport 13 update @p {{ {ip} saddr . 14 timeout 1s }}
\t\tudp dport 14 {ip} saddr . udp dport != @p drop
\t\tudp dport 15 delete @p {{ {ip} daddr . udp sport }}
\t\tudp dport 16 {ip} saddr . udp sport @p add @q {{ {ip} daddr }}
\t\tudp dport 17 {ip} daddr @q drop
\t}}
}}
"
    )
}

/// Three addresses.
fn addr(v6: bool, i: u64) -> u128 {
    let v4 = [0x0a00_0001u32, 0x0a00_0002, 0x0a00_0101][i as usize % 3];
    if v6 {
        (0x2001_0db8u128 << 96) | v4 as u128
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
        1 + rng.below(17) as u16,
    ))
}

#[test]
#[ignore = "needs root"]
fn bpf_walker_agrees_with_rust_and_linear_on_a_test_clock() {
    let mut dp = dp("dynset_bpf_walker_agrees_with_rust_and_linear");
    let hz = kernel_hz().expect("the kernel's HZ must be known");
    let (mut checked, mut held) = (0, 0);
    let salt = std::process::id();
    for (run_no, (v6, backend)) in [
        (false, Backend::Linear),
        (false, Backend::Tree),
        (true, Backend::Linear),
        (true, Backend::Tree),
    ]
    .into_iter()
    .enumerate()
    {
        let text = rules(&format!("{salt}x{run_no}"), v6);
        let rs = parapet_parse::parse(&text, "dynset.nft", parapet_parse::Format::Nft)
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
        let mut quota_fates = Vec::new();
        for step in 0..500 {
            // Mostly quick packets, now and then a pause longer than the
            // timeouts.
            ns += rng.below(if step % 11 == 0 {
                3_500_000_000
            } else {
                120_000_000
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
            if (9..=10).contains(&p.dport) {
                quota_fates.push((p.dport, want.rule_id));
            }
            checked += 1;
        }
        // Each quota is crossed within the run: both fates occur.
        for port in [9, 10] {
            let rules: Vec<u32> = quota_fates
                .iter()
                .filter(|(p, _)| *p == port)
                .map(|(_, r)| *r)
                .collect();
            assert!(
                rules.windows(2).any(|w| w[0] != w[1]),
                "run {run_no}: the quota on port {port} decided alike throughout: {rules:?}"
            );
        }
    }
    dp.set_test_clock(0).unwrap();
    assert_eq!(checked, 4 * 500);
    assert!(
        held > 100,
        "only {held} packets were decided otherwise than with every dynamic set assumed to match"
    );
}

/// Sets declared with elements (`elements = { … }`): one with the set's
/// timeout and one with its own and `expires`, one of an address and a
/// service that never expires; rules that look them up, add, refresh and
/// delete.
fn declared(tag: &str, v6: bool) -> String {
    let (ty, ip) = if v6 {
        ("ipv6_addr", "ip6")
    } else {
        ("ipv4_addr", "ip")
    };
    let a = |i: u64| {
        let v = addr(v6, i);
        if v6 {
            std::net::Ipv6Addr::from(v).to_string()
        } else {
            std::net::Ipv4Addr::from(v as u32).to_string()
        }
    };
    format!(
        "table inet d{tag} {{
\tset d {{ type {ty}; size 3; flags dynamic,timeout; timeout 2s; elements = {{ {}, {} timeout 4s expires 1s }}; }}
\tset n {{ type {ty} . inet_service; size 4; flags dynamic; elements = {{ {} . 3, {} . 1000 }}; }}
\tchain input {{
\t\ttype filter hook input priority 0; policy accept;
\t\tudp dport 1 add @d {{ {ip} saddr }}
\t\tudp dport 2 {ip} saddr @d drop
\t\tudp dport 3 {ip} saddr . udp dport @n drop
\t\tudp dport 4 {ip} saddr . udp sport != @n drop
\t\tudp dport 5 update @d {{ {ip} daddr }}
\t\tudp dport 6 delete @d {{ {ip} saddr }}
\t\tudp dport 7 {ip} daddr @d drop
\t\tudp dport 8 add @n {{ {ip} daddr . udp sport }}
\t}}
}}
",
        a(0),
        a(1),
        a(2),
        a(0)
    )
}

#[test]
#[ignore = "needs root"]
fn declared_elements_are_seeded_as_the_linear_engine_starts() {
    let mut dp = dp("dynset_bpf_declared_elements_are_seeded");
    let hz = kernel_hz().expect("the kernel's HZ must be known");
    let salt = std::process::id();
    let mut held = 0;
    for (run_no, v6) in [false, true].into_iter().enumerate() {
        let text = declared(&format!("{salt}x{run_no}"), v6);
        let rs = parapet_parse::parse(&text, "declared.nft", parapet_parse::Format::Nft)
            .unwrap_or_else(|e| panic!("{e:?}"))
            .ruleset;
        let start = rs.select_chain(None).unwrap();
        let linear = LinearEngine::new(&rs, start).unwrap();
        let list = flatten(&rs, start).unwrap();
        let (image, _) = compile(&list, &CompileOptions::default()).unwrap();
        let mut ns = 1_000_000_000u64 * (1 + run_no as u64);
        dp.set_test_clock(ns).unwrap();
        // As parapetd applies it: the elements go in before the image.
        let install = Install {
            ruleset: &rs,
            policy: &Verdict::Accept,
            image: &image.to_bytes(),
            sets: None,
            log_rate: 1,
        };
        dp.install_ruleset(&install).unwrap();
        let walker = Walker::new(image.clone());
        let clock = Clock { ns, hz };
        let mut spec = StatefulState::new(clock);
        let mut image_state = ImageState::new(&image, clock);
        for d in DynsetDecl::with_elements(&rs) {
            image_state.dynset.seed(d, clock.jiffies(), hz);
        }
        let mut rng = Rng::new(run_no as u64 + 31);
        for phase in 0..2 {
            if phase == 1 {
                // A re-apply, as `nft -f` of the same file: every declared
                // element is there again (deleted or expired ones re-added,
                // live ones' expiry moved), elements rules added stay.
                ns += 10_000_000_000;
                dp.set_test_clock(ns).unwrap();
                dp.install_ruleset(&install).unwrap();
                let now = Clock { ns, hz }.jiffies();
                for d in DynsetDecl::with_elements(&rs) {
                    spec.dynset.reapply(d, now, hz);
                    image_state.dynset.reapply(d, now, hz);
                }
                let probe = |s: u64, dport: u16| {
                    let fam = if v6 { Family::V6 } else { Family::V4 };
                    wire_packet(Packet::new(fam, addr(v6, s), addr(v6, 1), 17, 1000, dport))
                };
                for (s, dport, rule, what) in
                    [(0, 2, 2, "d: 0"), (1, 2, 2, "d: 1"), (2, 3, 3, "n: 2 . 3")]
                {
                    let got = run(&dp, &frame_of(&probe(s, dport))).0;
                    assert_eq!(
                        got, rule,
                        "run {run_no}: after the re-apply, {what} is there"
                    );
                }
            }
            for step in 0..200 {
                ns += rng.below(if step % 13 == 0 {
                    2_500_000_000
                } else {
                    100_000_000
                });
                dp.set_test_clock(ns).unwrap();
                spec.set_ns(ns);
                image_state.set_ns(ns);
                let mut p = packet(v6, &mut rng);
                p.dport = 1 + p.dport % 8;
                let want = linear.classify_with(&p, &NoSets, &mut spec).unwrap();
                let rust = walker.decide_stateful(&KeyWords::new(&p, 0), &mut image_state);
                let at = format!("run {run_no} phase {phase} step {step}");
                assert_eq!(rust, want, "{at}: Rust walker, {p:?}");
                let got = run(&dp, &frame_of(&p));
                assert_eq!(
                    got,
                    (want.rule_id, want.nonterminal.clone()),
                    "{at}: BPF walker, {p:?}"
                );
                held += (linear.classify(&p, &NoSets).unwrap() != want) as usize;
            }
        }
    }
    dp.set_test_clock(0).unwrap();
    assert!(
        held > 50,
        "only {held} packets were decided otherwise than with every dynamic set assumed to match"
    );
}
