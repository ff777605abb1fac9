//! The fleet consumer's CPU per replicated change, stage by stage, in
//! process (no broker, no journal): what a node spends between a batch
//! message's bytes and the set update when it catches up after an outage
//! (`docs/benchmarks.md` §24 found the catch-up CPU-bound there).
//!
//! The scenario: node `n0` has OWN of its own changes in flight (its
//! backlog, as after a broker outage) and consumes the other two nodes'
//! changes, REMOTE adds each, packed into batches of 4096 as the
//! publisher packs them. Per run (thread CPU time, so time spent
//! descheduled on a shared machine is not counted):
//!
//! - `decode`: `batch::parse` of every batch message;
//! - `decide`: the replica's decision for every change (the daemon takes
//!   the replica's lock once per consumer round);
//! - `element`: `parse_element` of every element text (the daemon's
//!   `apply_run`);
//! - `insert`: `Set::add_many` into a timeout set, one call per batch.
//!
//! `cargo bench -p parapet-bench-micro --bench fleet_consume`
//! (environment: `FLEET_BENCH_RUNS`, default 7; `FLEET_BENCH_REMOTE`,
//! default 200000 per origin; `FLEET_BENCH_OWN`, default 200000). Prints
//! one JSON object: per stage the median ns per change with min and max.

use parapet_fleet::batch;
use parapet_fleet::replica::Replica;
use parapet_fleet::{FleetMsg, Kind};
use parapet_sets::{parse_element, Element, KeyPart, Set, SetDesc};
use serde_json::json;
use std::hint::black_box;

fn cpu() -> f64 {
    parapet_compile::thread_cpu_seconds()
}

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn addr(i: u64) -> String {
    let i = i as u32;
    std::net::Ipv4Addr::from(0x0a00_0000 | (i & 0x00ff_ffff)).to_string()
}

fn change(origin: &str, seq: u64, elem: String) -> FleetMsg {
    FleetMsg {
        kind: Kind::Add,
        origin: origin.into(),
        seq,
        expires: 1_900_000_000_000 + seq,
        set: "parapet-ban4".into(),
        elem,
    }
}

/// Every remote change packed as the publisher packs them, origin by
/// origin interleaved message by message (the stream's order).
fn messages(remote: usize) -> Vec<Vec<u8>> {
    let per_origin: Vec<Vec<FleetMsg>> = ["n1", "n2"]
        .iter()
        .enumerate()
        .map(|(o, name)| {
            (1..=remote as u64)
                .map(|s| change(name, s, addr(s + o as u64 * 4_000_000)))
                .collect()
        })
        .collect();
    let mut packed: Vec<Vec<Vec<u8>>> = Vec::new();
    for msgs in &per_origin {
        let mut out = Vec::new();
        let mut at = 0;
        while at < msgs.len() {
            let mut b = Vec::new();
            at += batch::pack(&msgs[at..], &mut b);
            out.push(b);
        }
        packed.push(out);
    }
    let n = packed.iter().map(Vec::len).max().unwrap_or(0);
    (0..n)
        .flat_map(|i| packed.iter().filter_map(move |p| p.get(i).cloned()))
        .collect()
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let runs = env("FLEET_BENCH_RUNS", 7).max(1);
    let remote = env("FLEET_BENCH_REMOTE", 200_000);
    let own = env("FLEET_BENCH_OWN", 200_000);
    let msgs = messages(remote);
    let total = (2 * remote) as f64;
    let dims = [KeyPart::Ipv4Addr];
    let mut stages: [(&str, Vec<f64>); 4] = [
        ("decode", vec![]),
        ("decide", vec![]),
        ("element", vec![]),
        ("insert", vec![]),
    ];
    let mut applied = 0;
    for _ in 0..runs {
        let mut replica = Replica::new("n0");
        for s in 1..=own as u64 {
            replica.local(&change("n0", s, addr(s + 8_000_000)));
        }
        let mut set = Set::new(
            "parapet-ban4",
            SetDesc::new(&dims).timeouts(0).size(1 << 22),
        )
        .expect("set");
        let (mut t_decode, mut t_decide, mut t_element, mut t_insert) = (0.0, 0.0, 0.0, 0.0);
        applied = 0;
        for m in &msgs {
            let t = cpu();
            let mut changes = batch::parse(m).expect("valid batch");
            let t1 = cpu();
            replica.decide_all(&mut changes);
            let t2 = cpu();
            let els: Vec<Element> = changes
                .iter()
                .map(|c| {
                    let mut el = parse_element(&dims, &c.elem).expect("address");
                    el.expires = Some(c.expires);
                    el
                })
                .collect();
            let t3 = cpu();
            applied += set.add_many(&els, 1_000).expect("add");
            let t4 = cpu();
            black_box(&changes);
            t_decode += t1 - t;
            t_decide += t2 - t1;
            t_element += t3 - t2;
            t_insert += t4 - t3;
        }
        for (i, t) in [t_decode, t_decide, t_element, t_insert]
            .into_iter()
            .enumerate()
        {
            stages[i].1.push(t * 1e9 / total);
        }
    }
    let mut out = serde_json::Map::new();
    out.insert("changes".into(), json!(2 * remote));
    out.insert("own_in_flight".into(), json!(own));
    out.insert("messages".into(), json!(msgs.len()));
    out.insert("runs".into(), json!(runs));
    out.insert("applied_last_run".into(), json!(applied));
    let mut sum = 0.0;
    for (name, v) in &mut stages {
        let (lo, hi) = (
            v.iter().copied().fold(f64::MAX, f64::min),
            v.iter().copied().fold(0.0, f64::max),
        );
        let med = median(v);
        sum += med;
        out.insert(
            format!("{name}_ns"),
            json!({"median": (med * 10.0).round() / 10.0, "min": (lo * 10.0).round() / 10.0, "max": (hi * 10.0).round() / 10.0}),
        );
    }
    out.insert("total_median_ns".into(), json!((sum * 10.0).round() / 10.0));
    println!("{}", serde_json::Value::Object(out));
}
