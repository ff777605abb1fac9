//! Differential property tests: every backend against a plain reference
//! (a BTreeMap of per-dimension ranges → expiry stamp), with timeouts on a
//! controllable clock, overlapping/nested prefixes, IPv6 and concatenations.

#![allow(clippy::type_complexity)]

use parapet_sets::*;
use proptest::prelude::*;
use std::collections::BTreeMap;

const NEVER: u64 = u64::MAX;

#[derive(Clone, Debug)]
struct Cfg {
    dims: Vec<KeyPart>,
    interval: bool,
    timeouts: bool,
    default: u64,
    size: Option<usize>,
    maxelem: Option<usize>,
    policy: Policy,
    expect: BackendKind,
    force: bool,
}

fn base(d: KeyPart) -> u128 {
    match d {
        KeyPart::Ipv4Addr => 0x0a00_0040,
        KeyPart::Ipv6Addr => 0x2001_0db8_0000_0000_0000_0000_0000_0040,
        KeyPart::InetService => 1000,
        KeyPart::InetProto => 0,
        KeyPart::IfName => {
            u128::from_be_bytes(*b"eth\0\0\0\0\0\0\0\0\0\0\0\0\0") + (0x30u128 << 96)
        }
        KeyPart::EtherAddr => 0x0200_0000_0040,
        KeyPart::Mark => 0x40,
    }
}

/// Turns raw numbers into a range of one dimension.
fn range_of(cfg: &Cfg, d: KeyPart, point: u8, span: u8) -> (u128, u128) {
    let max = d.max();
    if cfg.interval && span == 255 && d != KeyPart::IfName {
        return (0, max); // whole space: nests everything
    }
    let p = base(d) + (point % 64) as u128;
    let host = if cfg.interval {
        (span % 7) as u32
    } else {
        (span % 3) as u32 / 2
    };
    match d {
        KeyPart::InetService | KeyPart::InetProto if cfg.interval => {
            (p, (p + (span % 5) as u128).min(max))
        }
        _ => {
            let m = (1u128 << host) - 1;
            (p & !m, (p & !m) | m)
        }
    }
}

#[derive(Clone, Debug)]
enum Op {
    Add(Vec<(u8, u8)>, Option<u8>),
    AddMany(Vec<(Vec<(u8, u8)>, Option<u8>)>),
    Del(Vec<(u8, u8)>),
    DelMany(Vec<Vec<(u8, u8)>>),
    Advance(u8),
    Reap(u8),
    Check(Vec<u8>),
    Flush,
}

fn op_strategy(nd: usize) -> impl Strategy<Value = Op> {
    let b = prop::collection::vec((any::<u8>(), any::<u8>()), nd);
    let to = prop::option::of(0u8..8);
    prop_oneof![
        8 => (b.clone(), to.clone()).prop_map(|(b, t)| Op::Add(b, t)),
        2 => prop::collection::vec((b.clone(), to), 0..12).prop_map(Op::AddMany),
        3 => b.clone().prop_map(Op::Del),
        1 => prop::collection::vec(b, 0..8).prop_map(Op::DelMany),
        2 => any::<u8>().prop_map(Op::Advance),
        1 => any::<u8>().prop_map(Op::Reap),
        4 => prop::collection::vec(any::<u8>(), nd).prop_map(Op::Check),
        1 => Just(Op::Flush),
    ]
}

struct Ref {
    exact: bool,
    elems: BTreeMap<Vec<(u128, u128)>, u64>,
    maxelem: usize,
}

impl Ref {
    fn live(&self, now: u64) -> usize {
        self.elems.values().filter(|&&e| e > now).count()
    }
    fn keys_of(&self, b: &[(u128, u128)]) -> Vec<Vec<(u128, u128)>> {
        if !self.exact {
            return vec![b.to_vec()];
        }
        let mut out = vec![vec![]];
        for &(l, h) in b {
            let mut n = Vec::new();
            for prefix in &out {
                for v in l..=h {
                    let mut p: Vec<(u128, u128)> = prefix.clone();
                    p.push((v, v));
                    n.push(p);
                }
            }
            out = n;
        }
        out
    }
    fn add(&mut self, b: &[(u128, u128)], exp: u64, now: u64) -> bool {
        let saved = self.elems.clone();
        for k in self.keys_of(b) {
            let live = self.elems.get(&k).is_some_and(|&e| e > now);
            if !live && self.live(now) >= self.maxelem {
                self.elems = saved;
                return false;
            }
            self.elems.insert(k, exp);
        }
        true
    }
    fn del(&mut self, b: &[(u128, u128)]) {
        for k in self.keys_of(b) {
            self.elems.remove(&k);
        }
    }
    fn member(&self, p: &[u128], now: u64) -> bool {
        self.elems
            .iter()
            .any(|(b, &e)| e > now && b.iter().zip(p).all(|(&(l, h), &v)| l <= v && v <= h))
    }
}

