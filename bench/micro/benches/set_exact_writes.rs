//! Single IPv4 bans into the kernel: the exact hash against the LPM trie,
//! same run. Two dataplanes, one whose exact hash has room for every ban
//! (what parapet does now) and one whose exact hash holds a single entry,
//! so every other /32 goes to the LPM trie (what every session before 14
//! did). Each run empties the set, adds N single addresses with an expiry
//! in calls of 4096 (as a fleet batch; batched writes), then flushes it;
//! runs alternate the two. Needs root.
//!
//! `cargo bench -p parapet-bench-micro --bench set_exact_writes -- [N] [RUNS]`
//! (defaults 1000000 and 5). Prints the median (min–max) addresses per
//! second of the adds, and of the flush, for each.

#[path = "common/ban_runs.rs"]
#[allow(dead_code)]
mod ban_runs;
#[path = "common/set_bench.rs"]
#[allow(dead_code)]
mod set_bench;

use ban_runs::median;
use parapet_dataplane::{Dataplane, LoadOptions, SetDim, SetSizing};
use std::time::Instant;

fn load(exact4_entries: u32, n: usize) -> Option<Dataplane> {
    let sizing = SetSizing {
        lpm_entries: (2 * n).max(1024) as u32,
        tuple_entries: 1024,
        exact4_entries,
        exact6_entries: 1024,
    };
    match Dataplane::load_sized(&LoadOptions::default(), &sizing) {
        Ok(mut dp) => {
            dp.create_set(0, &[SetDim::Ipv4Addr]).unwrap();
            Some(dp)
        }
        Err(e) => {
            eprintln!("skipped: cannot load the BPF dataplane ({e}); run as root");
            None
        }
    }
}

fn main() {
    let (n, runs) = ban_runs::n_and_runs(1_000_000, 5);
    let (Some(mut trie), Some(mut hash)) = (load(1, n), load((2 * n) as u32, n)) else {
        return;
    };
    let els = set_bench::addresses(n, parapet_dataplane::monotonic_ns() + 3_600_000_000_000);
    let mut adds = [Vec::new(), Vec::new()];
    let mut flushes = [Vec::new(), Vec::new()];
    for r in 0..2 * runs {
        let which = r % 2; // 0: trie, 1: hash
        let dp = if which == 0 { &mut trie } else { &mut hash };
        let t = Instant::now();
        for chunk in els.chunks(4096) {
            dp.set_add(0, chunk).unwrap();
        }
        adds[which].push(n as f64 / t.elapsed().as_secs_f64());
        let in_hash = dp.set_exact_entries(0).unwrap();
        assert_eq!(
            in_hash,
            if which == 0 { 1 } else { n },
            "where the bans went"
        );
        let t = Instant::now();
        dp.set_flush(0).unwrap();
        flushes[which].push(n as f64 / t.elapsed().as_secs_f64());
    }
    let f = |v: &Vec<f64>| {
        let (m, lo, hi) = median(v.clone());
        format!("[{m:.0}, {lo:.0}, {hi:.0}]")
    };
    println!(
        "{{\"n\": {n}, \"runs\": {runs}, \"trie_add_per_s\": {}, \"hash_add_per_s\": {}, \"trie_flush_per_s\": {}, \"hash_flush_per_s\": {}}}",
        f(&adds[0]),
        f(&adds[1]),
        f(&flushes[0]),
        f(&flushes[1])
    );
}
