//! `--tcp-option` in the compiled engines against the linear engine:
//! random rulesets testing boundary kinds (0, 1, 2, 127, 128, 255, …),
//! present and `!`, over random option areas (well formed, NOP-padded,
//! cut by End of Option List, lengths of 0 and 1, lengths past the area,
//! a kind in the last byte), in every engine configuration and the image
//! walk of the key words the dataplane fills.

mod common;

use common::configs;
use parapet_compile::Classifier;
use parapet_gen::tcp_options::{tcp_option_packets, tcp_option_ruleset};
use parapet_image::KeyWords;
use parapet_model::*;

#[test]
fn random_option_rules_agree_with_the_linear_engine() {
    let mut matched = 0;
    for seed in 0..24u64 {
        let rs = tcp_option_ruleset(seed, 4 + seed as usize % 12);
        let list = flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
        let packets = tcp_option_packets(seed, 300);
        for (name, opts) in configs() {
            let c = Classifier::build(&list, &opts).unwrap();
            for p in &packets {
                let d = list.classify(p, &[]);
                matched += (d.rule_id != 0) as usize;
                assert_eq!(c.classify(p, &[]), d, "seed {seed} {name}: {p}");
                let k = KeyWords::from_bits(p, &[]);
                assert_eq!(c.walker().decide(&k), d, "seed {seed} {name} walk: {p}");
            }
        }
    }
    // the rules decide, not only the policies
    assert!(matched > 1000, "{matched}");
}
