//! The kernel is the oracle for the netfilter hooks: four twin router
//! topologies (host L, a router R with forwarding on, host H) with the same
//! ruleset in R — in `iptables-legacy` (`ip6tables-legacy`), in `nft`, and
//! applied to a real `parapetd` (from the iptables-save text and from its
//! nft translation) attached without an interface (INPUT, FORWARD and
//! OUTPUT at their netfilter hooks). DNAT in `nat PREROUTING` is left to
//! the kernel in each. The same crafted UDP packets — to R (INPUT), through
//! R (FORWARD, also DNAT'ed and conntrack replies), from R (OUTPUT) — must
//! have the same fate (delivered or dropped) and be counted by the same
//! rules (rule ids: file positions, 0 = the policy) in all twins (see
//! `common/nf_twins.rs`). IPv4 and IPv6. Then parapetd is killed with
//! SIGKILL and restarted: it re-attaches at the hooks from its journal and
//! the packets meet the same fates again; `parapet detach` without an
//! interface removes the links. Needs root.

mod common;

use common::daemon::{detach_all, stats};
use common::nf_twins::{assert_kernel, oracle, parapet_counters, same_fates, Case, Verdicts};
use common::router::{p, run_probes, start_daemon, tcp, Fate, Outcome, Probe, Side, V6};
use common::router_case4::{self, FILTER4, INPUT_7000, INPUT_DROP};
use std::collections::BTreeMap;

/// After the oracle: `kill -9` and a restart of the parapet twin's daemon
/// (the journal brings the attachment back, links and all, and the same
/// packets meet the same fate — the counting rules may differ now: the
/// first round's flows are in conntrack), then a detach without an
/// interface (the links go: probe `open`, dropped by INPUT, gets through).
fn restart_and_detach(c: &Case, v: Verdicts, open: usize) -> Outcome {
    let Verdicts { kernel, parapet } = v;
    let mut pt = parapet;
    let (v6, probes) = (c.v6, c.probes);
    let strip = |mut m: BTreeMap<u32, u64>| {
        m.retain(|id, _| !c.noise.contains(id));
        m
    };
    drop(pt.daemon.take());
    let _d = start_daemon(&pt.topo.r, pt.dir.path(), &pt.sock);
    let sock = pt.sock.clone();
    let s = stats(&sock);
    let att = &s["dataplane"]["attachments"][0];
    assert_eq!(att["hook"], "netfilter", "re-attached after a restart: {s}");
    assert_eq!(att["links"].as_array().map(Vec::len), Some(3), "{s}");
    let again = run_probes(&pt.topo, v6, probes, &|| {
        strip(parapet_counters(&sock, &|id| id))
    });
    assert!(
        same_fates(&again, &kernel),
        "{}: after a restart: {again:?}",
        c.tag
    );

    detach_all(&sock);
    let now = run_probes(&pt.topo, v6, &probes[open..open + 1], &|| {
        strip(parapet_counters(&sock, &|id| id))
    });
    assert_eq!(kernel[open].0, Fate::Dropped);
    assert_eq!(
        now[0],
        (Fate::Delivered, BTreeMap::new()),
        "after the detach"
    );
    kernel
}

#[test]
#[ignore = "needs root"]
fn ipv4_input_forward_output_as_the_kernel_with_dnat() {
    let probes = router_case4::probes();
    let c = Case::dnat4("nfo4", FILTER4, &probes);
    let k = restart_and_detach(&c, oracle(&c), INPUT_DROP);
    // the oracle itself: the bed works and the ruleset decides
    assert_kernel(&k, &router_case4::kernel_fates(), &[]);
    assert!(
        k.iter().all(|(_, c)| !c.contains_key(&INPUT_7000)),
        "INPUT never sees the pre-DNAT port"
    );
}

const FILTER6: &str = "*filter
:INPUT DROP [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -p ipv6-icmp -j ACCEPT
-A INPUT -p udp -m udp --dport 6000 -j ACCEPT
-A INPUT -s fd71:1::/64 -p udp -m udp --dport 6001 -j DROP
-A FORWARD -p ipv6-icmp -j ACCEPT
-A FORWARD -m conntrack --ctstate ESTABLISHED -j ACCEPT
-A FORWARD -i rl -o rh -p udp -m udp --dport 7100 -j ACCEPT
-A FORWARD -o rh -p udp -m udp --dport 7111 -j DROP
-A FORWARD -p tcp -m tcp --dport 7500 -j REJECT --reject-with tcp-reset
-A FORWARD -p udp -m udp --dport 7501 -j REJECT --reject-with icmp6-port-unreachable
-A OUTPUT -p ipv6-icmp -j ACCEPT
-A OUTPUT -o rh -p udp -m udp --dport 7200 -j DROP
COMMIT
";

#[test]
#[ignore = "needs root"]
fn ipv6_input_forward_output_as_the_kernel() {
    use Side::*;
    let (r, h) = (V6.rl, V6.h);
    let probes = vec![
        p(L, 41000, r, 6000, R),
        p(L, 41001, r, 6001, R),
        p(L, 41002, r, 6002, R),
        p(L, 41003, h, 7100, H),
        Probe {
            reply_of: Some(3),
            ..p(H, 0, h, 0, L)
        },
        p(L, 41005, h, 7111, H),
        p(L, 41006, h, 7112, H),
        p(R, 41007, h, 7200, H),
        p(R, 41008, h, 7201, H),
        p(H, 41009, V6.l, 7400, L),
        tcp(L, h, 7500, H),
        p(L, 41011, h, 7501, H),
    ];
    let c = Case {
        tag: "nfo6",
        v6: true,
        nat: "",
        nat_nft: "",
        filter: FILTER6,
        probes: &probes,
        noise: &[1, 4, 10],
    };
    let k = restart_and_detach(&c, oracle(&c), 1);
    use Fate::{Delivered as D, Dropped as X, Refused as E, Rejected as J};
    assert_kernel(&k, &[D, X, X, D, D, X, X, E, D, X, J, J], &[]);
}
