//! Shared helpers for the integration tests: privilege checks that skip
//! cleanly, and a small deterministic PRNG (no extra dependencies).

#![allow(dead_code)]

pub mod image;
pub mod wire;

use parapet_dataplane::{Dataplane, LoadOptions};

/// Load the dataplane, or print "skipped: <reason>" and return `None` when
/// the process lacks the privileges BPF needs. Any other load failure is a
/// real bug and panics.
pub fn load_or_skip(test: &str, opts: &LoadOptions) -> Option<Dataplane> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!("skipped: {test}: needs root (CAP_BPF/CAP_NET_ADMIN) to load BPF");
        return None;
    }
    match Dataplane::load(opts) {
        Ok(dp) => Some(dp),
        Err(e) => {
            let msg = format!("{e:?}");
            if msg.contains("EPERM") || msg.contains("Operation not permitted") {
                println!("skipped: {test}: BPF not permitted here ({e})");
                None
            } else {
                panic!("{test}: loading the dataplane failed: {e:?}");
            }
        }
    }
}

/// Runs `ip ARGS` (iproute2); the error says which command failed and why.
pub fn ip(args: &[&str]) -> Result<(), String> {
    let out = std::process::Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip {args:?}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {args:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// xorshift64*: deterministic, seedable, good enough for fuzz-style tests.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.max(1))
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    pub fn u16(&mut self) -> u16 {
        self.next() as u16
    }
    pub fn u8(&mut self) -> u8 {
        self.next() as u8
    }
}
