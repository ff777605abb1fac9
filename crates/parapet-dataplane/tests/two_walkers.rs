//! One image, two walkers: random iptables-like rulesets (parapet-gen) are
//! flattened and compiled by parapet-compile (linear and tree backends); the
//! BPF walker classifies crafted frames and must give the same rule id,
//! verdict and non-terminal rules as parapet-compile's Rust walker and the
//! linear reference engine. Also checks that the image key the kernel
//! builds equals the Rust walker's key, word for word.

mod common;

use common::image::image_key;
use common::wire::{frame_of, wire_packet};
use parapet_compile::{compile, Backend, CompileOptions, KeyWords, Walker};
use parapet_dataplane::frame::parse_frame;
use parapet_dataplane::{AttachPoint, KernelVerdict};
use parapet_gen::{packets_for, random_ruleset, RandomSpec};
use parapet_model::flatten;

use common::lo::LO;

fn verdict(v: &parapet_model::Verdict) -> KernelVerdict {
    match v {
        parapet_model::Verdict::Accept => KernelVerdict::Accept,
        parapet_model::Verdict::Drop => KernelVerdict::Drop,
        parapet_model::Verdict::Reject { .. } => KernelVerdict::Reject,
    }
}

#[test]
#[ignore = "needs root"]
fn bpf_walker_agrees_with_the_rust_walker_on_compiled_rulesets() {
    let test = "bpf_walker_agrees_with_the_rust_walker_on_compiled_rulesets";
    let mut dp = common::lo::dp_on_lo(test);
    let mut checked = 0;
    let mut by_rule = 0;
    let mut with_nonterm = 0;
    let mut multiway_nodes = 0;
    let mut binary_nodes = 0;
    for seed in 0..12u64 {
        let spec = RandomSpec {
            rules: 20 + (seed as usize * 37) % 200,
            ipv6: seed % 3 != 0,
            ..RandomSpec::default()
        };
        let rs = random_ruleset(seed, &spec);
        let list = flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
        for backend in [Backend::Linear, Backend::Tree] {
            let opts = CompileOptions {
                backend,
                ..CompileOptions::default()
            };
            let (image, _) = compile(&list, &opts).unwrap();
            let w = image.words();
            let (nodes_off, n_nodes) = (w[14] as usize, w[15] as usize);
            multiway_nodes += (0..n_nodes)
                .filter(|i| (w[nodes_off + 8 * i] >> 8) & 0xff == 1)
                .count();
            binary_nodes += (0..n_nodes)
                .filter(|i| (w[nodes_off + 8 * i] >> 8) & 0xff == 0)
                .count();
            dp.write_image(&image.to_bytes()).unwrap();
            dp.swap().unwrap();
            let walker = Walker::new(image);
            for (i, p) in packets_for(&rs, seed, 120).into_iter().enumerate() {
                let p = wire_packet(p);
                let frame = frame_of(&p);
                // Same key on both sides, word for word.
                let (_, parsed) = parse_frame(&frame, frame.len() as u32, LO);
                let rust_key = KeyWords::new(&p, 0);
                assert_eq!(
                    image_key(&parsed, "lo"),
                    rust_key.to_words(),
                    "seed {seed} packet {i}: key words differ for {p:?}"
                );
                let want = walker.decide(&rust_key);
                assert_eq!(want, list.classify(&p, &[]), "Rust walker vs reference");
                let hook = if i % 2 == 0 {
                    AttachPoint::Xdp
                } else {
                    AttachPoint::Tc
                };
                dp.test_run(hook, &frame, LO, 1).unwrap();
                let got = dp.last_decision().unwrap().unwrap();
                assert!(
                    got.by_image,
                    "seed {seed} {backend:?} packet {i} at {hook:?}: walker refused the image \
                     (error {}) for {p:?}",
                    got.walk_err
                );
                let mut nonterm = want.nonterminal.clone();
                nonterm.truncate(16);
                assert_eq!(
                    (got.rule_id, got.verdict, got.nonterminal),
                    (want.rule_id, verdict(&want.verdict), nonterm),
                    "seed {seed} {backend:?} packet {i}: {p:?}"
                );
                checked += 1;
                by_rule += usize::from(want.rule_id != 0);
                with_nonterm += usize::from(!want.nonterminal.is_empty());
            }
        }
    }
    assert!(
        by_rule > checked / 5,
        "{by_rule}/{checked} decided by a rule"
    );
    assert!(
        with_nonterm > 50,
        "{with_nonterm}/{checked} with non-terminals"
    );
    // Both node kinds of the format must have been walked.
    assert!(
        multiway_nodes > 0 && binary_nodes > 0,
        "{multiway_nodes} multi-way, {binary_nodes} binary nodes"
    );
    println!(
        "{checked} packets, {by_rule} decided by a rule, {with_nonterm} with non-terminals, \
         {multiway_nodes} multi-way and {binary_nodes} binary nodes"
    );
}

