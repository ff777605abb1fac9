//! The kernel as the oracle for two stateful matches in one rule, in both
//! orders (the corpus's `cfg_AG7GN_rmsgw_rules.v4` writes `-m recent
//! --update … -m limit …`): the kernel runs a rule's matches as written,
//! so in `-m recent --update … -m limit …` the limit spends a token only
//! for the packets the table admitted, and in `-m limit … -m recent --set`
//! the table records only the packets the limit admitted. The same
//! ruleset goes into a network namespace this test creates
//! (`iptables-legacy-restore`), UDP datagrams from loopback sources go to
//! 127.0.0.1, and which arrive must equal, datagram by datagram, what the
//! linear engine and the flattened list decide. 60 s windows and 1/hour
//! rates: the sequence does not depend on timing.

mod common;
#[path = "common/paced.rs"]
mod paced;

use parapet_parse::*;

const RULES: &str = "*filter
:INPUT ACCEPT [0:0]
-A INPUT -i lo -p udp -m udp --dport 9301 -m recent --set --name P --rsource
-A INPUT -i lo -p udp -m udp --dport 9301 -m recent --update --seconds 60 --hitcount 2 --name P --rsource -m limit --limit 1/hour --limit-burst 2 -j DROP
-A INPUT -i lo -p udp -m udp --dport 9302 -m limit --limit 1/hour --limit-burst 2 -m recent --set --name Q --rsource -j DROP
-A INPUT -i lo -p udp -m udp --dport 9303 -m recent --rcheck --name Q --rsource -j DROP
COMMIT
";

/// One datagram: (source host byte of 127.0.0.x, port).
const SEQ: [(u8, u16); 15] = [
    (2, 9301), // P[.2] 1 hit: --update does not match, no token spent
    (2, 9301), // 2 hits: --update matches; token 1: dropped
    (2, 9301), // token 2: dropped
    (2, 9301), // no token left: passes
    (3, 9301), // P[.3] 1 hit: passes
    (3, 9301), // matches, no token: passes
    (2, 9302), // token 1, then Q records .2: dropped
    (4, 9303), // .4 not in Q: passes
    (3, 9302), // token 2, Q records .3: dropped
    (4, 9302), // no token: the recent match never runs, .4 not recorded
    (4, 9303), // so .4 passes here
    (3, 9303), // dropped
    (2, 9303), // dropped
    (5, 9302), // no token: passes
    (5, 9303), // passes
];

/// Either rule's order reversed would differ: datagram 3 (a token spent
/// on datagram 1) and datagram 11 (.4 recorded on datagram 10).
const WANT: [bool; 15] = [
    true, false, false, true, true, true, false, true, false, true, true, false, false, true, true,
];

#[test]
fn two_stateful_matches_run_in_their_order_in_every_engine() {
    let rs = parse(RULES, "pair.v4", Format::IptablesSave)
        .unwrap()
        .ruleset;
    let (spec, flat) = paced::engine_fates(&rs, &SEQ);
    assert_eq!(spec, WANT, "the specification");
    assert_eq!(flat, WANT, "the flattened list");
    // the order is what decides: reversed, the fates differ
    let mut reversed = rs.clone();
    for r in reversed.tables[0].chains[0].rules.iter_mut() {
        r.stateful_order.reverse();
    }
    assert_ne!(paced::engine_fates(&reversed, &SEQ).0, WANT);
    // Written back in the kernel's order, and read back to the same model.
    let text = render::iptables_save(&rs).unwrap();
    let line = |n: usize| {
        text.lines()
            .filter(|l| l.starts_with("-A "))
            .nth(n)
            .unwrap()
    };
    let at = |l: &str, m: &str| l.find(m).unwrap_or_else(|| panic!("{m} in {l}"));
    assert!(at(line(1), "-m recent") < at(line(1), "-m limit"), "{text}");
    assert!(at(line(2), "-m limit") < at(line(2), "-m recent"), "{text}");
    let again = parse(&text, "again.v4", Format::IptablesSave)
        .unwrap()
        .ruleset;
    assert_eq!(without_origins(&again), without_origins(&rs), "{text}");
}

#[test]
fn a_match_between_two_stateful_ones_is_refused_at_its_place() {
    let line = "-A INPUT -p udp -m recent --update --name P -m udp --dport 53 -m limit --limit 1/sec -j DROP";
    let text = format!("*filter\n:INPUT ACCEPT [0:0]\n{line}\nCOMMIT\n");
    let e = parse(&text, "t.v4", Format::IptablesSave).unwrap_err()[0].to_string();
    let col = line.find("limit").unwrap() + 1;
    assert!(e.starts_with(&format!("t.v4:3:{col}:")), "{e}");
    assert!(
        e.contains("-m limit after -m recent and another match is not supported"),
        "{e}"
    );
}

#[test]
#[ignore = "needs root"]
fn two_stateful_matches_agree_with_iptables_legacy() {
    parapet_testbed::require_root();
    let kernel = paced::kernel_fates("k13ct-pair", RULES, &SEQ);
    assert_eq!(kernel, WANT, "the kernel, datagram by datagram");
}
