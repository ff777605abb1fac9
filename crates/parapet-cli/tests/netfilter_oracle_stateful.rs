//! LOG and the stateful matches at each netfilter hook against the
//! kernel (issue 14, "counters, LOG, sets, conntrack state, REJECT and
//! stateful matches at every hook"): `-j LOG` (non-terminal, its rule
//! counted) and `-m limit` at INPUT, `-m hashlimit` and `-m recent` at
//! FORWARD, `-m limit` at OUTPUT, in the router bed's iptables-legacy
//! twin and in parapetd attached at the netfilter hooks from the same
//! iptables-save text (`common/nf_twins.rs`). Each probe's fate and the
//! rules that counted it must be the same, probe by probe: the bursts run
//! out at the same packet, the recent list admits the second packet only.
//! Needs root.

mod common;

use common::nf_twins::{assert_kernel, disagreements, legacy_twin, parapet_counters, parapet_twin};
use common::router::{p, run_probes, Fate, Side, V4};

/// Rule ids are the file positions: 1 LOG, 2 limit (INPUT); 3 hashlimit,
/// 4 and 5 recent (FORWARD); 6 limit, 7 drop (OUTPUT). Rates of one an
/// hour: only the bursts decide within the test.
const FILTER: &str = "*filter
:INPUT DROP [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -p udp -m udp --dport 6000 -j LOG --log-prefix \"parapet-k14 \"
-A INPUT -p udp -m udp --dport 6000 -m limit --limit 1/hour --limit-burst 2 -j ACCEPT
-A FORWARD -p udp -m udp --dport 7001 -m hashlimit --hashlimit-upto 1/hour --hashlimit-burst 2 --hashlimit-mode srcip --hashlimit-name k14 -j ACCEPT
-A FORWARD -p udp -m udp --dport 7002 -m recent --rcheck --seconds 3600 --name k14 -j ACCEPT
-A FORWARD -p udp -m udp --dport 7002 -m recent --set --name k14 -j DROP
-A OUTPUT -p udp -m udp --dport 7003 -m limit --limit 1/hour --limit-burst 1 -j ACCEPT
-A OUTPUT -p udp -m udp --dport 7003 -j DROP
COMMIT
";

#[test]
#[ignore = "needs root"]
fn log_and_stateful_matches_at_each_hook_as_iptables_legacy() {
    common::require_root();
    use Side::*;
    let (r, h) = (V4.rl, V4.h);
    let probes = [
        // INPUT: logged every time, the burst of 2 accepts, then the policy
        p(L, 42000, r, 6000, R),
        p(L, 42001, r, 6000, R),
        p(L, 42002, r, 6000, R),
        // FORWARD: one source, a burst of 2
        p(L, 42003, h, 7001, H),
        p(L, 42004, h, 7001, H),
        p(L, 42005, h, 7001, H),
        // FORWARD: the first is listed and dropped, the second admitted
        p(L, 42006, h, 7002, H),
        p(L, 42007, h, 7002, H),
        // OUTPUT: a burst of 1, then dropped at the sender
        p(R, 42008, h, 7003, H),
        p(R, 42009, h, 7003, H),
    ];
    let kernel = legacy_twin("nfstk", false, FILTER, &probes, &[]);
    use Fate::{Delivered as D, Dropped as X, Refused as E};
    assert_kernel(
        &kernel,
        &[D, D, X, D, D, X, X, D, D, E],
        &[
            (0, 1),
            (0, 2),
            (2, 1),
            (2, 0),
            (3, 3),
            (5, 0),
            (6, 5),
            (7, 4),
            (8, 6),
            (9, 7),
        ],
    );
    let pp = parapet_twin("nfstp", false, FILTER, "iptables-save");
    let ours = run_probes(&pp.topo, false, &probes, &|| {
        parapet_counters(&pp.sock, &|id| id)
    });
    let wrong = disagreements("parapet", &probes, &kernel, &ours, &|_, k| k.clone());
    assert!(wrong.is_empty(), "the twins differ:\n{}", wrong.join("\n"));
}
