//! Lookup benchmarks: the nf-HiPAC worst-case series and ClassBench sets.
//!
//! ```text
//! cargo bench -p parapet-bench-micro --bench classify -- [worst] [classbench] [random] [--quick]
//! ```
//! Prints one JSON object per measurement (the `parapet bench classify`
//! shape plus `set` and `build_ms`). `--quick` uses short runs.

#[path = "../../../crates/parapet-compile/tests/common.rs"]
mod common;

use common::*;
use parapet_compile::*;
use parapet_model::*;

fn list_of(rs: &Ruleset) -> DecisionList {
    flatten(rs, rs.select_chain(None).unwrap()).unwrap()
}

fn run(set: &str, list: &DecisionList, keys: &[KeyWords], engine: Engine, run_ms: u64) {
    let opts = BuildOptions {
        engine,
        ..Default::default()
    };
    let c = Classifier::build(list, &opts).unwrap();
    let r = time_lookups_for(&c, keys, 5, run_ms);
    println!("{{\"set\":\"{set}\",{}", &r.to_json()[1..]);
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let all = !args
        .iter()
        .any(|a| a == "worst" || a == "classbench" || a == "random");
    let run_ms = if quick { 30 } else { 200 };
    if all || args.iter().any(|a| a == "worst") {
        // nf-HiPAC: the probe walks the whole chain in a linear filter.
        let probe = parapet_gen::worst_case_packet();
        let keys = vec![KeyWords::new(&probe, 0); 4096];
        let mut n = 25;
        while n <= 25_600 {
            let list = list_of(&parapet_gen::worst_case(n));
            let set = format!("worst_case({n})");
            if n <= 3_200 || !quick {
                run(&set, &list, &keys, Engine::Linear, run_ms);
            }
            run(&set, &list, &keys, Engine::Tree, run_ms);
            run(&set, &list, &keys, Engine::Auto, run_ms);
            n *= 2;
        }
    }
    if all || args.iter().any(|a| a == "random") {
        // iptables-like lists: jumps, RETURNs, LOGs, IPv6 (the general
        // path, with non-terminal rules).
        for rules in [100usize, 1_000, 10_000] {
            let rs = parapet_gen::random_ruleset(
                1,
                &parapet_gen::RandomSpec {
                    rules,
                    user_chains: 8,
                    ..Default::default()
                },
            );
            let list = list_of(&rs);
            let keys: Vec<KeyWords> = parapet_gen::packets_for(&rs, 2, 20_000)
                .iter()
                .map(|p| KeyWords::new(p, 0))
                .collect();
            let set = format!("random_ruleset({rules}, control flow)");
            run(&set, &list, &keys, Engine::Linear, run_ms);
            run(&set, &list, &keys, Engine::Tree, run_ms);
        }
    }
    if all || args.iter().any(|a| a == "classbench") {
        let dir = classbench_dir();
        for family in ["acl1", "fw1", "ipc1"] {
            let trace = read_maybe_gz(&dir.join(format!("{family}_10k_trace.gz")));
            for size in ["1k", "10k", "100k"] {
                let file = dir.join(if size == "1k" {
                    format!("{family}_{size}")
                } else {
                    format!("{family}_{size}.gz")
                });
                let Some(text) = read_maybe_gz(&file) else {
                    eprintln!("SKIP: {} not found", file.display());
                    continue;
                };
                let list = classbench_list(&text);
                // Each set with its own trace when there is one.
                let own = read_maybe_gz(&dir.join(format!("{family}_{size}_trace.gz")));
                let packets = classbench_trace(own.as_deref().or(trace.as_deref()).unwrap_or(""));
                let keys: Vec<KeyWords> = packets.iter().map(|p| KeyWords::new(p, 0)).collect();
                if keys.is_empty() {
                    eprintln!("SKIP: no trace for {family}_{size}");
                    continue;
                }
                run(
                    &format!("{family}_{size}"),
                    &list,
                    &keys,
                    Engine::Tree,
                    run_ms,
                );
            }
        }
    }
}
