//! The kernel side of stateful conditions (`bpf/lib/stateful.h`): the
//! kernel's `HZ` the program needs for `xt_limit`'s jiffies arithmetic. (The
//! test clock that drives the BPF walker's time in tests is
//! `Dataplane::set_test_clock`, with the other test facilities in
//! `test_run.rs`.)

use std::io::Read;

/// The running kernel's `CONFIG_HZ`: from its build configuration
/// (`/proc/config.gz`, `/boot/config-RELEASE`), else measured from
/// `/proc/timer_list`'s jiffies over 200 ms and rounded to the nearest of
/// the values kernels are built with. `None` when nothing tells: then
/// `-m limit` conditions never pass in the kernel (fail closed).
pub fn kernel_hz() -> Option<u32> {
    config_hz().or_else(measured_hz)
}

fn config_hz() -> Option<u32> {
    let mut text = String::new();
    if let Ok(f) = std::fs::File::open("/proc/config.gz") {
        let _ = flate2::read::GzDecoder::new(f).read_to_string(&mut text);
    }
    if text.is_empty() {
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
        text = std::fs::read_to_string(format!("/boot/config-{}", release.trim())).ok()?;
    }
    text.lines()
        .find_map(|l| l.strip_prefix("CONFIG_HZ="))
        .and_then(|v| v.trim().parse().ok())
}

/// The kernel's jiffies now (`/proc/timer_list`, root only): the clock of
/// `-m recent`'s time stamps, for writes from user space.
pub fn kernel_jiffies() -> Option<u64> {
    timer_list_jiffies()
}

fn timer_list_jiffies() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/timer_list").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("jiffies: "))
        .and_then(|v| v.trim().parse().ok())
}

fn measured_hz() -> Option<u32> {
    let t0 = std::time::Instant::now();
    let j0 = timer_list_jiffies()?;
    std::thread::sleep(std::time::Duration::from_millis(200));
    let j1 = timer_list_jiffies()?;
    let hz = (j1.saturating_sub(j0)) as f64 / t0.elapsed().as_secs_f64();
    [100u32, 250, 300, 1000]
        .into_iter()
        .min_by(|a, b| (*a as f64 - hz).abs().total_cmp(&(*b as f64 - hz).abs()))
}
