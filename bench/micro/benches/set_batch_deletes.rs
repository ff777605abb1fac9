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

use parapet_dataplane::{Dataplane, LoadOptions, SetDim, SetElement, SetSizing};
use std::time::{Duration, Instant};

/// The daemon's kernel reaping budget per set and call (server.rs).
const REAP_BUDGET: usize = 1 << 14;

fn median(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

fn addresses(n: usize, expires_ns: u64) -> Vec<SetElement> {
    (0..n as u32)
        .map(|i| {
            let mut e = SetElement::exact(&[u128::from(0x0a00_0000 | (i & 0x00ff_ffff))]);
            e.expires_ns = expires_ns;
            e
        })
        .collect()
}

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

/// Seconds of reaping calls until the kernel holds none of `n` elements
/// that expired together, and the calls it took.
fn expiry_run(dp: &mut Dataplane, n: usize) -> (f64, usize) {
    let at = parapet_dataplane::monotonic_ns() + 300_000_000;
    dp.set_add(0, &addresses(n, at)).unwrap();
    while parapet_dataplane::monotonic_ns() <= at {
        std::thread::sleep(Duration::from_millis(20));
    }
    let (mut busy, mut calls) = (Duration::ZERO, 0);
    // bounded: every call frees up to REAP_BUDGET entries
    for _ in 0..(n / REAP_BUDGET + 2) {
        let t = Instant::now();
        let gone = dp.reap_sets(REAP_BUDGET).unwrap();
        busy += t.elapsed();
        calls += 1;
        if gone == 0 || dp.set_len(0).unwrap() == 0 {
            break;
        }
    }
    assert_eq!(dp.set_kernel_entries(0).unwrap().len(), 0, "all reaped");
    (busy.as_secs_f64(), calls)
}

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    let n: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let runs: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(5);
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
