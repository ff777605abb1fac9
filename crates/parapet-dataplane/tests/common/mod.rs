//! Shared helpers for the integration tests: loading the dataplane (root
//! only), and a small deterministic PRNG (no extra dependencies).

#![allow(dead_code)]

pub mod addr_mirror;
pub mod classbench;
pub mod counted;
pub mod eligible;
pub mod image;
pub mod installed;
pub mod lo;
pub mod netns;
pub mod timed;
pub mod wire;

use parapet_dataplane::{Dataplane, LoadOptions};

/// Load the dataplane for `test`. The tests that call this are
/// `#[ignore = "needs root"]`: run without root they fail here, as they do
/// when BPF is not permitted or loading fails, instead of passing unrun.
pub fn load_dataplane(test: &str, opts: &LoadOptions) -> Dataplane {
    parapet_testbed::require_root();
    Dataplane::load(opts).unwrap_or_else(|e| panic!("{test}: loading the dataplane failed: {e:?}"))
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

/// The classifier image of an iptables-save ruleset (its INPUT chain).
pub fn iptables_image(text: &str) -> Vec<u8> {
    let rs = parapet_parse::parse(text, "test", parapet_parse::Format::IptablesSave)
        .expect("test ruleset parses")
        .ruleset;
    let list = parapet_model::flatten(&rs, rs.select_chain(Some("INPUT")).unwrap()).unwrap();
    let (image, _) =
        parapet_compile::compile(&list, &parapet_compile::CompileOptions::default()).unwrap();
    image.to_bytes()
}
