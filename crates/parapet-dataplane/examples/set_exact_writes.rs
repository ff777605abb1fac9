//! Single IPv4 bans into the kernel: the exact hash against the LPM trie,
//! same run. Two dataplanes, one whose exact hash has room for every ban
//! (what parapet does now) and one whose exact hash holds a single entry,
//! so every other /32 goes to the LPM trie (what every session before 14
//! did). Each run adds N single addresses of 10.0.0.0/8 with an expiry
//! in calls of 4096 (as a fleet batch; batched writes), checks where they
//! went, then flushes the set; runs alternate the two. Needs root.
//!
//! `cargo run --release -p parapet-dataplane --example set_exact_writes -- [N] [RUNS]`
//! (defaults 1000000 and 5). Prints the median (min–max) addresses per
//! second of the adds, and of the flush, for each: per wall second, and
//! per CPU second of this process (user + system, the kernel's map work
//! included), which a loaded machine's waiting for a CPU does not move.

use parapet_dataplane::{monotonic_ns, Dataplane, LoadOptions, SetDim, SetElement, SetSizing};
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

/// CPU seconds (user + system) this process has used.
fn cpu_s() -> f64 {
    // SAFETY: getrusage writes the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Median, min and max.
fn median(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(|a, b| a.total_cmp(b));
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let n = args.first().copied().unwrap_or(1_000_000).min(1 << 24);
    let runs = args.get(1).copied().unwrap_or(5).max(1);
    let (Some(mut trie), Some(mut hash)) = (load(1, n), load((2 * n) as u32, n)) else {
        return;
    };
    let expires = monotonic_ns() + 3_600_000_000_000;
    let els: Vec<SetElement> = (0..n as u32)
        .map(|i| SetElement::exact(&[u128::from(0x0a00_0000 + i)]).expires(expires))
        .collect();
    let mut adds = [Vec::new(), Vec::new()];
    let mut flushes = [Vec::new(), Vec::new()];
    let mut adds_cpu = [Vec::new(), Vec::new()];
    let mut flushes_cpu = [Vec::new(), Vec::new()];
    for r in 0..2 * runs {
        let which = r % 2; // 0: trie, 1: hash
        let dp = if which == 0 { &mut trie } else { &mut hash };
        let (t, c) = (Instant::now(), cpu_s());
        for chunk in els.chunks(4096) {
            dp.set_add(0, chunk).unwrap();
        }
        adds[which].push(n as f64 / t.elapsed().as_secs_f64());
        adds_cpu[which].push(n as f64 / (cpu_s() - c));
        let in_hash = dp.set_exact_entries(0).unwrap();
        assert_eq!(
            in_hash,
            if which == 0 { 1 } else { n },
            "where the bans went"
        );
        let (t, c) = (Instant::now(), cpu_s());
        dp.set_flush(0).unwrap();
        flushes[which].push(n as f64 / t.elapsed().as_secs_f64());
        flushes_cpu[which].push(n as f64 / (cpu_s() - c));
    }
    let f = |v: &Vec<f64>| {
        let (m, lo, hi) = median(v.clone());
        format!("[{m:.0}, {lo:.0}, {hi:.0}]")
    };
    println!(
        "{{\"n\": {n}, \"runs\": {runs}, \"trie_add_per_s\": {}, \"hash_add_per_s\": {}, \"trie_flush_per_s\": {}, \"hash_flush_per_s\": {}, \"trie_add_per_cpu_s\": {}, \"hash_add_per_cpu_s\": {}, \"trie_flush_per_cpu_s\": {}, \"hash_flush_per_cpu_s\": {}}}",
        f(&adds[0]),
        f(&adds[1]),
        f(&flushes[0]),
        f(&flushes[1]),
        f(&adds_cpu[0]),
        f(&adds_cpu[1]),
        f(&flushes_cpu[0]),
        f(&flushes_cpu[1])
    );
}
