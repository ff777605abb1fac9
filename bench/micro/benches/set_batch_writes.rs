//! Kernel set writes in batches against one `bpf()` update per entry, same
//! run: what a fleet consumer round or a CrowdSec poll costs in the kernel
//! map (`Dataplane::set_add` of single IPv4 addresses with an expiry, in
//! batches of 4096 as the fleet publisher packs them). Needs root.
//!
//! `cargo bench -p parapet-bench-micro --bench set_batch_writes -- [N] [RUNS]`
//! (defaults 200000 and 7). Each run empties the set, then adds N
//! addresses; runs alternate one-by-one and batched. Prints the median
//! (min–max) addresses per second of each.

#[path = "common/ban_runs.rs"]
#[allow(dead_code)]
mod ban_runs;
#[path = "common/set_bench.rs"]
#[allow(dead_code)]
mod set_bench;

use ban_runs::median;
use std::time::Instant;

fn main() {
    let (n, runs) = ban_runs::n_and_runs(200_000, 7);
    let Some(mut dp) = set_bench::dataplane_with_set(n) else {
        return;
    };
    let els = set_bench::addresses(n, parapet_dataplane::monotonic_ns() + 3_600_000_000_000);
    let (mut single, mut batched) = (Vec::new(), Vec::new());
    for r in 0..2 * runs {
        let batch = r % 2 == 1;
        dp.set_flush(0).unwrap();
        dp.set_batched_writes(batch);
        let t = Instant::now();
        for chunk in els.chunks(4096) {
            dp.set_add(0, chunk).unwrap();
        }
        let rate = n as f64 / t.elapsed().as_secs_f64();
        if batch { &mut batched } else { &mut single }.push(rate);
    }
    let (s, b) = (median(single), median(batched));
    println!("{{\"n\": {n}, \"runs\": {runs}, \"one_by_one_per_s\": [{:.0}, {:.0}, {:.0}], \"batched_per_s\": [{:.0}, {:.0}, {:.0}]}}", s.0, s.1, s.2, b.0, b.1, b.2);
}
