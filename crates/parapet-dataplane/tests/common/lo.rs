//! The stateful tests' set-up: a dataplane whose image decides frames run
//! on loopback (ifindex 1) with BPF_PROG_TEST_RUN at XDP.

use parapet_dataplane::{AttachPoint, Dataplane, LoadOptions};

/// Loopback's ifindex.
pub const LO: u32 = 1;

/// A dataplane for `test` that knows loopback's name.
pub fn dp_on_lo(test: &str) -> Dataplane {
    dp_on_lo_counting(test, 4095)
}

/// [`dp_on_lo`] with counters for rule ids up to `max_rules`.
pub fn dp_on_lo_counting(test: &str, max_rules: u32) -> Dataplane {
    let mut dp = super::load_dataplane(
        test,
        &LoadOptions {
            debug: true,
            slot_pages: 64,
            max_rules,
        },
    );
    dp.set_ifname(LO, "lo").unwrap();
    dp
}

/// (deciding rule id, non-terminal rule ids) of one frame at XDP on
/// loopback; the image must have decided.
pub fn run_on_lo(dp: &Dataplane, frame: &[u8]) -> (u32, Vec<u32>) {
    dp.test_run(AttachPoint::Xdp, frame, LO, 1).unwrap();
    let d = dp.last_decision().unwrap().unwrap();
    assert!(d.by_image, "the image must decide");
    (d.rule_id, d.nonterminal)
}
