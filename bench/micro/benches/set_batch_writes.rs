//! Kernel set writes in batches against one `bpf()` update per entry, same
//! run: what a fleet consumer round or a CrowdSec poll costs in the kernel
//! map (`Dataplane::set_add` of single IPv4 addresses with an expiry, in
//! batches of 4096 as the fleet publisher packs them). Needs root.
//!
//! `cargo bench -p parapet-bench-micro --bench set_batch_writes -- [N] [RUNS]`
//! (defaults 200000 and 7). Each run empties the set, then adds N
//! addresses; runs alternate one-by-one and batched. Prints the median
//! (min–max) addresses per second of each.

use parapet_dataplane::{Dataplane, LoadOptions, SetDim, SetElement, SetSizing};
use std::time::Instant;

fn median(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    let n: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(200_000);
    let runs: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(7);
    let mut dp = match Dataplane::load_sized(
        &LoadOptions::default(),
        &SetSizing {
            lpm_entries: (2 * n).max(1024) as u32,
            tuple_entries: 1024,
        },
    ) {
        Ok(dp) => dp,
        Err(e) => {
            eprintln!("skipped: cannot load the BPF dataplane ({e}); run as root");
            return;
        }
    };
    dp.create_set(0, &[SetDim::Ipv4Addr]).unwrap();
    let expires = parapet_dataplane::monotonic_ns() + 3_600_000_000_000;
    let els: Vec<SetElement> = (0..n as u32)
        .map(|i| {
            let mut e = SetElement::exact(&[u128::from(0x0a00_0000 | (i & 0x00ff_ffff))]);
            e.expires_ns = expires;
            e
        })
        .collect();
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
