//! # parapet-gen
//!
//! Rulesets and packets made to break classifiers, for differential tests
//! (every engine against [`parapet_model::LinearEngine`]) and benchmarks.
//!
//! - [`random_ruleset`]: chains, jumps, gotos, RETURNs, LOGs, negations,
//!   nested prefixes, overlapping port ranges, both families.
//! - [`packets_for`]: packets aimed at the rules' edges (range ends ±1,
//!   prefix boundaries) plus uniform noise.
//! - [`worst_case`]: nf-HiPAC's experiment — every packet walks the whole
//!   chain in a linear filter, failing only on the last field checked.
//! - [`cross_product`]: half the rules pin only the source, half only the
//!   destination, so decision trees that cut naively multiply regions.
//! - [`tcp_options`]: TCP option areas (malformed ones included) and
//!   rules testing option kinds, `!` included.

use parapet_model::*;
use rand::rngs::SmallRng;

pub mod tcp_options;
use rand::{Rng, SeedableRng};

/// `rs` with a small limit (1–20/s, burst 1–4, iptables' or nft's
/// arithmetic, nft's sometimes `over`) on about a third of the rules that
/// may carry one (jumps and gotos included), a third of them with one of
/// their constraints after the limit: for the stateful engines' timed
/// differential tests.
pub fn with_random_limits(mut rs: Ruleset, seed: u64) -> Ruleset {
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x51_7c_c1_b7_27_22_0a_95);
    for r in rs
        .tables
        .iter_mut()
        .flat_map(|t| t.chains.iter_mut())
        .flat_map(|c| c.rules.iter_mut())
    {
        // Jumps and gotos too: a limit on one is checked once, before the
        // block the flattened list inlines for it.
        if rng.gen_range(0..3) != 0 {
            continue;
        }
        let flavor = if rng.gen_bool(0.5) {
            LimitFlavor::Xt
        } else {
            LimitFlavor::Nft
        };
        r.limit = Some(Limit {
            rate: rng.gen_range(1..=20),
            per: TimeUnit::Second,
            burst: rng.gen_range(1..=4),
            flavor,
            over: flavor == LimitFlavor::Nft && rng.gen_range(0..4) == 0,
            object: None,
        });
        // Sometimes one of the rule's constraints comes after the limit
        // (`-m limit -m udp --dport 53`): the token is spent on packets
        // that constraint then refuses.
        let fields: Vec<Field> = r
            .matches
            .iter()
            .map(|(f, _)| *f)
            .filter(|f| *f != Field::Family)
            .collect();
        if !fields.is_empty() && rng.gen_range(0..3) == 0 {
            let later = fields[rng.gen_range(0..fields.len())];
            r.after_stateful = Some(r.matches.clone());
            r.matches = r.matches.without(later);
        }
    }
    rs
}

/// Knobs of [`random_ruleset`].
#[derive(Clone, Debug)]
pub struct RandomSpec {
    /// Rules in the base chain.
    pub rules: usize,
    /// User chains (each gets a few rules and may be jumped to).
    pub user_chains: usize,
    /// Include IPv6 rules (an `inet`-style ruleset) as well as IPv4.
    pub ipv6: bool,
    /// Number of set references to use (`Field::Set`).
    pub set_refs: usize,
    /// Allow LOG / counter-only / RETURN / jump / goto actions.
    pub control_flow: bool,
}

impl Default for RandomSpec {
    fn default() -> Self {
        RandomSpec {
            rules: 50,
            user_chains: 3,
            ipv6: true,
            set_refs: 0,
            control_flow: true,
        }
    }
}

/// A small pool of values per field, so random rules overlap and nest
/// instead of being disjoint (disjoint rules make every classifier look
/// right).
struct Pools {
    v4_prefixes: Vec<(u128, u32)>,
    v6_prefixes: Vec<(u128, u32)>,
    port_points: Vec<u16>,
}

