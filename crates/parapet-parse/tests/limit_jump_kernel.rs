//! The kernel as the oracle for a limit on a jump or a goto (`-m limit …
//! -j CHAIN`, as ufw writes them): the same ruleset goes into a network
//! namespace this test creates (`iptables-legacy-restore`), UDP datagrams
//! from two loopback sources go to 127.0.0.1, and which of them arrive
//! must equal, datagram by datagram, what the linear engine (the
//! specification) and the flattened decision list decide for the same
//! sequence. The kernel spends a token whenever the jump's other matches
//! hold, whatever the chain then decides; a packet the chain decides
//! nothing for goes on with the rule after the jump (or, for a goto, with
//! the caller's caller: here the policy). Rates of 1/hour: no token comes
//! back within the test, so the sequence does not depend on timing.

mod common;
#[path = "common/paced.rs"]
mod paced;

use parapet_parse::*;

const RULES: &str = "*filter
:INPUT ACCEPT [0:0]
:LIMITED - [0:0]
:GATE - [0:0]
-A INPUT -i lo -p udp -m udp --dport 9101:9103 -m limit --limit 1/hour --limit-burst 4 -j LIMITED
-A INPUT -i lo -p udp -m udp --dport 9102 -j ACCEPT
-A INPUT -i lo -p udp -m udp --dport 9101:9103 -j DROP
-A INPUT -i lo -p udp -m udp --dport 9104 -m limit --limit 1/hour --limit-burst 2 -g GATE
-A INPUT -i lo -p udp -m udp --dport 9104 -j DROP
-A LIMITED -s 127.0.0.2/32 -j ACCEPT
-A LIMITED -p udp -m udp --dport 9102 -j DROP
-A GATE -s 127.0.0.2/32 -j ACCEPT
COMMIT
";

/// One datagram: (source host byte of 127.0.0.x, port).
const SEQ: [(u8, u16); 16] = [
    (3, 9101), // token 1; LIMITED decides nothing: back, dropped after
    (2, 9102), // token 2; LIMITED accepts .2
    (3, 9102), // token 3; LIMITED drops
    (3, 9104), // GATE token 1; GATE decides nothing: the goto ends INPUT, policy accepts
    (2, 9101), // token 4; accepted
    (2, 9101), // no token: the jump does not match, dropped after
    (3, 9102), // no token: not into LIMITED, accepted after
    (2, 9104), // GATE token 2; accepted
    (3, 9103), // no token: dropped after
    (2, 9104), // no GATE token: dropped after
    (3, 9104), // no GATE token: dropped after
    (2, 9102), // no token: accepted after
    (3, 9101), // dropped
    (2, 9103), // dropped
    (3, 9102), // accepted
    (2, 9101), // dropped
];

const WANT: [bool; 16] = [
    false, true, false, true, true, false, true, true, false, false, false, true, false, false,
    true, false,
];

#[test]
fn the_flattened_list_spends_the_jumps_token_once_as_the_specification() {
    let rs = parse(RULES, "limit-jump.v4", Format::IptablesSave)
        .unwrap()
        .ruleset;
    let (spec, flat) = paced::engine_fates(&rs, &SEQ);
    assert_eq!(spec, WANT, "the specification");
    assert_eq!(flat, WANT, "the flattened list");
}

#[test]
#[ignore = "needs root"]
fn a_limit_on_a_jump_and_a_goto_agrees_with_iptables_legacy() {
    parapet_testbed::require_root();
    let kernel = paced::kernel_fates("limit-jump", RULES, &SEQ);
    assert_eq!(kernel, WANT, "the kernel, datagram by datagram");
}
