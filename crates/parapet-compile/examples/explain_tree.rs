//! Builds a classifier for a ClassBench file and prints `explain()` plus
//! the average lookup work over its trace.
//!
//! `cargo run --release -p parapet-compile --example explain_tree -- FILTERS|random:N [TRACE] [leaf_size]`
//!
//! Environment: `BENCH=1` also measures lookups; `SPFAC=x` sets the
//! multi-way space factor; `NOPART=1` builds one tree for all rules;
//! `PASSES=fast|image` classifies the trace 6 times through the batch API
//! (`fast`: the user-space fast path, `image`: the walk of the image words)
//! inside `profile_passes`, for `valgrind --tool=callgrind
//! --toggle-collect='*profile_passes*'`.

#[path = "../tests/common.rs"]
mod common;

use parapet_compile::*;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // `random:N` compiles `parapet_gen::random_ruleset(1, N rules)` instead.
    let (list, random) = match args[0].strip_prefix("random:") {
        Some(n) => {
            let rs = parapet_gen::random_ruleset(
                1,
                &parapet_gen::RandomSpec {
                    rules: n.parse().expect("rule count"),
                    user_chains: 8,
                    ..Default::default()
                },
            );
            let list = parapet_model::flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
            (list, Some(rs))
        }
        None => {
            let text = common::read_maybe_gz(args[0].as_ref()).expect("filters");
            (common::classbench_list(&text), None)
        }
    };
    let opts = BuildOptions {
        leaf_size: args.get(2).and_then(|s| s.parse().ok()),
        spfac: std::env::var("SPFAC").ok().and_then(|s| s.parse().ok()),
        // NOPART=1: one tree for all rules (to measure what partitions buy).
        partition: std::env::var_os("NOPART").is_none(),
        ..Default::default()
    };
    let c = Classifier::build(&list, &opts).unwrap();
    print!("{}", c.explain());
    let packets = match &random {
        Some(rs) => Some(parapet_gen::packets_for(rs, 2, 20_000)),
        None => args
            .get(1)
            .and_then(|p| common::read_maybe_gz(p.as_ref()))
            .map(|t| common::classbench_trace(&t)),
    };
    if let Some(packets) = packets {
        let (mut nodes, mut checked, mut steps) = (0usize, 0usize, 0usize);
        for p in &packets {
            let (n, k) = c.walker().lookup_cost(&KeyWords::new(p, 0));
            nodes += n;
            checked += k;
            steps += c
                .fast_path()
                .map_or(0, |f| f.steps(c.image().words(), &KeyWords::new(p, 0)));
        }
        let n = packets.len().max(1) as f64;
        if let Ok(which) = std::env::var("PASSES") {
            let keys: Vec<KeyWords> = packets.iter().map(|p| KeyWords::new(p, 0)).collect();
            let started = std::time::Instant::now();
            let sum = profile_passes(&c, &keys, &which);
            let ns = started.elapsed().as_nanos() as f64 / (6 * keys.len()) as f64;
            println!(
                "  passes: 6 x {} lookups (checksum {sum}), {ns:.1} ns/lookup wall",
                keys.len()
            );
        }
        if std::env::var_os("BENCH").is_some() {
            let keys: Vec<KeyWords> = packets.iter().map(|p| KeyWords::new(p, 0)).collect();
            println!("{}", time_lookups(&c, &keys, 5).to_json());
        }
        println!(
            "  trace: {} packets, {:.1} nodes and {:.1} entry checks per lookup ({:.1} fast-path steps)",
            packets.len(),
            nodes as f64 / n,
            checked as f64 / n,
            steps as f64 / n
        );
    }
}

/// Six batch passes over `keys` (see the module doc).
#[inline(never)]
fn profile_passes(c: &Classifier, keys: &[KeyWords], which: &str) -> u64 {
    let mut out = vec![0u32; keys.len()];
    let mut sum = 0u64;
    for _ in 0..6 {
        match which {
            "image" => c.walker().first_match_ids(keys, &mut out),
            _ => c.classify_batch_ids(keys, &mut out),
        }
        sum += out.iter().map(|&x| x as u64).sum::<u64>();
    }
    sum
}