impl Pools {
    fn new(rng: &mut SmallRng) -> Self {
        let mut v4 = Vec::new();
        for _ in 0..6 {
            let base: u32 = rng.gen();
            // Nested prefixes of one base address.
            for len in [0u32, 8, 16, 24, 28, 32] {
                if rng.gen_bool(0.5) {
                    v4.push((base as u128, len));
                }
            }
        }
        v4.push((0, 0));
        let mut v6 = Vec::new();
        for _ in 0..4 {
            let base: u128 = (0x2001_0db8u128 << 96) | rng.gen::<u64>() as u128;
            for len in [32u32, 48, 64, 96, 120, 128] {
                if rng.gen_bool(0.5) {
                    v6.push((base, len));
                }
            }
        }
        v6.push((0, 0));
        let port_points = vec![
            0,
            1,
            22,
            53,
            80,
            443,
            1023,
            1024,
            8080,
            65534,
            65535,
            rng.gen(),
            rng.gen(),
        ];
        Pools {
            v4_prefixes: v4,
            v6_prefixes: v6,
            port_points,
        }
    }
}

fn pick<T: Copy>(rng: &mut SmallRng, v: &[T]) -> T {
    v[rng.gen_range(0..v.len())]
}

fn random_addr(rng: &mut SmallRng, pools: &Pools, family: Family) -> IntervalSet {
    let (pool, width) = match family {
        Family::V4 => (&pools.v4_prefixes, 32),
        Family::V6 => (&pools.v6_prefixes, 128),
    };
    let (v, len) = pick(rng, pool);
    let set = if rng.gen_bool(0.15) {
        // An iprange-style interval that is not a prefix.
        let lo = v & !width_mask(width - len.min(width));
        let span = if width - len >= 64 {
            rng.gen::<u64>() as u128
        } else {
            rng.gen_range(0..=width_mask(width - len))
        };
        IntervalSet::range(lo, lo.saturating_add(span).min(width_mask(width)))
    } else {
        IntervalSet::prefix(v, len, width)
    };
    maybe_negate(rng, set, width_mask(width))
}

/// Negates one time in ten — unless the complement is empty (`! -s
/// 0.0.0.0/0` matches nothing, and iptables cannot write such a rule).
fn maybe_negate(rng: &mut SmallRng, set: IntervalSet, max: u128) -> IntervalSet {
    let negated = set.complement(max);
    if !negated.is_empty() && rng.gen_bool(0.1) {
        negated
    } else {
        set
    }
}

fn random_ports(rng: &mut SmallRng, pools: &Pools) -> IntervalSet {
    let set = match rng.gen_range(0..4) {
        0 => IntervalSet::point(pick(rng, &pools.port_points) as u128),
        1 => {
            let a = pick(rng, &pools.port_points) as u128;
            let b = pick(rng, &pools.port_points) as u128;
            IntervalSet::range(a.min(b), a.max(b))
        }
        2 => IntervalSet::from_ranges((0..rng.gen_range(2..5)).map(|_| {
            let p = pick(rng, &pools.port_points) as u128;
            (p, p)
        })),
        _ => IntervalSet::range(1024, 65535),
    };
    maybe_negate(rng, set, 0xffff)
}