/// Masked comparisons (`saddr & mask == value`, `dport & 1 != 0`, …; the
/// image's masked constraint kind, narrow and wide) added to random
/// rulesets: the BPF walker, the Rust walker and the linear engine agree
/// packet by packet, and the masked rules decide some packets and let
/// others through.
#[test]
#[ignore = "needs root"]
fn bpf_walker_agrees_on_masked_comparisons() {
    use parapet_model::{Field, MaskedMatch};
    let test = "bpf_walker_agrees_on_masked_comparisons";
    let mut dp = common::lo::dp_on_lo(test);
    let mut rng = common::Rng::new(0x6d61736b);
    let (mut checked, mut masked_hits, mut masked_misses) = (0, 0, 0);
    for seed in 0..6u64 {
        let spec = RandomSpec {
            rules: 30 + seed as usize * 20,
            ipv6: seed % 2 == 1,
            ..RandomSpec::default()
        };
        let mut rs = random_ruleset(seed, &spec);
        let mut masked_ids = Vec::new();
        for t in &mut rs.tables {
            for c in &mut t.chains {
                for r in c.rules.iter_mut() {
                    if !rng.chance(40) {
                        continue;
                    }
                    let (field, width) = match rng.below(4) {
                        0 => (Field::SrcAddr, 32),
                        1 => (Field::DstAddr, 128),
                        2 => (Field::DstPort, 16),
                        _ => (Field::SrcPort, 16),
                    };
                    // One or two bits: about half of the packets match.
                    let mut mask = 1u128 << rng.below(width);
                    if rng.chance(50) {
                        mask |= 1u128 << rng.below(width);
                    }
                    let value = mask & (rng.next() as u128 | (rng.next() as u128) << 64);
                    r.matches.constrain_masked(MaskedMatch {
                        field,
                        mask,
                        value,
                        negate: rng.chance(30),
                    });
                    masked_ids.push(r.id);
                }
            }
        }
        let list = flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
        for backend in [Backend::Linear, Backend::Tree] {
            let opts = CompileOptions {
                backend,
                ..CompileOptions::default()
            };
            let (image, _) = compile(&list, &opts).unwrap();
            dp.write_image(&image.to_bytes()).unwrap();
            dp.swap().unwrap();
            let walker = Walker::new(image);
            for (i, p) in packets_for(&rs, seed, 150).into_iter().enumerate() {
                let p = wire_packet(p);
                let frame = frame_of(&p);
                let rust_key = KeyWords::new(&p, 0);
                let want = walker.decide(&rust_key);
                assert_eq!(want, list.classify(&p, &[]), "Rust walker vs reference");
                let hook = if i % 2 == 0 {
                    AttachPoint::Xdp
                } else {
                    AttachPoint::Tc
                };
                dp.test_run(hook, &frame, LO, 1).unwrap();
                let got = dp.last_decision().unwrap().unwrap();
                assert!(
                    got.by_image,
                    "walker refused the image (error {})",
                    got.walk_err
                );
                let mut nonterm = want.nonterminal.clone();
                nonterm.truncate(16);
                assert_eq!(
                    (got.rule_id, got.verdict, got.nonterminal),
                    (want.rule_id, verdict(&want.verdict), nonterm),
                    "seed {seed} {backend:?} packet {i}: {p:?}"
                );
                checked += 1;
                // Did a masked rule's box hold the packet, and its mask?
                for r in rs.rules().filter(|r| masked_ids.contains(&r.id)) {
                    let mut no_sets = |_| false;
                    let mut boxed = parapet_model::Matches::any();
                    for (f, v) in r.matches.iter() {
                        boxed.constrain(*f, v.clone());
                    }
                    if boxed.matches(&p, &mut no_sets) {
                        if r.matches.matches(&p, &mut no_sets) {
                            masked_hits += 1;
                        } else {
                            masked_misses += 1;
                        }
                    }
                }
            }
        }
    }
    assert!(
        masked_hits > 50 && masked_misses > 50,
        "masked rules: {masked_hits} hits, {masked_misses} misses in their boxes"
    );
    println!("{checked} packets; masked rules {masked_hits} hits, {masked_misses} misses");
}
