//! Every engine configuration must give exactly the decision list's (and
//! so the linear reference engine's) decision: rule id, verdict, and the
//! non-terminal rules matched on the way.

mod common;

use common::*;
use parapet_compile::*;
use parapet_gen::*;
use parapet_model::*;

/// Set membership from precomputed bits, so both engines see the same sets.
struct Bits<'a>(&'a Ruleset, &'a [bool]);

impl SetLookup for Bits<'_> {
    fn contains(&self, set_ref: &SetRef, _: &Packet) -> bool {
        let i = self.0.set_refs.iter().position(|r| r == set_ref).unwrap();
        self.1[i]
    }
}

#[test]
fn random_rulesets_agree_with_linear() {
    let mut checked = 0usize;
    let mut nonterminal = 0usize;
    let mut trees = 0usize;
    for seed in 0..300u64 {
        let spec = RandomSpec {
            rules: 5 + (seed as usize * 7 % 120),
            user_chains: (seed % 5) as usize,
            set_refs: (seed % 4) as usize,
            ipv6: seed % 3 != 0,
            control_flow: seed % 4 != 0,
        };
        let rs = random_ruleset(seed, &spec);
        let start = rs.select_chain(None).unwrap();
        let linear = LinearEngine::new(&rs, start).unwrap();
        let list = flatten(&rs, start).unwrap();
        let packets = packets_for(&rs, seed, 150);
        for (name, opts) in configs() {
            let c = Classifier::build(&list, &opts).unwrap();
            trees += (c.engine() == Engine::Tree
                && c.stats().partitions.iter().any(|p| p.nodes > 0)) as usize;
            // The image must also survive a trip through bytes.
            let c2 = Classifier::from_bytes(&c.image().to_bytes()).unwrap();
            for (i, pkt) in packets.iter().enumerate() {
                let bits = set_bits(seed, i, rs.set_refs.len());
                let want = list.classify(pkt, &bits);
                if name == "auto" {
                    let spec_answer = linear.classify(pkt, &Bits(&rs, &bits)).unwrap();
                    assert_eq!(want, spec_answer, "flatten disagrees, seed {seed}");
                    nonterminal += !want.nonterminal.is_empty() as usize;
                }
                let got = c.classify(pkt, &bits);
                assert_eq!(
                    got,
                    want,
                    "{name}, seed {seed}, packet {i}: {pkt}\n{}",
                    c.explain()
                );
                assert_eq!(
                    c2.classify(pkt, &bits),
                    want,
                    "{name} reloaded, seed {seed}"
                );
                let key = KeyWords::from_bits(pkt, &bits);
                assert_eq!(c.classify_id(&key), want.rule_id, "{name} id, seed {seed}");
                checked += 1;
            }
            let keys: Vec<KeyWords> = packets
                .iter()
                .enumerate()
                .map(|(i, p)| KeyWords::from_bits(p, &set_bits(seed, i, rs.set_refs.len())))
                .collect();
            let mut ids = vec![0u32; keys.len()];
            c.classify_batch_ids(&keys, &mut ids);
            let mut ds = vec![Decision::new(0, Verdict::Accept, vec![]); keys.len()];
            c.classify_batch(&keys, &mut ds);
            for (i, k) in keys.iter().enumerate() {
                let want = c.classify_key(k);
                assert_eq!(ids[i], want.rule_id, "{name} batch, seed {seed}");
                assert_eq!(ds[i], want, "{name} batch decisions, seed {seed}");
            }
        }
    }
    // The corpus must exercise what it claims to.
    assert!(checked > 200_000, "{checked}");
    assert!(
        nonterminal > 2_000,
        "only {nonterminal} packets matched non-terminal rules"
    );
    assert!(trees > 500, "only {trees} builds made real trees");
}

#[test]
fn worst_case_series_agrees() {
    for n in [1usize, 2, 25, 100, 1000, 5000] {
        let rs = worst_case(n);
        let list = flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
        let mut packets = packets_for(&rs, n as u64, 300);
        packets.push(worst_case_packet());
        for (name, opts) in configs() {
            let c = Classifier::build(&list, &opts).unwrap();
            for p in &packets {
                assert_eq!(
                    c.classify(p, &[]),
                    list.classify(p, &[]),
                    "{name} n={n} {p}"
                );
            }
            assert_eq!(c.classify(&worst_case_packet(), &[]).rule_id, n as u32 + 1);
        }
    }
}

#[test]
fn cross_product_agrees_and_stays_in_budget() {
    for (n, seed) in [(200usize, 1u64), (2000, 2)] {
        let rs = cross_product(n, seed);
        let list = flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
        let packets = packets_for(&rs, seed, 2000);
        for budget in [64 << 10, 1 << 20, 16 << 20] {
            for partition in [true, false] {
                let opts = BuildOptions {
                    engine: Engine::Tree,
                    max_memory: budget,
                    partition,
                    leaf_size: Some(2),
                    ..Default::default()
                };
                let c = Classifier::build(&list, &opts).unwrap();
                let floor = Classifier::build(
                    &list,
                    &BuildOptions {
                        engine: Engine::Linear,
                        ..Default::default()
                    },
                )
                .unwrap()
                .memory_bytes();
                assert!(
                    c.memory_bytes() <= budget.max(floor) + 4096,
                    "n={n} budget={budget} partition={partition}: {} bytes\n{}",
                    c.memory_bytes(),
                    c.explain()
                );
                for p in &packets {
                    assert_eq!(c.classify(p, &[]), list.classify(p, &[]), "n={n} {p}");
                }
            }
        }
    }
}

