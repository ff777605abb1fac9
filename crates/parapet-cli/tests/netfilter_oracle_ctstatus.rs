//! The conntrack status against the kernel: `--ctstate DNAT` (read by
//! parapet at the netfilter hooks from the packet's own conntrack entry,
//! `nf_conn.status`) in the router bed's four twins (`common/nf_twins.rs`:
//! iptables-legacy; nft with parapet's listing, where it is `ct status
//! dnat`; parapetd from the iptables-save text and from that listing), with
//! DNAT in the kernel's `nat PREROUTING`. The probes that tell the status
//! apart: one DNAT'ed to H:7001 and one sent to H:7001 directly (the same
//! packet at FORWARD but for the entry's DST_NAT bit), and the reply of the
//! DNAT'ed flow (counted by the DNAT rule, not by ESTABLISHED). Needs root.

mod common;

use common::nf_twins::{assert_kernel, oracle, Case};
use common::router::{p, Fate, Probe, Side, V4};

/// Rule 1 is the DNAT rule (the kernel's); rule 3 the ct status rule.
const FILTER: &str = "*filter
:INPUT DROP [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -p udp -m udp --dport 6000 -j ACCEPT
-A FORWARD -p udp -m conntrack --ctstate DNAT -j ACCEPT
-A FORWARD -p udp -m udp --dport 7001 -j DROP
-A FORWARD -m conntrack --ctstate ESTABLISHED -j ACCEPT
-A FORWARD -i rl -o rh -p udp -m udp --dport 7100 -j ACCEPT
COMMIT
";

#[test]
#[ignore = "needs root"]
fn ctstate_dnat_at_forward_as_the_kernel() {
    use Side::*;
    let (r, h) = (V4.rl, V4.h);
    let probes = vec![
        p(L, 41000, r, 6000, R),
        // DNAT'ed to 10.71.2.2:7001: the entry has IPS_DST_NAT
        Probe {
            at: H,
            at_port: 7001,
            ..p(L, 41001, r, 7000, H)
        },
        // the same destination without NAT: no DST_NAT, dropped by rule 4
        p(L, 41002, h, 7001, H),
        // the DNAT'ed flow's reply: its entry still has DST_NAT
        Probe {
            reply_of: Some(1),
            ..p(H, 0, h, 0, L)
        },
        p(L, 41003, h, 7100, H),
        // a reply without NAT: ESTABLISHED
        Probe {
            reply_of: Some(4),
            ..p(H, 0, h, 0, L)
        },
        // OUTPUT (the oracle wants every hook to have seen packets)
        p(R, 41004, h, 7202, H),
    ];
    let k = oracle(&Case::dnat4("nfcs", FILTER, &probes)).kernel;
    use Fate::{Delivered as D, Dropped as X};
    // the DNAT'ed flow both ways by the status rule (3), the plain flow's
    // reply by ESTABLISHED (5)
    assert_kernel(&k, &[D, D, X, D, D, D, D], &[(1, 3), (3, 3), (5, 5)]);
}
