//! What share of a process's peak memory at the dataplane's load is the
//! kernel's BTF, parsed (aya's `Btf::from_sys_fs`, which the loader runs
//! once for the kfuncs and once inside `EbpfLoader::new`, one after the
//! other). Each phase runs in a fresh child process of this binary, so
//! the peaks (VmHWM) do not mix. Needs root for the `load` phase.
//!
//! `cargo bench -p parapet-bench-micro --bench btf_peak -- [RUNS]`
//! (default 3). Prints one JSON line per phase and run, KiB:
//! - `idle`: the process as it starts;
//! - `btf`: one parse: the peak, and resident while it is held;
//! - `load`: `Dataplane::load` (both parses inside): the peak, and
//!   resident once loaded;
//! - `load_trim`: the same, then `malloc_trim(0)` as parapetd does after
//!   its load: what the trim gives back (resident), and that the peak
//!   stays.

use std::process::Command;

fn status(field: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn phase(name: &str) {
    match name {
        "idle" => {}
        "btf" => {
            let btf = aya::Btf::from_sys_fs().expect("/sys/kernel/btf/vmlinux");
            std::hint::black_box(&btf);
        }
        "load" => {
            let dp = parapet_dataplane::Dataplane::load(&Default::default()).expect("load (root)");
            std::hint::black_box(&dp);
        }
        "load_trim" => {
            let dp = parapet_dataplane::Dataplane::load(&Default::default()).expect("load (root)");
            // SAFETY: malloc_trim only releases free heap pages to the kernel.
            unsafe {
                libc::malloc_trim(0);
            }
            std::hint::black_box(&dp);
        }
        _ => panic!("unknown phase {name}"),
    }
    println!(
        "{{\"phase\": \"{name}\", \"peak_kib\": {}, \"rss_kib\": {}}}",
        status("VmHWM:"),
        status("VmRSS:")
    );
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    if let Some(p) = args.iter().find_map(|a| a.strip_prefix("phase=")) {
        return phase(p);
    }
    let runs: usize = args.first().and_then(|s| s.parse().ok()).unwrap_or(3);
    let me = std::env::current_exe().unwrap();
    for _ in 0..runs {
        for p in ["idle", "btf", "load", "load_trim"] {
            let out = Command::new(&me)
                .arg(format!("phase={p}"))
                .output()
                .unwrap();
            print!("{}", String::from_utf8_lossy(&out.stdout));
            if !out.status.success() {
                eprint!("{}", String::from_utf8_lossy(&out.stderr));
            }
        }
    }
}
