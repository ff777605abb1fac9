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

use common::daemon::{ok, stats};
use common::nf_twins::{oracle, parapet_counters, same_fates, Case, Verdicts, NAT4, NAT4_NFT};
use common::router::{p, run_probes, start_daemon, tcp, Fate, Outcome, Probe, Side, V4, V6};
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

    ok(&sock, &["detach"]);
    let s = stats(&sock);
    assert_eq!(
        s["dataplane"]["attachments"].as_array().map(Vec::len),
        Some(0),
        "{s}"
    );
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

/// Rule 1 is the DNAT rule (the kernel's).
const FILTER4: &str = "*filter
:INPUT DROP [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
:fwd_udp - [0:0]
-A INPUT -p udp -m udp --dport 6000 -j ACCEPT
-A INPUT -s 10.71.1.0/24 -p udp -m udp --dport 6001 -j DROP
-A INPUT -i rl -p udp -m udp --dport 6002 -j ACCEPT
-A INPUT -p udp -m udp --dport 7000 -j ACCEPT
-A FORWARD -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A FORWARD -d 10.71.2.2/32 -p udp -m udp --dport 7001 -j ACCEPT
-A FORWARD -i rl -o rh -p udp -m udp --dport 7100:7110 -j ACCEPT
-A FORWARD -o rh -p udp -m udp --dport 7111 -j DROP
-A FORWARD -p tcp -m tcp --dport 7500 -j REJECT --reject-with tcp-reset
-A FORWARD -p udp -m udp --dport 7501 -j REJECT --reject-with icmp-port-unreachable
-A FORWARD -p tcp -m tcp --dport 7502 -j DROP
-A FORWARD -p udp -j fwd_udp
-A OUTPUT -o rh -p udp -m udp --dport 7200 -j DROP
-A OUTPUT -p udp -m udp --dport 7201 -j DROP
-A fwd_udp -p udp -m udp --dport 7300 -j ACCEPT
-A fwd_udp -p udp -m udp --dport 7301 -j RETURN
COMMIT
";

#[test]
#[ignore = "needs root"]
fn ipv4_input_forward_output_as_the_kernel_with_dnat() {
    use Side::*;
    let (r, h) = (V4.rl, V4.h);
    let mut probes = vec![
        p(L, 40000, r, 6000, R),
        p(L, 40001, r, 6001, R),
        p(L, 40002, r, 6002, R),
        p(L, 40003, r, 6003, R),
        // DNAT'ed: judged by FORWARD as 10.71.2.2:7001, never by INPUT
        Probe {
            at: H,
            at_port: 7001,
            ..p(L, 40004, r, 7000, H)
        },
        p(L, 40005, h, 7100, H),
        p(L, 40007, h, 7111, H),
        p(L, 40008, h, 7300, H),
        p(L, 40009, h, 7301, H),
        p(L, 40010, h, 7302, H),
        p(R, 40011, h, 7200, H),
        p(R, 40012, h, 7201, H),
        p(R, 40013, h, 7202, H),
        p(H, 40014, V4.l, 7400, L),
        // REJECT at FORWARD: the sender in L gets the reset / ICMP error
        tcp(L, h, 7500, H),
        p(L, 40016, h, 7501, H),
        tcp(L, h, 7502, H),
    ];
    // the reply to the 7100 flow: ESTABLISHED at FORWARD
    probes.insert(
        6,
        Probe {
            reply_of: Some(5),
            ..p(H, 0, h, 0, L)
        },
    );
    let c = Case {
        tag: "nfo4",
        v6: false,
        nat: NAT4,
        nat_nft: NAT4_NFT,
        filter: FILTER4,
        probes: &probes,
        noise: &[],
    };
    let k = restart_and_detach(&c, oracle(&c), 1);
    // the oracle itself: the bed works and the ruleset decides
    use Fate::{Delivered as D, Dropped as X, Refused as E, Rejected as J};
    let fates: Vec<Fate> = k.iter().map(|(d, _)| *d).collect();
    assert_eq!(
        fates,
        vec![D, X, D, X, D, D, D, X, D, X, X, E, E, D, X, J, J, X],
        "the kernel twin's fates: {k:?}"
    );
    assert!(
        k.iter().all(|(_, c)| !c.contains_key(&5)),
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
    let fates: Vec<Fate> = k.iter().map(|(d, _)| *d).collect();
    assert_eq!(
        fates,
        vec![D, X, X, D, D, X, X, E, D, X, J, J],
        "the kernel twin's fates: {k:?}"
    );
}