fn random_matches(rng: &mut SmallRng, pools: &Pools, spec: &RandomSpec) -> Matches {
    let mut m = Matches::any();
    let family = if spec.ipv6 && rng.gen_bool(0.3) {
        Family::V6
    } else {
        Family::V4
    };
    if !spec.ipv6 || rng.gen_bool(0.9) {
        m.constrain(Field::Family, IntervalSet::point(family.value()));
        // A whole-family range (0.0.0.0/0) is no constraint at all; iptables
        // never prints one, so neither do we.
        let full = width_mask(family.addr_bits());
        for field in [Field::SrcAddr, Field::DstAddr] {
            if rng.gen_bool(0.7) {
                let set = random_addr(rng, pools, family);
                if !set.is_full(full) {
                    m.constrain(field, set);
                }
            }
        }
    }
    let proto = match rng.gen_range(0..10) {
        0..=4 => Some(6u8),
        5..=7 => Some(17),
        8 => Some(if family == Family::V6 { 58 } else { 1 }),
        _ => None,
    };
    if let Some(p) = proto {
        let set = IntervalSet::point(p as u128);
        let negated = rng.gen_bool(0.05);
        m.constrain(
            Field::Proto,
            if negated { set.complement(0xff) } else { set },
        );
        // Ports, ICMP types and flags need a positive protocol (iptables
        // refuses `! -p tcp --dport 22`).
        if negated {
            return m;
        }
        if p == 6 || p == 17 {
            if rng.gen_bool(0.3) {
                m.constrain(Field::SrcPort, random_ports(rng, pools));
            }
            if rng.gen_bool(0.7) {
                m.constrain(Field::DstPort, random_ports(rng, pools));
            }
        }
        if (p == 1 || p == 58) && rng.gen_bool(0.5) {
            let t = pick(rng, &[0u128, 3, 8, 11, 128, 135]);
            m.constrain(
                Field::IcmpTypeCode,
                if rng.gen_bool(0.5) {
                    IntervalSet::range(t << 8, (t << 8) | 0xff)
                } else {
                    IntervalSet::point((t << 8) | rng.gen_range(0..3))
                },
            );
        }
        if p == 6 && rng.gen_bool(0.1) {
            // --syn: SYN set, ACK/RST/FIN clear.
            let values = (0u128..=255).filter(|v| v & 0x17 == 0x02).map(|v| (v, v));
            m.constrain(Field::TcpFlags, IntervalSet::from_ranges(values));
        }
    }
    if rng.gen_bool(0.1) {
        let (lo, hi) = match rng.gen_range(0..3) {
            0 => IfName::wildcard_range("eth"),
            1 => {
                let n = IfName::new("eth0").unwrap().0;
                (n, n)
            }
            _ => {
                let n = IfName::new("lo").unwrap().0;
                (n, n)
            }
        };
        let set = IntervalSet::range(lo, hi);
        m.constrain(
            Field::InIface,
            if rng.gen_bool(0.2) {
                set.complement(u128::MAX)
            } else {
                set
            },
        );
    }
    if rng.gen_bool(0.15) {
        let mut states: Vec<(u128, u128)> = CtState::ALL
            .iter()
            .filter(|_| rng.gen_bool(0.4))
            .map(|s| (*s as u128, *s as u128))
            .collect();
        if states.is_empty() {
            states.push((CtState::New as u128, CtState::New as u128));
        }
        m.constrain(Field::CtState, IntervalSet::from_ranges(states));
    }
    if rng.gen_bool(0.03) {
        m.constrain(Field::Fragment, IntervalSet::point(1));
    }
    if spec.set_refs > 0 && rng.gen_bool(0.2) {
        let n = rng.gen_range(0..spec.set_refs) as u16;
        m.constrain(Field::Set(n), IntervalSet::point(rng.gen_bool(0.8) as u128));
    }
    m
}

/// A generator drawn from `rng` without advancing it, so the packet fields
/// added later (ttl, dscp, length) leave every earlier seed's packets as
/// they were.
fn side_rng(rng: &SmallRng) -> SmallRng {
    SmallRng::seed_from_u64(rng.clone().gen::<u64>() ^ 0x7f4a_7c15_9e37_79b9)
}

/// [`random_ruleset`] with TTL, DSCP and length constraints added to some
/// rules (each writable by iptables and nft). Apart from `random_ruleset`
/// so the rulesets other tests pin by seed stay as they were.
pub fn random_ruleset_with_header_fields(seed: u64, spec: &RandomSpec) -> Ruleset {
    let mut rs = random_ruleset(seed, spec);
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x6a09_e667_f3bc_c908);
    for t in &mut rs.tables {
        for c in &mut t.chains {
            for r in &mut c.rules {
                random_header_matches(&mut rng, &mut r.matches);
            }
        }
    }
    rs
}

