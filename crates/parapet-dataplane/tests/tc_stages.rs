//! The tc placement's two stages per link (docs/hooks.md, *Without
//! netfilter BPF links*): the linked programs tail-call their second
//! stage through the stage map (`parapet_tc_stages`), and a slot found
//! empty drops the packet (`TC_ACT_SHOT`), never passes it — the second
//! chain was not run. Run with `BPF_PROG_TEST_RUN` on the real programs.
//! Needs root.

mod common;

use common::load_dataplane;
use parapet_dataplane::frame::Frame;
use parapet_dataplane::{
    tc_hook_bit, LoadOptions, NfFamily, NfHook, STAGE_POST_OUT, STAGE_ROUTE_IN,
};
use std::net::Ipv4Addr;

const TC_ACT_OK: u32 = 0;
const TC_ACT_SHOT: u32 = 2;

#[test]
#[ignore = "needs root"]
fn a_stage_slot_found_empty_drops_and_a_filled_one_runs_the_stage() {
    let mut dp = load_dataplane("tc_stages", &LoadOptions::default());
    dp.load_tc_hook_programs().unwrap();
    // chains at PREROUTING and POSTROUTING for IPv6 only: an IPv4 packet
    // enters both first stages' hooks, passes them (no chain for its
    // family) and goes on to the second stage, which has no chain for it
    // either: passed, when the stage is there
    dp.set_tc_hooks(
        tc_hook_bit(NfHook::Prerouting, NfFamily::Ipv6)
            | tc_hook_bit(NfHook::Postrouting, NfFamily::Ipv6),
    )
    .unwrap();
    let lo = Ipv4Addr::LOCALHOST;
    let frame = Frame::ipv4(lo, lo).udp(40000, 7000).build();
    let run = |dp: &parapet_dataplane::Dataplane, egress| {
        dp.test_run_tc_hooks(egress, &frame, 1).unwrap()
    };
    assert_eq!(
        run(&dp, false),
        TC_ACT_OK,
        "ingress, INPUT stage in its slot"
    );
    assert_eq!(
        run(&dp, true),
        TC_ACT_OK,
        "egress, POSTROUTING stage in its slot"
    );

    dp.clear_tc_stage(STAGE_ROUTE_IN).unwrap();
    assert_eq!(
        run(&dp, false),
        TC_ACT_SHOT,
        "ingress without its second stage"
    );
    assert_eq!(run(&dp, true), TC_ACT_OK, "egress keeps its stage");
    dp.clear_tc_stage(STAGE_POST_OUT).unwrap();
    assert_eq!(
        run(&dp, true),
        TC_ACT_SHOT,
        "egress without its second stage"
    );

    // without a POSTROUTING chain the egress link needs no second stage
    dp.set_tc_hooks(tc_hook_bit(NfHook::Prerouting, NfFamily::Ipv6))
        .unwrap();
    assert_eq!(
        run(&dp, true),
        TC_ACT_OK,
        "no POSTROUTING chain: no tail call"
    );
    // the ingress link always needs its second stage (INPUT/FORWARD)
    dp.set_tc_hooks(0).unwrap();
    assert_eq!(
        run(&dp, false),
        TC_ACT_SHOT,
        "no chain at all, still no stage"
    );

    // loading again writes the slots again (an upgrade's order)
    dp.load_tc_hook_programs().unwrap();
    assert_eq!(run(&dp, false), TC_ACT_OK, "slots written again");
}
