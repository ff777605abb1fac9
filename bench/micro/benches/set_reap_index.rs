//! Reaping expired kernel set elements through the sets mirror's expiry
//! index (`set_expiry.rs`) against the scan of every element it replaced
//! (`Dataplane::set_reap_by_scan`), same run, runs alternating. Needs root.
//!
//! - **mass expiry** (the cs-firewall-bouncer#509 story): N addresses
//!   that expire at one moment; `Dataplane::reap_sets` with the daemon's
//!   budget (16,384 per set and call) until the kernel map holds none of
//!   them (read back). Reported: the time of the reaping calls.
//! - **few due in a large set**: B addresses banned for an hour stay in
//!   the set; 1,000 more expire at one moment; the time of the one
//!   reaping call that frees them (the daemon makes one every 2 s, and a
//!   round that finds nothing due costs what finding costs).
//!
//! `cargo bench -p parapet-bench-micro --bench set_reap_index -- [N] [RUNS] [B]`
//! (defaults 100000, 5 and 1000000). Prints one JSON line: medians
//! (min–max) in ms.

#[path = "common/ban_runs.rs"]
#[allow(dead_code)]
mod ban_runs;
#[path = "common/set_bench.rs"]
#[allow(dead_code)]
mod set_bench;

use ban_runs::median;
use parapet_dataplane::Dataplane;
use set_bench::{addresses_from, expiry_run, REAP_BUDGET};
use std::time::{Duration, Instant};

/// Elements due in the "few due" measurement.
const FEW: usize = 1000;

/// Milliseconds of the reaping call that frees `FEW` elements expired
/// together among the set's long-lived ones.
fn few_due_run(dp: &mut Dataplane) -> f64 {
    let kept = dp.set_len(0).unwrap();
    let at = parapet_dataplane::monotonic_ns() + 200_000_000;
    // 11.0.0.0 on: apart from the long-lived 32.0.0.0 on
    dp.set_add(0, &addresses_from(0x0b00_0000, FEW, at))
        .unwrap();
    while parapet_dataplane::monotonic_ns() <= at {
        std::thread::sleep(Duration::from_millis(20));
    }
    let t = Instant::now();
    let gone = dp.reap_sets(REAP_BUDGET).unwrap();
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    assert_eq!(
        (gone, dp.set_len(0).unwrap()),
        (FEW, kept),
        "one call frees them"
    );
    ms
}

fn main() {
    let (n, runs) = ban_runs::n_and_runs(100_000, 5);
    let b = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse::<usize>().ok())
        .nth(2)
        .unwrap_or(1_000_000);
    let Some(mut dp) = set_bench::dataplane_with_set(n + b + FEW) else {
        return;
    };
    let mut mass = [vec![], vec![]];
    for r in 0..2 * runs {
        let by_index = r % 2 == 1;
        dp.set_reap_by_scan(!by_index);
        mass[by_index as usize].push(expiry_run(&mut dp, n).0 * 1000.0);
    }
    let long = parapet_dataplane::monotonic_ns() + 3_600_000_000_000;
    let base = addresses_from(0x2000_0000, b, long);
    let t = Instant::now();
    for chunk in base.chunks(65_536) {
        dp.set_add(0, chunk).unwrap();
    }
    eprintln!(
        "{b} long-lived addresses in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let mut few = [vec![], vec![]];
    for r in 0..2 * runs {
        let by_index = r % 2 == 1;
        dp.set_reap_by_scan(!by_index);
        few[by_index as usize].push(few_due_run(&mut dp));
    }
    let [ms, mi] = mass.map(median);
    let [fs, fi] = few.map(median);
    println!(
        "{{\"n\": {n}, \"runs\": {runs}, \"long_lived\": {b}, \"few_due\": {FEW}, \"reap_budget\": {REAP_BUDGET}, \"mass_expiry_reap_ms\": {{\"scan\": [{:.1}, {:.1}, {:.1}], \"index\": [{:.1}, {:.1}, {:.1}]}}, \"few_due_reap_ms\": {{\"scan\": [{:.2}, {:.2}, {:.2}], \"index\": [{:.2}, {:.2}, {:.2}]}}}}",
        ms.0, ms.1, ms.2, mi.0, mi.1, mi.2, fs.0, fs.1, fs.2, fi.0, fi.1, fi.2
    );
}