/// Sometimes a TTL, DSCP or length constraint, each one writable by
/// iptables (`-m ttl`/`-m hl` one value, one range or all but one value;
/// `-m dscp` one value or its negation; `-m length` one range within
/// 0..65535).
fn random_header_matches(rng: &mut SmallRng, m: &mut Matches) {
    if m.is_unsatisfiable() {
        return;
    }
    // nft writes a TTL or DSCP match as `ip …` or `ip6 …`: only rules of
    // one family get them.
    let one_family = m.get(Field::Family).is_some();
    if one_family && rng.gen_bool(0.15) {
        let t = rng.gen_range(0u128..=255);
        let set = match rng.gen_range(0..4) {
            0 => IntervalSet::point(t),
            1 => IntervalSet::point(t).complement(0xff),
            2 => IntervalSet::range(t.min(200), (t.min(200) + rng.gen_range(1..50)).min(255)),
            _ => IntervalSet::range(0, t.max(1)),
        };
        m.constrain(Field::Ttl, set);
    }
    if one_family && rng.gen_bool(0.1) {
        let d = pick(rng, &[0u128, 8, 10, 34, 46, 63]);
        let set = IntervalSet::point(d);
        m.constrain(
            Field::Dscp,
            if rng.gen_bool(0.3) {
                set.complement(0x3f)
            } else {
                set
            },
        );
    }
    if rng.gen_bool(0.1) {
        let lo = pick(rng, &[0u128, 40, 64, 100, 576, 1280, 1500]);
        let hi = (lo + pick(rng, &[0u128, 1, 60, 500, 65535])).min(0xffff);
        m.constrain(Field::Length, IntervalSet::range(lo, hi));
    }
}

fn random_action(
    rng: &mut SmallRng,
    spec: &RandomSpec,
    chains: &[String],
    in_base: bool,
) -> Action {
    let roll = rng.gen_range(0..100);
    if !spec.control_flow || roll < 55 {
        return Action::Verdict(match rng.gen_range(0..3) {
            0 => Verdict::Accept,
            1 => Verdict::Drop,
            _ => Verdict::Reject { with: None },
        });
    }
    match roll {
        55..=64 => Action::Log(LogSpec {
            prefix: Some("gen ".into()),
            level: None,
            ..Default::default()
        }),
        65..=69 => Action::Count,
        70..=77 => Action::Return,
        _ if chains.is_empty() || !in_base && roll < 85 => Action::Count,
        78..=91 => Action::Jump(chains[rng.gen_range(0..chains.len())].clone()),
        _ => Action::Goto(chains[rng.gen_range(0..chains.len())].clone()),
    }
}

/// A random ruleset: table `filter`, base chain `INPUT`, user chains
/// `chainN` that only jump forward (chain i jumps to chains > i), so it has
/// no loops. Rule ids are 1..n in table order.
pub fn random_ruleset(seed: u64, spec: &RandomSpec) -> Ruleset {
    let mut rng = SmallRng::seed_from_u64(seed);
    let pools = Pools::new(&mut rng);
    let names: Vec<String> = (0..spec.user_chains).map(|i| format!("chain{i}")).collect();
    let policy = if rng.gen_bool(0.5) {
        Verdict::Accept
    } else {
        Verdict::Drop
    };
    let mut chains = vec![Chain {
        name: "INPUT".into(),
        base: Some(BaseChain {
            hook: Hook::Input,
            priority: 0,
            policy,
            counters: Counters::default(),
        }),
        rules: (0..spec.rules)
            .map(|_| {
                Rule::new(
                    0,
                    random_matches(&mut rng, &pools, spec),
                    random_action(&mut rng, spec, &names, true),
                )
            })
            .collect(),
    }];
    for (i, name) in names.iter().enumerate() {
        let later = &names[i + 1..];
        let n = rng.gen_range(1..6);
        chains.push(Chain {
            name: name.clone(),
            base: None,
            rules: (0..n)
                .map(|_| {
                    Rule::new(
                        0,
                        random_matches(&mut rng, &pools, spec),
                        random_action(&mut rng, spec, later, false),
                    )
                })
                .collect(),
        });
    }
    let mut rs = Ruleset {
        tables: vec![Table {
            name: "filter".into(),
            family: if spec.ipv6 {
                TableFamily::Inet
            } else {
                TableFamily::Ip
            },
            chains,
        }],
        set_refs: (0..spec.set_refs)
            .map(|i| SetRef {
                name: format!("set{i}"),
                key: SetKeySpec::Flags(vec![Dir::Src]),
            })
            .collect(),
        left_to_kernel: Vec::new(),
    };
    rs.renumber();
    rs
}

