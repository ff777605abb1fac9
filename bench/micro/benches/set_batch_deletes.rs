//! Kernel set deletes in batches (`BPF_MAP_DELETE_BATCH`) against one
//! `bpf()` delete per entry, same run. Two measurements, each alternating
//! one-by-one and batched runs:
//!
//! - **unbans/s**: N single IPv4 addresses in set 0, then all deleted with
//!   `Dataplane::set_del` in chunks of 4096 (as a fleet consumer round or a
//!   CrowdSec poll hands them over).
//! - **mass expiry** (the cs-firewall-bouncer#509 story): N addresses that
//!   all expire at one moment; after it, `Dataplane::reap_sets` with the
//!   daemon's budget (16,384 per set and call) is called until the kernel
//!   map holds none of them (read back). Reported: the time of the reaping
//!   calls, and the calls needed (the daemon makes one every 2 s).
//!
//! `cargo bench -p parapet-bench-micro --bench set_batch_deletes -- [N] [RUNS]`
//! (defaults 100000 and 5). Needs root. Prints one JSON line: medians
//! (min–max).

#[path = "common/ban_runs.rs"]
#[allow(dead_code)]
mod ban_runs;
#[path = "common/set_bench.rs"]
#[allow(dead_code)]
mod set_bench;

use ban_runs::median;
use parapet_dataplane::{Dataplane, SetElement};
use set_bench::{addresses, expiry_run, REAP_BUDGET};
use std::time::Instant;

/// Seconds to delete every element in chunks of 4096.
fn unban_run(dp: &mut Dataplane, els: &[SetElement]) -> f64 {
    dp.set_add(0, els).unwrap();
    let t = Instant::now();
    for chunk in els.chunks(4096) {
        dp.set_del(0, chunk).unwrap();
    }
    let s = t.elapsed().as_secs_f64();
    assert_eq!(dp.set_kernel_entries(0).unwrap().len(), 0, "all unbanned");
    s
}

fn main() {
    let (n, runs) = ban_runs::n_and_runs(100_000, 5);
    let Some(mut dp) = set_bench::dataplane_with_set(n) else {
        return;
    };
    let els = addresses(n, parapet_dataplane::monotonic_ns() + 3_600_000_000_000);
    let (mut unban, mut expiry, mut calls) = ([vec![], vec![]], [vec![], vec![]], 0);
    for r in 0..2 * runs {
        let batch = r % 2 == 1;
        dp.set_batched_writes(batch);
        unban[batch as usize].push(n as f64 / unban_run(&mut dp, &els));
        let (s, c) = expiry_run(&mut dp, n);
        expiry[batch as usize].push(s * 1000.0);
        calls = c;
    }
    let [u1, ub] = unban.map(median);
    let [e1, eb] = expiry.map(median);
    println!(
        "{{\"n\": {n}, \"runs\": {runs}, \"unbans_per_s\": {{\"one_by_one\": [{:.0}, {:.0}, {:.0}], \"batched\": [{:.0}, {:.0}, {:.0}]}}, \"mass_expiry_reap_ms\": {{\"one_by_one\": [{:.1}, {:.1}, {:.1}], \"batched\": [{:.1}, {:.1}, {:.1}]}}, \"reap_calls\": {calls}, \"reap_budget\": {REAP_BUDGET}}}",
        u1.0, u1.1, u1.2, ub.0, ub.1, ub.2, e1.0, e1.1, e1.2, eb.0, eb.1, eb.2
    );
}
