//! `-m statistic` at the netfilter hooks against the kernel: nth at INPUT,
//! `!` nth at FORWARD with its `--dport` written after it (so its counter
//! moves for every forwarded UDP probe, as the kernel runs a rule's
//! matches in order), random with probability 1 at OUTPUT, in the router
//! bed's iptables-legacy twin and in parapetd attached at the netfilter
//! hooks from the same iptables-save text (`common/nf_twins.rs`). Each
//! probe's fate and the rules that counted it must be the same, probe by
//! probe. Needs root.

mod common;

use common::nf_twins::{assert_kernel, disagreements, legacy_twin, parapet_counters, parapet_twin};
use common::router::{p, run_probes, Fate, Side, V4};

/// Rule ids are the file positions: 1 nth (INPUT), 2 `!` nth (FORWARD),
/// 3 random (OUTPUT).
const FILTER: &str = "*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -p udp -m udp --dport 6000 -m statistic --mode nth --every 3 --packet 1 -j DROP
-A FORWARD -p udp -m statistic --mode nth ! --every 2 --packet 0 -m udp --dport 7001 -j DROP
-A OUTPUT -p udp -m udp --dport 7003 -m statistic --mode random --probability 1 -j DROP
COMMIT
";

#[test]
#[ignore = "needs root"]
fn statistic_at_each_hook_as_iptables_legacy() {
    common::require_root();
    use Side::*;
    let (r, h) = (V4.rl, V4.h);
    let probes = [
        // INPUT: packets 0..3 of the rule; packet 1 dropped
        p(L, 43000, r, 6000, R),
        p(L, 43001, r, 6000, R),
        p(L, 43002, r, 6000, R),
        p(L, 43003, r, 6000, R),
        // FORWARD: every forwarded UDP probe moves the counter; odd ones
        // match `!`, and only 7001 is then dropped
        p(L, 43004, h, 7001, H),
        p(L, 43005, h, 7002, H),
        p(L, 43006, h, 7001, H),
        p(L, 43007, h, 7001, H),
        p(L, 43008, h, 7002, H),
        // OUTPUT: probability 1 drops every 7003 at the sender
        p(R, 43009, h, 7003, H),
        p(R, 43010, h, 7003, H),
        p(R, 43011, h, 7004, H),
    ];
    let kernel = legacy_twin("nfstat", false, FILTER, &probes, &[]);
    use Fate::{Delivered as D, Dropped as X, Refused as E};
    assert_kernel(
        &kernel,
        &[D, X, D, D, D, D, D, X, D, E, E, D],
        &[(1, 1), (7, 2), (9, 3), (10, 3)],
    );
    let pp = parapet_twin("nfstap", false, FILTER, "iptables-save");
    let ours = run_probes(&pp.topo, false, &probes, &|| {
        parapet_counters(&pp.sock, &|id| id)
    });
    let wrong = disagreements("parapet", &probes, &kernel, &ours, &|_, k| k.clone());
    assert!(wrong.is_empty(), "the twins differ:\n{}", wrong.join("\n"));
}
