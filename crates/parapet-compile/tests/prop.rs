//! Property: on small dense domains, every engine agrees with the decision
//! list on every packet of the domain.

use parapet_compile::*;
use parapet_model::*;
use proptest::prelude::*;

/// A rule: optional source range, optional dport range, optional protocol
/// (tcp or udp), and an action code.
type RuleSpec = (Option<(u8, u8)>, Option<(u8, u8)>, Option<bool>, u8);

fn rule_strategy() -> impl Strategy<Value = RuleSpec> {
    (
        prop::option::of((0u8..12, 0u8..6)),
        prop::option::of((0u8..12, 0u8..6)),
        prop::option::of(any::<bool>()),
        0u8..6,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn engines_agree_on_small_domains(
        rules in prop::collection::vec(rule_strategy(), 1..40),
        drop_policy in any::<bool>(),
        leaf in 1usize..4,
    ) {
        let rules: Vec<Rule> = rules
            .into_iter()
            .map(|(src, dport, tcp, act)| {
                let mut m = Matches::any();
                if let Some((lo, span)) = src {
                    m.constrain(Field::SrcAddr, IntervalSet::range(lo as u128, (lo + span) as u128));
                }
                if let Some((lo, span)) = dport {
                    m.constrain(Field::DstPort, IntervalSet::range(lo as u128, (lo + span) as u128));
                }
                if let Some(tcp) = tcp {
                    m.constrain(Field::Proto, IntervalSet::point(if tcp { 6 } else { 17 }));
                }
                let action = match act {
                    0 | 1 => Action::Verdict(Verdict::Accept),
                    2 | 3 => Action::Verdict(Verdict::Drop),
                    4 => Action::Log(LogSpec::default()),
                    _ => Action::Return,
                };
                Rule::new(0, m, action)
            })
            .collect();
        let rs = parapet_gen::one_chain(rules, if drop_policy { Verdict::Drop } else { Verdict::Accept });
        let list = flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
        for engine in [Engine::Linear, Engine::Tree, Engine::Auto] {
            let c = Classifier::build(&list, &BuildOptions { engine, leaf_size: Some(leaf), ..Default::default() }).unwrap();
            for src in 0..20u32 {
                for dport in 0..20u16 {
                    for proto in [6u8, 17] {
                        let p = Packet::v4(src, 0, proto, 1, dport);
                        prop_assert_eq!(c.classify(&p, &[]), list.classify(&p, &[]));
                    }
                }
            }
        }
    }
}
