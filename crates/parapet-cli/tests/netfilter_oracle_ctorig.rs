//! The conntrack entry's protocol and original destination port against
//! the kernel: `--ctproto` and `--ctorigdstport` (read by parapet at the
//! netfilter hooks from the packet's own conntrack entry,
//! `tuplehash[ORIGINAL].tuple.dst`) in the router bed's four twins
//! (`common/nf_twins.rs`: iptables-legacy; nft with parapet's listing,
//! where they are `ct protocol` and `ct original proto-dst`; parapetd from
//! the iptables-save text and from that listing), with DNAT in the
//! kernel's `nat PREROUTING`. The probes that tell the original tuple from
//! the packet's header: a reply (its destination port is the client's, its
//! entry's original one the server's) and a DNAT'ed flow (sent to 7000,
//! forwarded to 7001: the original tuple keeps 7000). Needs root.

mod common;

use common::nf_twins::{assert_kernel, oracle, Case};
use common::router::{p, Fate, Probe, Side, V4};

/// Rule 1 is the DNAT rule (the kernel's); rules 3 to 6 read the entry.
/// nft types `ct original proto-dst` by a protocol written before it, so
/// every rule reading the port also fixes `--ctproto` (listed `ct
/// protocol 17`).
const FILTER: &str = "*filter
:INPUT DROP [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -p udp -m udp --dport 6000 -j ACCEPT
-A FORWARD -m conntrack --ctproto udp --ctorigdstport 7001 -j ACCEPT
-A FORWARD -p udp -m conntrack --ctstate NEW --ctproto udp ! --ctorigdstport 7100:7199 -j DROP
-A FORWARD -m conntrack ! --ctproto tcp --ctstate ESTABLISHED -j ACCEPT
-A FORWARD -m conntrack --ctproto udp --ctorigdstport 7150 -j ACCEPT
COMMIT
";

#[test]
#[ignore = "needs root"]
fn ct_original_tuple_at_forward_as_the_kernel() {
    use Side::*;
    let (r, h) = (V4.rl, V4.h);
    let probes = vec![
        p(L, 41000, r, 6000, R),
        // NEW to 7001: the original tuple's port is the packet's (rule 3)
        p(L, 41001, h, 7001, H),
        // its reply: destination port 41001, original port 7001 (rule 3)
        Probe {
            reply_of: Some(1),
            ..p(H, 0, h, 0, L)
        },
        // DNAT'ed from 7000 to 7001: the original tuple keeps 7000, so
        // rule 3 does not match and rule 4 drops it (outside 7100:7199)
        Probe {
            at: H,
            at_port: 7001,
            ..p(L, 41002, r, 7000, H)
        },
        // NEW to 7150: inside 7100:7199, not ESTABLISHED: rule 6
        p(L, 41003, h, 7150, H),
        // its reply: ESTABLISHED, udp is not tcp (rule 5)
        Probe {
            reply_of: Some(4),
            ..p(H, 0, h, 0, L)
        },
        // NEW to 7300: outside 7100:7199 (rule 4)
        p(L, 41004, h, 7300, H),
        // OUTPUT (the oracle wants every hook to have seen packets)
        p(R, 41005, h, 7202, H),
    ];
    let k = oracle(&Case::dnat4("nfco", FILTER, &probes)).kernel;
    use Fate::{Delivered as D, Dropped as X};
    assert_kernel(
        &k,
        &[D, D, D, X, D, D, X, D],
        &[(1, 3), (2, 3), (3, 4), (4, 6), (5, 5), (6, 4)],
    );
}
