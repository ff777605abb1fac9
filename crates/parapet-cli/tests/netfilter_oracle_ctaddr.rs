//! The conntrack entry's addresses against the kernel: `--ctorigsrc`,
//! `--ctorigdst`, `--ctreplsrc`, `--ctrepldst` (nft `ct original|reply ip
//! saddr|daddr`), with `!` and prefixes, in the router bed
//! (`common/router.rs`) with the kernel's DNAT of R:7000 to H:7001
//! (`NAT4`), so that a flow's original destination (R) is not the one its
//! packets carry at FORWARD (H), and a reply's header is the reply tuple.
//! Two kernel twins enforce the ruleset: iptables-legacy, and nft with
//! parapet's listing of it; each probe's fate and the rule that counted it
//! must be, probe by probe, what parapet's linear engine decides for the
//! packet as it sits in R's chain with its entry's tuples. (parapetd
//! refuses these rules: the packet key has no word for the entry's
//! addresses; `compile` says so.) IPv4; needs root.

mod common;

use common::nf_twins::{
    assert_kernel, disagreements, filter_rule_ids, legacy_twin, nft_of, nft_twin, Case,
};
use common::router::{p, Fate, Outcome, Probe, Side, V4};
use parapet_model::*;
use std::collections::BTreeMap;