fn key_of(dims: &[KeyPart], p: &[u128]) -> LookupKey {
    let mut k = LookupKey::new();
    for (d, &v) in dims.iter().zip(p) {
        k = match d {
            KeyPart::Ipv4Addr => k.addr(Family::V4, v),
            KeyPart::Ipv6Addr => k.addr(Family::V6, v),
            KeyPart::InetService => k.port(v as u16),
            KeyPart::InetProto => k.proto(v as u8),
            KeyPart::IfName => k.push(KeyValue::Iface(v.to_be_bytes())),
            KeyPart::EtherAddr => k.push(KeyValue::Mac(v as u64)),
            KeyPart::Mark => k.push(KeyValue::Mark(v as u32)),
        };
    }
    k
}

fn stamp(cfg: &Cfg, t: Option<u8>, now: u64) -> u64 {
    if !cfg.timeouts {
        return NEVER;
    }
    let t = t.map(|x| x as u64 * 10).unwrap_or(cfg.default);
    if t == 0 {
        NEVER
    } else {
        now + t
    }
}

fn run(cfg: &Cfg, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut desc = SetDesc::new(&cfg.dims).policy(cfg.policy);
    desc.interval = cfg.interval;
    if cfg.timeouts {
        desc = desc.timeouts(cfg.default);
    }
    desc.size = cfg.size;
    desc.maxelem = cfg.maxelem;
    if cfg.force {
        desc.backend = Some(cfg.expect);
    }
    let mut set = Set::new("t", desc).unwrap();
    prop_assert_eq!(set.backend(), cfg.expect, "{}", set.explain());
    let exact = matches!(
        cfg.expect,
        BackendKind::Bitmap | BackendKind::HashFixed | BackendKind::HashGrowable
    );
    let mut r = Ref {
        exact,
        elems: BTreeMap::new(),
        maxelem: cfg.maxelem.unwrap_or(usize::MAX),
    };
    let mut now: u64 = 1_000;
    let nd = cfg.dims.len();
    let mk = |raw: &[(u8, u8)], t: Option<u8>| -> (Vec<(u128, u128)>, Element) {
        let b: Vec<(u128, u128)> = raw
            .iter()
            .zip(&cfg.dims)
            .map(|(&(p, s), &d)| range_of(cfg, d, p, s))
            .collect();
        let mut el = Element::new(&b);
        if cfg.timeouts {
            el.timeout = t.map(|x| x as u64 * 10);
        }
        (b, el)
    };
    for op in ops {
        match op {
            Op::Add(raw, t) => {
                let (b, el) = mk(raw, *t);
                let ok = r.add(&b, stamp(cfg, *t, now), now);
                let got = set.add(&el, now);
                prop_assert_eq!(got.is_ok(), ok, "add {:?}: {:?}", b, got);
                if let Err(e) = got {
                    prop_assert!(matches!(e, SetError::Full { .. }), "{e}");
                }
            }
            Op::AddMany(items) => {
                let saved = r.elems.clone();
                let mut ok = true;
                let mut els = Vec::new();
                for (raw, t) in items {
                    let (b, el) = mk(raw, *t);
                    if ok && !r.add(&b, stamp(cfg, *t, now), now) {
                        ok = false;
                    }
                    els.push(el);
                }
                if !ok {
                    r.elems = saved;
                }
                let got = set.add_many(&els, now);
                prop_assert_eq!(got.is_ok(), ok, "add_many: {:?}", got);
            }
            Op::Del(raw) => {
                let (b, el) = mk(raw, None);
                r.del(&b);
                set.del(&el).unwrap();
            }
            Op::DelMany(items) => {
                let mut els = Vec::new();
                for raw in items {
                    let (b, el) = mk(raw, None);
                    r.del(&b);
                    els.push(el);
                }
                set.del_many(&els).unwrap();
            }
            Op::Advance(ms) => now += *ms as u64,
            Op::Reap(n) => {
                set.reap(now, *n as usize);
            }
            Op::Check(raw) => {
                let p: Vec<u128> = raw
                    .iter()
                    .zip(&cfg.dims)
                    .map(|(&x, &d)| base(d) + (x % 70) as u128)
                    .collect();
                prop_assert_eq!(
                    set.contains(&key_of(&cfg.dims, &p), now),
                    r.member(&p, now),
                    "point {:x?} at {}",
                    p,
                    now
                );
            }
            Op::Flush => {
                set.flush();
                r.elems.clear();
            }
        }
    }
    // exhaustive check of the neighbourhood (2 dims at most here) and the extremes
    let mut pts: Vec<Vec<u128>> = vec![vec![]];
    for &d in &cfg.dims {
        let vals: Vec<u128> = (0..70u128)
            .map(|i| base(d) + i)
            .chain([0, d.max()])
            .collect();
        let step = if nd > 2 { 7 } else { 1 };
        pts = pts
            .into_iter()
            .flat_map(|p| {
                vals.iter()
                    .step_by(step)
                    .map(move |&v| [p.clone(), vec![v]].concat())
            })
            .collect();
    }
    for p in &pts {
        prop_assert_eq!(
            set.contains(&key_of(&cfg.dims, p), now),
            r.member(p, now),
            "final point {:x?}",
            p
        );
    }
    // stored elements equal the reference's live elements
    let got: Vec<(Vec<(u128, u128)>, Option<u64>)> = set
        .elements(now)
        .into_iter()
        .map(|s| (s.element.ranges().to_vec(), s.remaining))
        .collect();
    let want: Vec<(Vec<(u128, u128)>, Option<u64>)> = r
        .elems
        .iter()
        .filter(|(_, &e)| e > now)
        .map(|(b, &e)| (b.clone(), if e == NEVER { None } else { Some(e - now) }))
        .collect();
    let mut got = got;
    got.sort();
    prop_assert_eq!(got, want);
    // reaping everything changes no membership
    set.reap(now, 1 << 20);
    for p in pts.iter().step_by(3) {
        prop_assert_eq!(
            set.contains(&key_of(&cfg.dims, p), now),
            r.member(p, now),
            "after reap {:x?}",
            p
        );
    }
    prop_assert_eq!(set.len(), r.live(now));
    Ok(())
}