/// Packets aimed at the ruleset's edges: for each constrained interval, its
/// ends and the values just outside, combined with values from other rules,
/// plus uniform noise. `count` packets, deterministic in `seed`.
pub fn packets_for(rs: &Ruleset, seed: u64, count: usize) -> Vec<Packet> {
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x9e37_79b9_7f4a_7c15);
    let mut interesting: std::collections::HashMap<Field, Vec<u128>> = Default::default();
    for rule in rs.rules() {
        for (field, set) in rule.matches.iter() {
            let vals = interesting.entry(*field).or_default();
            for &(lo, hi) in set.ranges().iter().take(4) {
                vals.extend([
                    lo,
                    hi,
                    lo.wrapping_sub(1) & field.max_value(),
                    hi.wrapping_add(1) & field.max_value(),
                ]);
            }
        }
    }
    // An edge value of the field from some rule, or uniform noise.
    let any = |rng: &mut SmallRng, f: Field| -> u128 {
        match interesting.get(&f) {
            Some(v) if !v.is_empty() && rng.gen_bool(0.85) => v[rng.gen_range(0..v.len())],
            _ => rng.gen::<u128>() & f.max_value(),
        }
    };
    (0..count)
        .map(|_| {
            let family = match any(&mut rng, Field::Family) {
                6 => Family::V6,
                _ => Family::V4,
            };
            let addr_max = width_mask(family.addr_bits());
            let proto = pick(&mut rng, &[6u8, 6, 17, 17, 1, 58, 0, 47]);
            let mut p = Packet::new(
                family,
                any(&mut rng, Field::SrcAddr) & addr_max,
                any(&mut rng, Field::DstAddr) & addr_max,
                if rng.gen_bool(0.8) {
                    proto
                } else {
                    any(&mut rng, Field::Proto) as u8
                },
                any(&mut rng, Field::SrcPort) as u16,
                any(&mut rng, Field::DstPort) as u16,
            );
            let icmp = any(&mut rng, Field::IcmpTypeCode);
            p.icmp_type = (icmp >> 8) as u8;
            p.icmp_code = icmp as u8;
            p.tcp_flags = any(&mut rng, Field::TcpFlags) as u8;
            p.iif = IfName(match rng.gen_range(0..4) {
                0 => 0,
                1 => IfName::new("eth0").unwrap().0,
                2 => IfName::new("eth12").unwrap().0,
                _ => any(&mut rng, Field::InIface),
            });
            p.ct_state = CtState::ALL[rng.gen_range(0..5)];
            p.fragment = rng.gen_bool(0.05);
            let mut side = side_rng(&rng);
            p.ttl = any(&mut side, Field::Ttl) as u8;
            p.dscp = any(&mut side, Field::Dscp) as u8;
            // At least the longest headers (IPv6, a fragment header, TCP),
            // so the packet's frame has this length; at most what a BPF
            // test run takes in one page.
            p.len = any(&mut side, Field::Length).clamp(68, 1500) as u32;
            p
        })
        .collect()
}

/// Random membership bits for `n` set references, deterministic per packet
/// index, for rulesets that reference sets without real sets behind them.
pub fn set_bits(seed: u64, index: usize, n: usize) -> Vec<bool> {
    let mut rng =
        SmallRng::seed_from_u64(seed ^ (index as u64).wrapping_mul(0x2545_f491_4f6c_dd1d));
    (0..n).map(|_| rng.gen_bool(0.5)).collect()
}

/// The packet every rule of [`worst_case`] nearly matches.
pub fn worst_case_packet() -> Packet {
    // 10.0.0.1:1024 -> 10.0.0.2:80, UDP: fails only on the destination port.
    Packet::v4(0x0a00_0001, 0x0a00_0002, 17, 1024, 80)
}