/// Rule 1 is the DNAT rule (the kernel's). Rules 3 and 5 to 9 read the
/// entry's addresses; none of them could be written with `-s`/`-d`.
const FILTER: &str = "*filter
:INPUT DROP [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -p udp -m udp --dport 6000 -j ACCEPT
-A INPUT -p udp -m conntrack --ctreplsrc 10.71.1.1 -m udp --dport 6001 -j ACCEPT
-A FORWARD -m conntrack --ctstate NEW --ctorigdst 10.71.1.1 -j ACCEPT
-A FORWARD -m conntrack --ctstate ESTABLISHED --ctreplsrc 10.71.2.2 ! --ctorigdst 10.71.2.0/24 -j ACCEPT
-A FORWARD -p udp -m conntrack --ctstate NEW --ctorigsrc 10.71.1.0/24 --ctrepldst 10.71.1.2 -m udp --dport 7002 -j ACCEPT
-A FORWARD -m conntrack --ctstate ESTABLISHED --ctorigdst 10.71.2.2 --ctrepldst 10.71.1.2 -j ACCEPT
-A FORWARD -m conntrack --ctstate NEW ! --ctorigdst 10.71.1.1 -j DROP
-A OUTPUT -p udp -m conntrack --ctorigsrc 10.71.2.1 -m udp --dport 7005 -j DROP
COMMIT
";

/// The probes, and each as R's chain sees it: (chain, packet). `entry`
/// gives the conntrack entry's (original source, original destination,
/// reply source, reply destination) where they are not the packet's own
/// tuple.
fn probes() -> (Vec<Probe>, Vec<(&'static str, Packet)>) {
    use Side::*;
    let (l, rl, rh, h) = (V4.l, V4.rl, V4.rh, V4.h);
    let a = |s: &str| from_ip(s.parse().unwrap()).1;
    let pkt = |sport: u16, src: &str, dst: &str, dport: u16, iif: &str, oif: &str, ct: CtState| {
        let mut p = Packet::v4(a(src) as u32, a(dst) as u32, 17, sport, dport);
        p.iif = IfName::new(iif).unwrap();
        p.oif = IfName::new(oif).unwrap();
        p.ct_state = ct;
        p
    };
    let entry = |mut p: Packet, t: [&str; 4]| {
        for (f, addr) in CT_ADDR_FIELDS.into_iter().zip(t) {
            p.set_ct_addr(f, a(addr));
        }
        p
    };
    use CtState::{Established as E, New as N};
    let dnat = [l, rl, h, l];
    let direct = [l, h, h, l];
    let list = vec![
        // INPUT, no NAT: the entry is the packet's tuple (rules 2, 3, policy)
        (
            p(L, 41000, rl, 6000, R),
            ("INPUT", pkt(41000, l, rl, 6000, "rl", "", N)),
        ),
        (
            p(L, 41001, rl, 6001, R),
            ("INPUT", pkt(41001, l, rl, 6001, "rl", "", N)),
        ),
        (
            p(L, 41002, rl, 6002, R),
            ("INPUT", pkt(41002, l, rl, 6002, "rl", "", N)),
        ),
        // DNAT'ed R:7000 -> H:7001: at FORWARD the header says H, the
        // original destination R (rule 4)
        (
            Probe {
                at: H,
                at_port: 7001,
                ..p(L, 41003, rl, 7000, H)
            },
            (
                "FORWARD",
                entry(pkt(41003, l, h, 7001, "rl", "rh", N), dnat),
            ),
        ),
        // its reply, before the kernel writes R back as its source: the
        // reply tuple H -> L, the original destination outside 10.71.2/24
        // (rule 5)
        (
            Probe {
                reply_of: Some(3),
                ..p(H, 0, h, 0, L)
            },
            (
                "FORWARD",
                entry(pkt(7001, h, l, 41003, "rh", "rl", E), dnat),
            ),
        ),
        // L -> H without NAT (rule 6), its reply (rule 7)
        (
            p(L, 41005, h, 7002, H),
            (
                "FORWARD",
                entry(pkt(41005, l, h, 7002, "rl", "rh", N), direct),
            ),
        ),
        (
            Probe {
                reply_of: Some(5),
                ..p(H, 0, h, 0, L)
            },
            (
                "FORWARD",
                entry(pkt(7002, h, l, 41005, "rh", "rl", E), direct),
            ),
        ),
        // NEW, not to R originally: dropped (rule 8)
        (
            p(L, 41007, h, 7003, H),
            (
                "FORWARD",
                entry(pkt(41007, l, h, 7003, "rl", "rh", N), direct),
            ),
        ),
        // R's own packets: the OUTPUT policy, and rule 9
        (
            p(R, 41008, h, 7004, H),
            ("OUTPUT", pkt(41008, rh, h, 7004, "", "rh", N)),
        ),
        (
            p(R, 41009, h, 7005, H),
            ("OUTPUT", pkt(41009, rh, h, 7005, "", "rh", N)),
        ),
    ];
    list.into_iter().unzip()
}

/// The linear engine's outcome: the rules counting each packet (the
/// deciding one, 0 for the policy, and the non-terminal ones).
fn linear(text: &str, packets: &[(&str, Packet)]) -> Vec<BTreeMap<u32, u64>> {
    let rs = parapet_parse::parse(text, "ctaddr.rules", parapet_parse::Format::IptablesSave)
        .unwrap()
        .ruleset;
    packets
        .iter()
        .map(|(chain, pkt)| {
            let id = rs.select_chain(Some(&format!("filter/{chain}"))).unwrap();
            let d = LinearEngine::new(&rs, id)
                .unwrap()
                .classify(pkt, &NoSets)
                .unwrap();
            std::iter::once(d.rule_id)
                .chain(d.nonterminal)
                .map(|r| (r, 1))
                .collect()
        })
        .collect()
}

#[test]
#[ignore = "needs root"]
fn ct_addresses_as_the_kernel_with_dnat() {
    let (probes, packets) = probes();
    let case = Case::dnat4("k13ca", FILTER, &probes);
    let text = format!("{}{}", case.nat, case.filter);
    let kernel: Outcome = legacy_twin("k13cak", false, &text, &probes, &[]);
    use Fate::{Delivered as D, Dropped as X, Refused as F};
    assert_kernel(
        &kernel,
        &[D, D, X, D, D, D, D, X, D, F],
        &[
            (0, 2),
            (1, 3),
            (2, 0),
            (3, 4),
            (4, 5),
            (5, 6),
            (6, 7),
            (7, 8),
            (8, 0),
            (9, 9),
        ],
    );
    let nft = nft_of(FILTER, false);
    assert!(
        nft.contains("ct original ip daddr != 10.71.2.0/24"),
        "{nft}"
    );
    let by_nft = nft_twin("k13can", &case, &nft, &filter_rule_ids(&text));
    let want = linear(&text, &packets);
    let mut wrong = disagreements("nft", &probes, &kernel, &by_nft, &|_, k| k.clone());
    for (i, ((_, counted), linear)) in kernel.iter().zip(&want).enumerate() {
        if counted != linear {
            wrong.push(format!(
                "probe {i} {:?}: iptables-legacy counted {counted:?}, the linear engine {linear:?} for {}",
                probes[i], packets[i].1
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "the twins differ:\n{}\nnft:\n{nft}",
        wrong.join("\n")
    );
}
