//! `lint`'s correlation search keeps its largest candidates in a bounded
//! heap and, once it is full, passes over rules and pairs that could not
//! enter it (`correlation.rs`). Passing over must change nothing: on
//! generated mixed-verdict rulesets, the warnings found with a small heap
//! are exactly the first ones found with a heap that never fills (nothing
//! passed over).

use parapet_gen::*;
use parapet_model::*;

fn correlations(report: &LintReport) -> Vec<Finding> {
    report
        .warnings
        .iter()
        .filter(|f| f.kind == FindingKind::Correlation)
        .cloned()
        .collect()
}

#[test]
fn warnings_with_a_full_heap_are_the_largest_of_all() {
    // Seeds where the small heap filled (more candidates than it holds),
    // so that rules and pairs were passed over.
    let mut filled = 0;
    for seed in 0..16u64 {
        let spec = RandomSpec {
            rules: 80 + (seed as usize % 4) * 30,
            user_chains: (seed % 3) as usize,
            ipv6: seed % 2 == 0,
            ..Default::default()
        };
        let rs = random_ruleset(seed, &spec);
        let list =
            flatten_unpruned(&rs, rs.select_chain(None).unwrap(), DEFAULT_MAX_ENTRIES).unwrap();
        let lint = |n: usize| {
            let options = LintOptions { correlations: n };
            lint_with(&rs, std::slice::from_ref(&list), Budget::default(), options).unwrap()
        };
        // 2 warnings wanted: a heap of 16 candidates.
        let (small, all) = (lint(2), lint(1_000_000));
        assert!(small.correlations_complete && all.correlations_complete);
        let (small, all) = (correlations(&small), correlations(&all));
        assert!(
            all.starts_with(&small),
            "seed {seed}:\n{small:#?}\nis not the start of\n{:#?}",
            &all[..all.len().min(4)]
        );
        if all.len() > 16 {
            filled += 1;
            assert_eq!(small.len(), 2, "seed {seed}");
        }
    }
    eprintln!("the heap filled on {filled} of 16 seeds");
    assert!(filled >= 4, "the heap filled on {filled} seeds only");
}
