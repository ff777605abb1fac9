//! Hand-made lists where a RETURN jumps over a rule that covers everything:
//! the compiler must not treat that rule as the end of the reachable list.

use parapet_compile::*;
use parapet_model::*;

fn port(p: u128) -> Matches {
    let mut m = Matches::any();
    m.constrain(Field::DstPort, IntervalSet::point(p));
    m
}

/// INPUT: jump A; DROP dport 22. A: RETURN dport 22; ACCEPT everything.
fn ruleset() -> Ruleset {
    let mut rs = parapet_gen::one_chain(
        vec![
            Rule::new(0, Matches::any(), Action::Jump("A".into())),
            Rule::new(0, port(22), Action::Verdict(Verdict::Drop)),
        ],
        Verdict::Accept,
    );
    rs.tables[0].chains.push(Chain {
        name: "A".into(),
        base: None,
        rules: vec![
            Rule::new(0, port(22), Action::Return),
            Rule::new(0, Matches::any(), Action::Log(LogSpec::default())),
            Rule::new(
                0,
                Matches::any(),
                Action::Verdict(Verdict::Reject {
                    with: Some("tcp-reset".into()),
                }),
            ),
        ],
    });
    rs.renumber();
    rs
}

#[test]
fn return_over_a_covering_rule() {
    let rs = ruleset();
    let list = flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
    for leaf_size in [1, 8] {
        for engine in [Engine::Linear, Engine::Tree] {
            let c = Classifier::build(
                &list,
                &BuildOptions {
                    engine,
                    leaf_size: Some(leaf_size),
                    ..Default::default()
                },
            )
            .unwrap();
            for dport in [21, 22, 23, 80] {
                let p = Packet::v4(1, 2, 6, 1000, dport);
                assert_eq!(c.classify(&p, &[]), list.classify(&p, &[]), "{dport}");
            }
            let d = c.classify(&Packet::v4(1, 2, 6, 1000, 22), &[]);
            assert_eq!((d.rule_id, d.verdict), (2, Verdict::Drop));
            assert_eq!(d.nonterminal, vec![1, 3]);
            let d = c.classify(&Packet::v4(1, 2, 6, 1000, 80), &[]);
            assert_eq!(d.rule_id, 5);
            assert_eq!(
                d.verdict,
                Verdict::Reject {
                    with: Some("tcp-reset".into())
                }
            );
            assert_eq!(d.nonterminal, vec![1, 4]);
        }
    }
}

#[test]
fn explain_names_engine_and_shape() {
    let rs = parapet_gen::worst_case(2000);
    let list = flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
    let c = Classifier::build(&list, &BuildOptions::default()).unwrap();
    let text = c.explain();
    assert_eq!(c.engine(), Engine::Tree);
    for needle in [
        "engine: tree",
        "because:",
        "depth",
        "worst case per lookup",
        "memory:",
        "build:",
    ] {
        assert!(text.contains(needle), "{needle} missing from:\n{text}");
    }
    let small = parapet_gen::worst_case(3);
    let list = flatten(&small, small.select_chain(None).unwrap()).unwrap();
    let c = Classifier::build(&list, &BuildOptions::default()).unwrap();
    assert_eq!(c.engine(), Engine::Linear);
}

#[test]
fn corrupted_images_are_rejected() {
    let rs = parapet_gen::worst_case(300);
    let list = flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
    let c = Classifier::build(&list, &BuildOptions::default()).unwrap();
    let bytes = c.image().to_bytes();
    assert!(Classifier::from_bytes(&bytes).is_ok());
    assert!(Classifier::from_bytes(&bytes[..bytes.len() - 4]).is_err());
    let mut flipped = bytes.clone();
    flipped[200] ^= 1;
    assert!(
        Classifier::from_bytes(&flipped).is_err(),
        "checksum must catch a flipped bit"
    );
    assert!(Classifier::from_bytes(&bytes[..bytes.len() - 1]).is_err());
}

#[test]
fn classifier_is_shareable_and_packet_batches_agree() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Classifier>();
    let rs = parapet_gen::worst_case(500);
    let list = flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
    let c = Classifier::build(&list, &BuildOptions::default()).unwrap();
    let packets = parapet_gen::packets_for(&rs, 3, 700);
    let mut ids = vec![0; packets.len()];
    c.classify_packets_ids(&packets, &mut ids);
    for (p, id) in packets.iter().zip(ids) {
        assert_eq!(id, list.classify(p, &[]).rule_id);
    }
}
