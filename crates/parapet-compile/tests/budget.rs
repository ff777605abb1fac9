//! Adversarial lists build within the memory budget and in bounded time,
//! trading lookup speed (longer leaves) for space, and stay exact.

use parapet_compile::*;
use parapet_model::*;
use std::time::Instant;

fn list(rs: &Ruleset) -> DecisionList {
    flatten(rs, rs.select_chain(None).unwrap()).unwrap()
}

#[test]
fn cross_product_without_partitions_hits_the_budget_not_oom() {
    let l = list(&parapet_gen::cross_product(6000, 9));
    let packets = parapet_gen::packets_for(&parapet_gen::cross_product(6000, 9), 3, 3000);
    for budget in [1usize << 20, 4 << 20, 32 << 20] {
        let t = Instant::now();
        let c = Classifier::build(
            &l,
            &BuildOptions {
                engine: Engine::Tree,
                partition: false,
                leaf_size: Some(1),
                max_memory: budget,
                ..Default::default()
            },
        )
        .unwrap();
        let secs = t.elapsed().as_secs_f64();
        assert!(
            c.memory_bytes() <= budget,
            "{} > {budget}\n{}",
            c.memory_bytes(),
            c.explain()
        );
        assert!(
            c.stats().memory_limited || c.stats().work_limited,
            "{}",
            c.explain()
        );
        assert!(c.explain().contains("budget"), "{}", c.explain());
        // Generous: a shared, loaded machine; the point is "no blow-up".
        assert!(secs < 60.0, "build took {secs:.1} s");
        for p in &packets {
            assert_eq!(c.classify(p, &[]), l.classify(p, &[]));
        }
    }
}

#[test]
fn partitions_keep_cross_product_small() {
    let l = list(&parapet_gen::cross_product(6000, 9));
    let c = Classifier::build(&l, &BuildOptions::default()).unwrap();
    let linear = Classifier::build(
        &l,
        &BuildOptions {
            engine: Engine::Linear,
            ..Default::default()
        },
    )
    .unwrap();
    // Source-only and destination-only rules live in different trees, so
    // nothing multiplies: the image stays within a small factor of the
    // rules themselves.
    assert!(
        c.memory_bytes() < 6 * linear.memory_bytes(),
        "{} vs {}\n{}",
        c.memory_bytes(),
        linear.memory_bytes(),
        c.explain()
    );
    assert!(!c.stats().memory_limited, "{}", c.explain());
}

#[test]
fn memory_policy_is_smaller() {
    let rs = parapet_gen::random_ruleset(
        5,
        &parapet_gen::RandomSpec {
            rules: 2000,
            control_flow: false,
            ..Default::default()
        },
    );
    let l = list(&rs);
    let perf = Classifier::build(&l, &BuildOptions::default()).unwrap();
    let mem = Classifier::build(
        &l,
        &BuildOptions {
            policy: Policy::Memory,
            ..Default::default()
        },
    )
    .unwrap();
    assert!(
        mem.memory_bytes() <= perf.memory_bytes(),
        "{}\n{}",
        mem.explain(),
        perf.explain()
    );
    for p in parapet_gen::packets_for(&rs, 1, 2000) {
        assert_eq!(mem.classify(&p, &[]), l.classify(&p, &[]));
    }
}
