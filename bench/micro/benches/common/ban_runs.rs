//! What the ban benchmarks share: their `-- N RUNS` arguments, a private
//! network namespace (root) to attach the dataplane in, and medians.

/// `-- [N] [RUNS]` with the given defaults (RUNS at least 1).
pub fn n_and_runs(n: usize, runs: usize) -> (usize, usize) {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    (
        args.first().copied().unwrap_or(n),
        args.get(1).copied().unwrap_or(runs).max(1),
    )
}

/// Moves this process into a new network namespace with `lo` up; false
/// (with a note) without root.
pub fn own_netns() -> bool {
    // SAFETY: unshare only changes this process's namespaces.
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
        eprintln!("skipped: cannot create a network namespace (needs root)");
        return false;
    }
    let _ = std::process::Command::new("ip")
        .args(["link", "set", "lo", "up"])
        .status();
    true
}

/// Median, min and max.
pub fn median(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(|a, b| a.total_cmp(b));
    (v[v.len() / 2], v[0], v[v.len() - 1])
}
