//! `-m mac --mac-source` (nft `ether saddr`) against the kernel at the
//! netfilter hooks, in the router bed (`common/router.rs`) whose veths
//! have fixed MACs (`parapet_testbed::router::MAC_*`): iptables-legacy and
//! nft (parapet's listing, where it is `ether saddr`) in R decide each
//! probe, and parapet's linear engine must decide the same packet (with
//! the MAC the probe arrives with, none at OUTPUT) by the same rule. The
//! probes tell a match from its negation at INPUT and FORWARD, from both of
//! R's neighbours. parapetd at the netfilter hooks (its BPF walker reads
//! the MAC the netfilter program copies as xt_mac does) must agree with
//! the kernel too (`nf_twins::oracle`). Needs root.

mod common;

use common::nf_twins::{nft_of, oracle, Case};
use common::router::{p, Fate, Probe, Side, V4};
use parapet_model::{from_ip, Family, IfName, LinearEngine, NoSets, Packet, Verdict};
use parapet_parse::{parse, Format};
use parapet_testbed::require_root;
use parapet_testbed::router::{MAC_H, MAC_L};

/// Rules 1 and 2 at INPUT, 3 and 4 at FORWARD; OUTPUT has none (xt_mac
/// is refused there).
fn filter() -> String {
    format!(
        "*filter
:INPUT DROP [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -p udp -m udp --dport 6000 -m mac --mac-source {MAC_L} -j ACCEPT
-A INPUT -p udp -m udp --dport 6001 -m mac ! --mac-source {MAC_L} -j ACCEPT
-A FORWARD -m mac --mac-source {MAC_H} -j ACCEPT
-A FORWARD -p udp -m udp --dport 7001 -m mac ! --mac-source {MAC_H} -j ACCEPT
COMMIT
"
    )
}

/// The probes, and per probe the chain, input interface and MAC with
/// which R's netfilter sees it.
fn probes() -> Vec<(Probe, &'static str, &'static str, Option<&'static str>)> {
    use Side::*;
    vec![
        // from L to R: L's MAC (rule 1)
        (p(L, 41000, V4.rl, 6000, R), "INPUT", "rl", Some(MAC_L)),
        // from L, negated L: no match, the policy drops
        (p(L, 41001, V4.rl, 6001, R), "INPUT", "rl", Some(MAC_L)),
        // from H, negated L: H's MAC is another (rule 2)
        (p(H, 41002, V4.rh, 6001, R), "INPUT", "rh", Some(MAC_H)),
        // forwarded from H (rule 3)
        (p(H, 41003, V4.l, 7000, L), "FORWARD", "rh", Some(MAC_H)),
        // forwarded from L to 7001: not H's MAC (rule 4)
        (p(L, 41004, V4.h, 7001, H), "FORWARD", "rl", Some(MAC_L)),
        // forwarded from L to 7002: nothing matches (policy)
        (p(L, 41005, V4.h, 7002, H), "FORWARD", "rl", Some(MAC_L)),
        // sent by R: no MAC, OUTPUT's policy
        (p(R, 41006, V4.h, 7202, H), "OUTPUT", "", None),
    ]
}

/// The linear engine's (rule id, 0 for a policy; accepted) per probe.
fn linear(text: &str) -> Vec<(u32, bool)> {
    let rs = parse(text, "mac.ipt", Format::IptablesSave)
        .unwrap()
        .ruleset;
    let ids: Vec<u32> = rs.rules().map(|r| r.id).collect();
    probes()
        .iter()
        .map(|(pr, chain, iif, mac)| {
            let addr = |s: &str| from_ip(s.parse().unwrap()).1;
            let src = match pr.from {
                Side::L => V4.l,
                Side::H => V4.h,
                Side::R => V4.rh,
            };
            let mut pkt = Packet::new(Family::V4, addr(src), addr(pr.to), 17, pr.sport, pr.port);
            if !iif.is_empty() {
                pkt.iif = IfName::new(iif).unwrap();
            }
            pkt.mac_src = mac.map(|m| parapet_model::mac::parse(m).unwrap());
            let e = LinearEngine::new(&rs, rs.select_chain(Some(chain)).unwrap()).unwrap();
            let d = e.classify(&pkt, &NoSets).unwrap();
            let id = if ids.contains(&d.rule_id) {
                d.rule_id
            } else {
                0
            };
            (id, d.verdict == Verdict::Accept)
        })
        .collect()
}

#[test]
#[ignore = "needs root"]
fn mac_source_at_input_and_forward_as_the_kernel() {
    require_root();
    let text = filter();
    let nft = nft_of(&text, false);
    assert!(nft.contains(&format!("ether saddr != {MAC_L}")), "{nft}");
    let probes: Vec<Probe> = probes().iter().map(|x| x.0).collect();
    // iptables-legacy decides; nft and parapetd (netfilter placement, from
    // the iptables-save text and from nft's) must agree probe by probe,
    // by fate and by the rule that counted it
    let v = oracle(&Case {
        tag: "nfmac",
        v6: false,
        nat: "",
        nat_nft: "",
        filter: &text,
        probes: &probes,
        noise: &[],
    });
    let kernel = &v.kernel;

    use Fate::{Delivered as D, Dropped as X};
    let fates: Vec<Fate> = kernel.iter().map(|(d, _)| *d).collect();
    assert_eq!(
        fates,
        vec![D, X, D, D, D, X, D],
        "the kernel's fates: {kernel:?}"
    );
    let ours = linear(&text);
    let mut wrong = Vec::new();
    for (i, ((kf, kc), (id, accept))) in kernel.iter().zip(&ours).enumerate() {
        if (*kf == D) != *accept || !kc.contains_key(id) {
            wrong.push(format!(
                "probe {i}: kernel {kf:?} {kc:?}, parapet rule {id} accept {accept}"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}\nnft:\n{nft}", wrong.join("\n"));
}
