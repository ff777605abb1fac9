//! REJECT at OUTPUT in the tc placement against the kernel: the same
//! OUTPUT chain in `iptables-legacy` (router bed R) and in parapetd
//! `--hook-placement tc` (a twin bed); R's own TCP connect and UDP sends
//! that OUTPUT rejects get ECONNREFUSED in both (the reset or ICMP error
//! delivered to the local socket), and the same rule counts each. IPv4
//! and IPv6. The documented differences (docs/hooks.md, *Without
//! netfilter BPF links*) are asserted as such: the kernel's UDP `send`
//! also fails with EPERM (its OUTPUT verdict is a drop; the probe counts
//! as Refused there), the tc placement's succeeds and the ICMP error
//! comes back (Rejected); the answer passes OUTPUT and INPUT in the
//! kernel, only INPUT at tc (policy counters, id 0, not compared).
//! Needs root.

mod common;

use common::nf_twins::{legacy_counters, load, parapet_counters, rule_ids};
use common::router::{applied, p, run_probes, tcp, topo, Fate, Outcome, Probe, Side, V4, V6};

fn filter(v6: bool) -> String {
    let icmp = if v6 {
        "icmp6-port-unreachable"
    } else {
        "icmp-port-unreachable"
    };
    format!(
        "*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A OUTPUT -p tcp -m tcp --dport 7600 -j REJECT --reject-with tcp-reset
-A OUTPUT -p udp -m udp --dport 7601 -j REJECT --reject-with {icmp}
-A OUTPUT -p udp -m udp --dport 7602 -j REJECT
-A OUTPUT -p udp -m udp --dport 7603 -j ACCEPT
COMMIT
"
    )
}

fn probes(v6: bool) -> Vec<Probe> {
    let a = if v6 { V6 } else { V4 };
    vec![
        tcp(Side::R, a.h, 7600, Side::H),
        p(Side::R, 40601, a.h, 7601, Side::H),
        p(Side::R, 40602, a.h, 7602, Side::H),
        p(Side::R, 40603, a.h, 7603, Side::H),
        // the other interface
        p(Side::R, 40604, a.l, 7601, Side::L),
        tcp(Side::R, a.l, 7600, Side::L),
    ]
}

fn compare(v6: bool) {
    let text = filter(v6);
    let ids = rule_ids(&text);
    let probes = probes(v6);
    let restore = if v6 {
        "ip6tables-legacy-restore"
    } else {
        "iptables-legacy-restore"
    };
    let tag = if v6 { "rjo6" } else { "rjo4" };

    let k = topo(&format!("{tag}k"));
    load(&k.r, &[restore], &text);
    let kernel = run_probes(&k, v6, &probes, &|| legacy_counters(&k.r, v6, &ids));
    drop(k);
    let fates: Vec<Fate> = kernel.iter().map(|(f, _)| *f).collect();
    use Fate::*;
    assert_eq!(
        fates,
        [Rejected, Refused, Refused, Delivered, Refused, Rejected],
        "the kernel: {kernel:?}"
    );
    // the rules' counters; the policies count the answers differently
    let rules = |o: &Outcome| -> Outcome {
        o.iter()
            .map(|(f, m)| {
                let mut m = m.clone();
                m.remove(&0);
                (*f, m)
            })
            .collect()
    };
    // UDP: EPERM and the ICMP error in the kernel, the ICMP error at tc
    let expect: Outcome = rules(&kernel)
        .into_iter()
        .map(|(f, m)| (if f == Refused { Rejected } else { f }, m))
        .collect();

    let t = topo(&format!("{tag}p"));
    let fmt = if v6 {
        "ip6tables-save"
    } else {
        "iptables-save"
    };
    let d = applied(&t.r, &text, Some(fmt), &["--hook-placement", "tc"]);
    let o = d.attach(&[]);
    assert!(o.status.success(), "{o:?}");
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(!said.contains("REJECT at OUTPUT"), "no warning: {said}");
    let ours = run_probes(&t, v6, &probes, &|| parapet_counters(&d.sock, &|id| id));
    assert_eq!(
        rules(&ours),
        expect,
        "tc placement {ours:?} vs iptables-legacy {kernel:?} (v6: {v6})"
    );
}

#[test]
#[ignore = "needs root"]
fn reject_at_output_answers_the_local_sender_as_the_kernel_ipv4() {
    common::require_root();
    compare(false);
}

#[test]
#[ignore = "needs root"]
fn reject_at_output_answers_the_local_sender_as_the_kernel_ipv6() {
    common::require_root();
    compare(true);
}