/// Corner packets of ClassBench rules: each rule's low and high corner, and
/// a random point inside it, so most packets match something.
fn rule_packets(list: &DecisionList, seed: u64) -> Vec<Packet> {
    let mut x = seed | 1;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut out = Vec::new();
    for e in &list.entries {
        let get = |f: Field| {
            e.matches
                .get(f)
                .map(|s| (s.ranges()[0].0, s.ranges()[0].1))
                .unwrap_or((0, f.max_value()))
        };
        let fields = [
            Field::SrcAddr,
            Field::DstAddr,
            Field::SrcPort,
            Field::DstPort,
            Field::Proto,
        ];
        let r: Vec<(u128, u128)> = fields.iter().map(|&f| get(f)).collect();
        for pick in 0..3 {
            let v: Vec<u128> = r
                .iter()
                .map(|&(lo, hi)| match pick {
                    0 => lo,
                    1 => hi,
                    _ => lo + (rnd() as u128 % (hi - lo + 1)),
                })
                .collect();
            out.push(Packet::v4(
                v[0] as u32,
                v[1] as u32,
                v[4] as u8,
                v[2] as u16,
                v[3] as u16,
            ));
        }
    }
    out
}

#[test]
fn classbench_1k_sets_agree() {
    let dir = classbench_dir();
    let Ok(read) = std::fs::read_dir(&dir) else {
        eprintln!("SKIP: no ClassBench data at {}", dir.display());
        return;
    };
    let mut names: Vec<String> = read
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with("_1k"))
        .collect();
    names.sort();
    assert!(!names.is_empty(), "no *_1k sets in {}", dir.display());
    for name in names {
        let text = read_maybe_gz(&dir.join(&name)).unwrap();
        let list = classbench_list(&text);
        let mut packets = rule_packets(&list, 7);
        // The 10k traces of the same family, for traffic shaped by the sets.
        let trace = dir.join(format!("{}_10k_trace.gz", name.trim_end_matches("_1k")));
        if let Some(t) = read_maybe_gz(&trace) {
            // Debug builds (make test) take a tenth; release takes it all.
            let take = if cfg!(debug_assertions) {
                2_000
            } else {
                20_000
            };
            packets.extend(classbench_trace(&t).into_iter().take(take));
        }
        let want: Vec<u32> = packets
            .iter()
            .map(|p| list.classify(p, &[]).rule_id)
            .collect();
        for (cfg, opts) in configs() {
            let c = Classifier::build(&list, &opts).unwrap();
            let keys: Vec<KeyWords> = packets.iter().map(|p| KeyWords::new(p, 0)).collect();
            let mut got = vec![0u32; keys.len()];
            c.classify_batch_ids(&keys, &mut got);
            for i in 0..packets.len() {
                assert_eq!(
                    got[i],
                    want[i],
                    "{name} {cfg}: packet {}\n{}",
                    packets[i],
                    c.explain()
                );
            }
        }
        eprintln!(
            "{name}: {} rules, {} packets agree",
            list.entries.len(),
            packets.len()
        );
    }
}

/// The bigger sets with their own traces (a sample of each trace, since the
/// oracle is the linear scan).
fn classbench_with_traces(sizes: &[&str], sample: usize) {
    let dir = classbench_dir();
    if !dir.exists() {
        eprintln!("SKIP: no ClassBench data at {}", dir.display());
        return;
    }
    for size in sizes {
        for family in ["acl1", "acl5", "fw1", "fw5", "ipc1", "ipc2"] {
            let Some(text) = read_maybe_gz(&dir.join(format!("{family}_{size}.gz"))) else {
                continue;
            };
            let Some(trace) = read_maybe_gz(&dir.join(format!("{family}_{size}_trace.gz"))) else {
                continue;
            };
            let list = classbench_list(&text);
            let all = classbench_trace(&trace);
            let step = (all.len() / sample).max(1);
            let packets: Vec<Packet> = all.into_iter().step_by(step).collect();
            let c = Classifier::build(&list, &BuildOptions::default()).unwrap();
            let keys: Vec<KeyWords> = packets.iter().map(|p| KeyWords::new(p, 0)).collect();
            let mut got = vec![0u32; keys.len()];
            c.classify_batch_ids(&keys, &mut got);
            for (i, p) in packets.iter().enumerate() {
                assert_eq!(
                    got[i],
                    list.classify(p, &[]).rule_id,
                    "{family}_{size}: {p}"
                );
            }
            eprintln!("{family}_{size}: {} packets agree", packets.len());
        }
    }
}

#[test]
fn classbench_10k_traces_agree() {
    classbench_with_traces(&["10k"], if cfg!(debug_assertions) { 300 } else { 2000 });
}

/// Slow in debug builds: `cargo test --release -- --ignored` (`make test`
/// runs it as root, with the kernel tests).
#[test]
#[ignore = "slow in debug builds"]
fn classbench_100k_traces_agree() {
    classbench_with_traces(&["100k"], 1000);
}
