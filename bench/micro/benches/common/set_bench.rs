//! What the kernel set benchmarks share (`set_batch_writes`,
//! `set_batch_deletes`, `set_reap_index`): a dataplane whose LPM map holds
//! `n` entries with room to spare, with set 0 of IPv4 addresses, and `n`
//! single addresses with one expiry.

use parapet_dataplane::{Dataplane, LoadOptions, SetDim, SetElement, SetSizing};
use std::time::{Duration, Instant};

/// The daemon's kernel reaping budget per set and call (server.rs).
pub const REAP_BUDGET: usize = 1 << 14;

/// A dataplane with room for `n` LPM and exact-hash entries (twice over) and an empty
/// IPv4 set 0; `None` (with a note) when it cannot be loaded (not root).
pub fn dataplane_with_set(n: usize) -> Option<Dataplane> {
    let sizing = SetSizing {
        lpm_entries: (2 * n).max(1024) as u32,
        tuple_entries: 1024,
        exact4_entries: (2 * n).max(1024) as u32,
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

/// `n` single IPv4 addresses from `base` on, each expiring at
/// `expires_ns` (`CLOCK_MONOTONIC`).
pub fn addresses_from(base: u32, n: usize, expires_ns: u64) -> Vec<SetElement> {
    (0..n as u32)
        .map(|i| {
            let a = base.wrapping_add(i);
            SetElement::exact(&[u128::from(a)]).expires(expires_ns)
        })
        .collect()
}

/// `n` addresses of 10.0.0.0/8 on, each expiring at `expires_ns`.
pub fn addresses(n: usize, expires_ns: u64) -> Vec<SetElement> {
    addresses_from(0x0a00_0000, n.min(1 << 24), expires_ns)
}

/// Seconds of reaping calls until the kernel holds none of `n` elements
/// (10.0.0.0 on) that expired together, and the calls it took. Other
/// elements of set 0 must be outside 10.0.0.0/8 and must not expire.
pub fn expiry_run(dp: &mut Dataplane, n: usize) -> (f64, usize) {
    let (kept, kept_entries) = (
        dp.set_len(0).unwrap(),
        dp.set_kernel_entries(0).unwrap().len(),
    );
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
        if gone == 0 || dp.set_len(0).unwrap() == kept {
            break;
        }
    }
    let left = dp.set_kernel_entries(0).unwrap().len();
    assert_eq!(left, kept_entries, "all reaped");
    (busy.as_secs_f64(), calls)
}
