//! The kernel side of stateful conditions (`bpf/lib/stateful.h`): the
//! kernel's `HZ` the program needs for `xt_limit`'s jiffies arithmetic,
//! and the wall clock time windows read ([`WallClock`]). (The
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

/// The wall clock time windows read in the kernel (`bpf/lib/clock.h`'s
/// `parapet_wall_clock`): `CLOCK_REALTIME − CLOCK_BOOTTIME` in ns, the
/// offset that turns the BPF program's boot clock into UTC, and the
/// kernel's `sys_tz` in minutes west of UTC (`--kerneltz`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct WallClock {
    /// UTC ns since the epoch minus `CLOCK_BOOTTIME` ns.
    pub boot_to_utc_ns: i64,
    /// `sys_tz.tz_minuteswest`.
    pub minutes_west: i32,
}

fn clock_ns(clock: libc::clockid_t) -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write to.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

impl WallClock {
    /// The offset now: the real-time clock read between two boot-clock
    /// reads (their midpoint), and `sys_tz` from the raw `gettimeofday`
    /// system call (glibc's wrapper reports zero since 2.31).
    pub fn now() -> WallClock {
        let b0 = clock_ns(libc::CLOCK_BOOTTIME);
        let real = clock_ns(libc::CLOCK_REALTIME);
        let b1 = clock_ns(libc::CLOCK_BOOTTIME);
        let mut tv = libc::timeval {
            tv_sec: 0,
            tv_usec: 0,
        };
        let mut tz = [0i32; 2];
        // SAFETY: the kernel writes a timeval and a struct timezone (two
        // ints) to the buffers given.
        let ok = unsafe {
            libc::syscall(
                libc::SYS_gettimeofday,
                &mut tv as *mut libc::timeval,
                tz.as_mut_ptr(),
            )
        } == 0;
        WallClock {
            boot_to_utc_ns: real - (b0 + (b1 - b0) / 2),
            minutes_west: if ok { tz[0] } else { 0 },
        }
    }
}

impl crate::Dataplane {
    /// Writes the wall clock time windows read (the loader writes
    /// [`WallClock::now`]; parapetd refreshes it every second so a stepped
    /// clock is followed; tests write a chosen one).
    pub fn set_wall_clock(&mut self, clock: WallClock) -> crate::error::Result<()> {
        let map = self
            .ebpf
            .map_mut("parapet_wall_clock")
            .ok_or(crate::error::Error::Missing("map parapet_wall_clock"))?;
        let mut words: aya::maps::Array<_, i64> = aya::maps::Array::try_from(map)?;
        words.set(1, i64::from(clock.minutes_west), 0)?;
        words.set(0, clock.boot_to_utc_ns, 0)?;
        Ok(())
    }
}
