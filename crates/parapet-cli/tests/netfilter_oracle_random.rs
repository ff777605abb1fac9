//! Held-out-style rulesets through the router oracle: random filter tables
//! (seeded, a bounded number of them) over the router bed's own addresses,
//! interfaces and ports — INPUT, FORWARD and OUTPUT rules with `-s`/`-d`
//! (also negated), `-i`/`-o`, port ranges, conntrack states and jumps into
//! user chains that RETURN — with DNAT left to the kernel, enforced by
//! iptables-legacy, nft and parapetd (from both texts) in twin routers
//! (`common/nf_twins.rs`): every probe must meet the same fate and be
//! counted by the same rule. IPv4 and IPv6. Needs root.

mod common;

use common::nf_twins::{oracle, Case, NAT4, NAT4_NFT};
use common::router::{p, Addrs, Probe, Side, V4, V6};

/// How many random rulesets per family (each costs four twin beds).
const SEEDS: u64 = 3;

/// A small deterministic generator (xorshift64*): the rulesets are the
/// same on every run, and a failure names its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.below(xs.len())]
    }
}

/// The ports probes use (7000 is DNAT'ed to H:7001 in the IPv4 bed).
const PORTS: [u16; 4] = [6000, 6001, 7000, 7001];

/// One random rule of `chain`: matches drawn over the bed, then a target.
fn rule(g: &mut Rng, a: &Addrs, chain: &str, users: &[&str]) -> String {
    let nets: Vec<String> = {
        let (n1, n2) = if a.v6 {
            ("fd71:1::/64", "fd71:2::/64")
        } else {
            ("10.71.1.0/24", "10.71.2.0/24")
        };
        let hosts = [a.l, a.rl, a.rh, a.h].map(|h| {
            let len = if a.v6 { 128 } else { 32 };
            format!("{h}/{len}")
        });
        [n1.to_string(), n2.to_string()]
            .into_iter()
            .chain(hosts)
            .collect()
    };
    let mut r = format!("-A {chain}");
    for flag in ["-s", "-d"] {
        if g.chance(35) {
            let neg = if g.chance(25) { "! " } else { "" };
            r += &format!(" {neg}{flag} {}", nets[g.below(nets.len())]);
        }
    }
    // the kernel refuses -i in OUTPUT and -o in INPUT (user chains may
    // carry both: they never match where the device is unknown)
    if chain != "OUTPUT" && g.chance(30) {
        let neg = if g.chance(20) { "! " } else { "" };
        r += &format!(" {neg}-i {}", g.pick(&["rl", "rh", "r+"]));
    }
    if chain != "INPUT" && g.chance(30) {
        let neg = if g.chance(20) { "! " } else { "" };
        r += &format!(" {neg}-o {}", g.pick(&["rl", "rh", "r+"]));
    }
    if g.chance(80) {
        r += " -p udp -m udp";
        if g.chance(70) {
            let lo = PORTS[g.below(PORTS.len())];
            if g.chance(30) {
                r += &format!(" --dport {lo}:{}", lo + 1);
            } else {
                r += &format!(" --dport {lo}");
            }
        }
        if g.chance(15) {
            r += " --sport 42000:42099";
        }
    }
    if g.chance(25) {
        r += &format!(
            " -m conntrack --ctstate {}",
            g.pick(&["NEW", "ESTABLISHED", "RELATED,ESTABLISHED", "INVALID"])
        );
    }
    let user = chain.starts_with('u');
    let target = match g.below(10) {
        0..=3 => "ACCEPT".to_string(),
        4..=6 => "DROP".to_string(),
        // RETURN only from user chains: nft counts no policy after a
        // base chain's return, so the twins could not compare it
        7 if user => "RETURN".to_string(),
        _ if !user && !users.is_empty() => users[g.below(users.len())].to_string(),
        _ => "DROP".to_string(),
    };
    format!("{r} -j {target}\n")
}

/// A random filter table: three base chains with random policies and two
/// user chains, `n` rules each at most; IPv6 tables accept ICMPv6 first
/// (its noise is left out of the comparison).
fn ruleset(seed: u64, a: &Addrs, n: usize) -> String {
    let mut g = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut t = String::from("*filter\n");
    for c in ["INPUT", "FORWARD", "OUTPUT"] {
        t += &format!(":{c} {} [0:0]\n", g.pick(&["ACCEPT", "DROP"]));
    }
    t += ":u0 - [0:0]\n:u1 - [0:0]\n";
    for c in ["INPUT", "FORWARD", "OUTPUT", "u0", "u1"] {
        if a.v6 && !c.starts_with('u') {
            t += &format!("-A {c} -p ipv6-icmp -j ACCEPT\n");
        }
        for _ in 0..1 + g.below(n) {
            t += &rule(&mut g, a, c, &["u0", "u1"]);
        }
    }
    t + "COMMIT\n"
}

/// Probes in every direction on every port, and replies to the forwarded
/// ones (ESTABLISHED when the first packet got through).
fn probes(a: &Addrs) -> Vec<Probe> {
    use Side::*;
    let mut ps = Vec::new();
    let mut sport = 42000;
    for port in PORTS {
        for (from, to, at) in [
            (L, a.rl, R),
            (H, a.rh, R),
            (L, a.h, H),
            (H, a.l, L),
            (R, a.h, H),
            (R, a.l, L),
        ] {
            let mut pr = p(from, sport, to, port, at);
            // DNAT'ed to H:7001 (IPv4: the kernel's nat PREROUTING)
            if !a.v6 && from == L && to == a.rl && port == 7000 {
                (pr.at, pr.at_port) = (H, 7001);
            }
            sport += 7;
            ps.push(pr);
            if from != R && at != R {
                ps.push(Probe {
                    reply_of: Some(ps.len() - 1),
                    ..pr
                });
            }
        }
    }
    ps
}

fn family(a: &Addrs) {
    let probes = probes(a);
    let mut seen = std::collections::BTreeSet::new();
    for seed in 1..=SEEDS {
        let filter = ruleset(seed, a, 8);
        let (nat, nat_nft) = if a.v6 { ("", "") } else { (NAT4, NAT4_NFT) };
        // ICMPv6 rules: the first of each base chain
        let noise: Vec<u32> = if a.v6 {
            let ids = common::nf_twins::rule_ids(&filter);
            ["INPUT", "FORWARD", "OUTPUT"]
                .iter()
                .map(|c| ids[&("filter".to_string(), c.to_string(), 1)])
                .collect()
        } else {
            Vec::new()
        };
        let tag = format!("nr{}{seed}", if a.v6 { 6 } else { 4 });
        let v = oracle(&Case {
            tag: &tag,
            v6: a.v6,
            nat,
            nat_nft,
            filter: &filter,
            probes: &probes,
            noise: &noise,
        });
        seen.extend(v.kernel.iter().map(|(f, _)| *f));
    }
    // the oracle itself: the rulesets deliver and drop (OUTPUT's refusal
    // is pinned by the hand-written cases in netfilter_oracle.rs)
    use common::router::Fate::*;
    assert!(
        [Delivered, Dropped].iter().all(|f| seen.contains(f)),
        "fates seen: {seen:?}"
    );
}

#[test]
#[ignore = "needs root"]
fn random_ipv4_rulesets_as_the_kernel_at_every_hook() {
    family(&V4);
}

#[test]
#[ignore = "needs root"]
fn random_ipv6_rulesets_as_the_kernel_at_every_hook() {
    family(&V6);
}