/// nf-HiPAC's worst case for a linear filter: `n` rules that each match the
/// probe packet's source, destination, protocol and source port but not its
/// destination port, so a linear scan checks every field of every rule;
/// then a final ACCEPT on the probe's port. Policy DROP. Each rule has a
/// distinct port (1 + i, never the probe's port 80 … shifted past it), so a
/// decision tree cannot merge them all.
pub fn worst_case(n: usize) -> Ruleset {
    let probe = worst_case_packet();
    let mut rules = Vec::with_capacity(n + 1);
    for i in 0..n {
        let mut m = base_matches(&probe);
        // Ports 10000.. so none equals the probe's.
        m.constrain(
            Field::DstPort,
            IntervalSet::point(10_000 + (i as u128 % 55_000)),
        );
        rules.push(Rule::new(0, m, Action::Verdict(Verdict::Drop)));
    }
    let mut last = base_matches(&probe);
    last.constrain(Field::DstPort, IntervalSet::point(probe.dport as u128));
    rules.push(Rule::new(0, last, Action::Verdict(Verdict::Accept)));
    one_chain(rules, Verdict::Drop)
}

fn base_matches(probe: &Packet) -> Matches {
    let mut m = Matches::any();
    m.constrain(Field::Family, IntervalSet::point(4));
    m.constrain(Field::SrcAddr, IntervalSet::point(probe.src));
    m.constrain(Field::DstAddr, IntervalSet::point(probe.dst));
    m.constrain(Field::Proto, IntervalSet::point(probe.proto as u128));
    m.constrain(Field::SrcPort, IntervalSet::point(probe.sport as u128));
    m
}

/// Adversarial for decision trees: half the rules pin a source /24 only, the
/// other half a destination /24 only, so every source region crosses every
/// destination region.
pub fn cross_product(n: usize, seed: u64) -> Ruleset {
    let mut rng = SmallRng::seed_from_u64(seed);
    let rules = (0..n)
        .map(|i| {
            let mut m = Matches::any();
            m.constrain(Field::Family, IntervalSet::point(4));
            let field = if i % 2 == 0 {
                Field::SrcAddr
            } else {
                Field::DstAddr
            };
            m.constrain(
                field,
                IntervalSet::prefix((rng.gen::<u32>() as u128) << 8 >> 8 << 8, 24, 32),
            );
            if rng.gen_bool(0.5) {
                m.constrain(Field::Proto, IntervalSet::point(6));
            }
            Rule::new(
                0,
                m,
                Action::Verdict(if i % 3 == 0 {
                    Verdict::Accept
                } else {
                    Verdict::Drop
                }),
            )
        })
        .collect();
    one_chain(rules, Verdict::Accept)
}

/// A ruleset of one base chain `filter/INPUT` with these rules, renumbered.
pub fn one_chain(rules: Vec<Rule>, policy: Verdict) -> Ruleset {
    let mut rs = Ruleset {
        tables: vec![Table {
            name: "filter".into(),
            family: TableFamily::Ip,
            chains: vec![Chain {
                name: "INPUT".into(),
                base: Some(BaseChain {
                    hook: Hook::Input,
                    priority: 0,
                    policy,
                    counters: Counters::default(),
                }),
                rules,
            }],
        }],
        set_refs: vec![],
        left_to_kernel: Vec::new(),
    };
    rs.renumber();
    rs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worst_case_probe_walks_the_whole_chain() {
        let rs = worst_case(100);
        let e = LinearEngine::new(&rs, rs.select_chain(None).unwrap()).unwrap();
        let d = e.classify(&worst_case_packet(), &NoSets).unwrap();
        assert_eq!(d.rule_id, 101);
        assert_eq!(d.verdict, Verdict::Accept);
    }

    #[test]
    fn random_rulesets_are_deterministic_and_varied() {
        let spec = RandomSpec::default();
        assert_eq!(random_ruleset(7, &spec), random_ruleset(7, &spec));
        assert_ne!(random_ruleset(7, &spec), random_ruleset(8, &spec));
    }
}
