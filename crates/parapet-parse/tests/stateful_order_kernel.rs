//! The kernel as the oracle for matches written after a stateful one
//! (`-p udp -m recent --update … -m udp --dport 123`, as in the corpus's
//! `diekmann_sargon.rules`): the kernel runs a rule's matches in order, so
//! `-m recent` records its hit (and `-m limit` spends its token) for every
//! packet reaching it, whatever the port, and the rule decides only for
//! the port. The same ruleset goes into a network namespace this test
//! creates (`iptables-legacy-restore`), UDP datagrams from two loopback
//! sources go to 127.0.0.1, and which of them arrive must equal, datagram
//! by datagram, what the linear engine (the specification) and the
//! flattened decision list decide. 60 s windows and 1/hour rates: the
//! sequence does not depend on timing.

mod common;
#[path = "common/paced.rs"]
mod paced;

use parapet_model::*;
use parapet_parse::*;

const RULES: &str = "*filter
:INPUT ACCEPT [0:0]
-A INPUT -i lo -p udp -m recent --set --name A --rsource -m udp --dport 9201:9203
-A INPUT -i lo -p udp -m recent --update --seconds 60 --hitcount 3 --name A --rsource -m udp --dport 9202 -j DROP
-A INPUT -i lo -m limit --limit 1/hour --limit-burst 3 -p udp --dport 9204 -j ACCEPT
-A INPUT -i lo -p udp -m udp --dport 9204:9205 -j DROP
COMMIT
";

/// One datagram: (source host byte of 127.0.0.x, port).
const SEQ: [(u8, u16); 16] = [
    (2, 9201), // .2: 1 hit; token 1
    (2, 9205), // .2: 2 hits (any port); token 2; dropped after
    (2, 9202), // .2: 3 hits: dropped
    (3, 9202), // .3: 1 hit (--update records none: too few); token 3 spent, passes
    (3, 9204), // .3: 2 hits; no token left: dropped after
    (3, 9203), // .3: 3 hits (the --update matches: 4); passes (not 9202)
    (3, 9202), // dropped
    (2, 9203), // passes
    (2, 9204), // dropped: no token
    (3, 9201), // passes
    (2, 9202), // dropped
    (2, 9205), // dropped after
    (3, 9203), // passes
    (3, 9204), // dropped
    (2, 9201), // passes
    (3, 9202), // dropped
];

/// The old reading (every match before the stateful one) would pass
/// datagrams 2 and 3 (no hit on 9205, 9204) and accept 9204 three times.
const WANT: [bool; 16] = [
    true, false, false, true, false, true, false, true, false, true, false, false, true, false,
    true, false,
];

#[test]
fn matches_after_the_stateful_one_run_after_it_in_every_engine() {
    let rs = parse(RULES, "order.v4", Format::IptablesSave)
        .unwrap()
        .ruleset;
    let (spec, flat) = paced::engine_fates(&rs, &SEQ);
    assert_eq!(spec, WANT, "the specification");
    assert_eq!(flat, WANT, "the flattened list");
    // Written back in the kernel's order, and read back to the same model.
    let text = render::iptables_save(&rs).unwrap();
    assert!(
        text.contains("--rsource -m udp --dport 9201:9203"),
        "{text}"
    );
    let again = parse(&text, "again.v4", Format::IptablesSave)
        .unwrap()
        .ruleset;
    let rules = |rs: &Ruleset| -> Vec<(Matches, Option<Matches>)> {
        rs.rules()
            .map(|r| (r.matches.clone(), r.after_stateful.clone()))
            .collect()
    };
    assert_eq!(rules(&again), rules(&rs), "{text}");
}

#[test]
#[ignore = "needs root"]
fn matches_after_recent_and_limit_agree_with_iptables_legacy() {
    parapet_testbed::require_root();
    let kernel = paced::kernel_fates("stateful-order", RULES, &SEQ);
    assert_eq!(kernel, WANT, "the kernel, datagram by datagram");
}