fn cfg(dims: &[KeyPart], interval: bool, timeouts: bool, expect: BackendKind) -> Cfg {
    Cfg {
        dims: dims.to_vec(),
        interval,
        timeouts,
        default: 0,
        size: None,
        maxelem: None,
        policy: Policy::Performance,
        expect,
        force: false,
    }
}

use KeyPart::*;

/// Cases per property: 128, or `PARAPET_PROPTEST_CASES`.
fn cases() -> u32 {
    std::env::var("PARAPET_PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(128)
}

macro_rules! prop_case {
    ($name:ident, $cfg:expr) => {
        proptest! {
            #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]
            #[test]
            fn $name(ops in prop::collection::vec(op_strategy($cfg.dims.len()), 1..60)) {
                run(&$cfg, &ops)?;
            }
        }
    };
}

prop_case!(
    hash_v4_growable,
    cfg(&[Ipv4Addr], false, true, BackendKind::HashGrowable)
);
prop_case!(
    hash_v4_fixed_maxelem,
    Cfg {
        size: Some(16),
        maxelem: Some(16),
        ..cfg(&[Ipv4Addr], false, true, BackendKind::HashFixed)
    }
);
prop_case!(
    hash_v4_memory_default_timeout,
    Cfg {
        policy: Policy::Memory,
        default: 40,
        ..cfg(&[Ipv4Addr], false, true, BackendKind::HashGrowable)
    }
);
prop_case!(
    hash_v6,
    cfg(&[Ipv6Addr], false, true, BackendKind::HashGrowable)
);
prop_case!(
    hash_v4_proto_port,
    cfg(
        &[Ipv4Addr, InetProto, InetService],
        false,
        true,
        BackendKind::HashGrowable
    )
);
prop_case!(
    hash_v6_port_wide_fixed,
    Cfg {
        maxelem: Some(30),
        ..cfg(
            &[Ipv6Addr, InetService, Ipv6Addr],
            false,
            false,
            BackendKind::HashFixed
        )
    }
);
prop_case!(
    hash_v6_port_wide,
    cfg(
        &[Ipv6Addr, InetService],
        false,
        true,
        BackendKind::HashGrowable
    )
);
prop_case!(
    bitmap_port,
    cfg(&[InetService], false, true, BackendKind::Bitmap)
);
prop_case!(
    bitmap_port_interval_maxelem,
    Cfg {
        maxelem: Some(20),
        ..cfg(&[InetService], true, true, BackendKind::Bitmap)
    }
);
prop_case!(
    interval_v4,
    cfg(&[Ipv4Addr], true, true, BackendKind::Interval)
);
prop_case!(
    interval_v4_maxelem,
    Cfg {
        maxelem: Some(10),
        default: 30,
        ..cfg(&[Ipv4Addr], true, true, BackendKind::Interval)
    }
);
prop_case!(
    interval_v6,
    cfg(&[Ipv6Addr], true, true, BackendKind::Interval)
);
prop_case!(
    interval_v4_no_timeouts,
    cfg(&[Ipv4Addr], true, false, BackendKind::Interval)
);
prop_case!(
    tss_v4_port,
    cfg(
        &[Ipv4Addr, InetService],
        true,
        true,
        BackendKind::TupleSpace
    )
);
prop_case!(
    tss_v6_port,
    Cfg {
        maxelem: Some(12),
        ..cfg(
            &[Ipv6Addr, InetService],
            true,
            true,
            BackendKind::TupleSpace
        )
    }
);
prop_case!(
    tss_v4_iface,
    cfg(&[Ipv4Addr, IfName], true, false, BackendKind::TupleSpace)
);
prop_case!(
    tss_one_dim_forced,
    Cfg {
        force: true,
        ..cfg(&[Ipv4Addr], true, true, BackendKind::TupleSpace)
    }
);
prop_case!(
    tss_v6_forced_maxelem,
    Cfg {
        force: true,
        maxelem: Some(8),
        default: 50,
        ..cfg(&[Ipv6Addr], true, true, BackendKind::TupleSpace)
    }
);
prop_case!(
    bitmap_memory_small_is_hash,
    Cfg {
        policy: Policy::Memory,
        size: Some(10),
        ..cfg(&[InetService], false, true, BackendKind::HashGrowable)
    }
);
