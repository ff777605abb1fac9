//! `cargo bench -p parapet-bench-micro --bench sets` — insert / delete / lookup rates and memory
//! per element for every backend at several sizes, plus end-to-end ipset-save
//! loading. Own timing loop; each figure is the median (min–max) of RUNS runs.
//!
//! Environment: `SETS_BENCH_RUNS` (default 5), `SETS_BENCH_MAX` (largest size,
//! default 10000000; hash backends only above 1 M), `SETS_BENCH_QUICK=1`
//! (sizes up to 100 k), `SETS_BENCH_ONLY=backends,bulk,ipset` (sections).

use parapet_sets::*;
use std::hint::black_box;
use std::time::Instant;

/// Thread CPU time: the machine is shared, so rates use CPU time of the
/// benchmarking thread (time spent descheduled is not counted).
#[derive(Clone, Copy)]
struct Timer(f64);
impl Timer {
    fn now() -> Timer {
        Timer(parapet_compile::thread_cpu_seconds())
    }
    fn elapsed(&self) -> f64 {
        Timer::now().0 - self.0
    }
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

#[derive(Clone, Copy)]
enum Shape {
    V4Exact,
    V4ExactTimeout,
    V6Exact,
    V4PortExact,
    Port,
    V4Net,
    V6Net,
    V4NetPort,
}

struct Case {
    name: &'static str,
    shape: Shape,
    desc: SetDesc,
}

fn cases() -> Vec<Case> {
    use KeyPart::*;
    vec![
        Case {
            name: "hash (growable) ipv4_addr",
            shape: Shape::V4Exact,
            desc: SetDesc::new(&[Ipv4Addr]),
        },
        Case {
            name: "hash (fixed, size=n) ipv4_addr",
            shape: Shape::V4Exact,
            desc: SetDesc::new(&[Ipv4Addr]), /* size set per n */
        },
        Case {
            name: "hash (growable, memory) ipv4_addr",
            shape: Shape::V4Exact,
            desc: SetDesc::new(&[Ipv4Addr]).policy(Policy::Memory),
        },
        Case {
            name: "hash ipv4_addr, timeout 1h",
            shape: Shape::V4ExactTimeout,
            desc: SetDesc::new(&[Ipv4Addr]).timeouts(3_600_000),
        },
        Case {
            name: "hash ipv6_addr",
            shape: Shape::V6Exact,
            desc: SetDesc::new(&[Ipv6Addr]),
        },
        Case {
            name: "hash ipv4_addr . inet_proto . inet_service",
            shape: Shape::V4PortExact,
            desc: SetDesc::new(&[Ipv4Addr, InetProto, InetService]),
        },
        Case {
            name: "bitmap inet_service",
            shape: Shape::Port,
            desc: SetDesc::new(&[InetService]),
        },
        Case {
            name: "interval ipv4_addr (/16–/32 prefixes)",
            shape: Shape::V4Net,
            desc: SetDesc::new(&[Ipv4Addr]).interval(),
        },
        Case {
            name: "interval ipv6_addr (/48–/128 prefixes)",
            shape: Shape::V6Net,
            desc: SetDesc::new(&[Ipv6Addr]).interval(),
        },
        Case {
            name: "tuple-space ipv4_addr . inet_service (prefix . port range)",
            shape: Shape::V4NetPort,
            desc: SetDesc::new(&[Ipv4Addr, InetService]).interval(),
        },
    ]
}

fn element(shape: Shape, r: &mut Rng) -> Element {
    match shape {
        Shape::V4Exact | Shape::V4ExactTimeout => Element::exact(&[r.next() as u32 as u128]),
        Shape::V6Exact => Element::exact(&[((r.next() as u128) << 64) | r.next() as u128]),
        Shape::V4PortExact => Element::exact(&[
            r.next() as u32 as u128,
            if r.next() & 1 == 0 { 6 } else { 17 },
            (r.next() % 65536) as u128,
        ]),
        Shape::Port => Element::exact(&[(r.next() % 65536) as u128]),
        Shape::V4Net => {
            let len = 16 + (r.next() % 17) as u32;
            let a = r.next() as u32 as u128;
            let host = (1u128 << (32 - len)) - 1;
            Element::new(&[(a & !host, a | host)])
        }
        Shape::V6Net => {
            let len = 48 + (r.next() % 81) as u32;
            let a = ((r.next() as u128) << 64) | r.next() as u128;
            let host = if len == 128 {
                0
            } else {
                (1u128 << (128 - len)) - 1
            };
            Element::new(&[(a & !host, a | host)])
        }
        Shape::V4NetPort => {
            let len = 24 + (r.next() % 9) as u32;
            let a = r.next() as u32 as u128;
            let host = (1u128 << (32 - len)) - 1;
            let p = (r.next() % 65536) as u128;
            let hi = if r.next().is_multiple_of(4) {
                (p + r.next() as u128 % 64).min(65535)
            } else {
                p
            };
            Element::new(&[(a & !host, a | host), (p, hi)])
        }
    }
}

fn key_of(shape: Shape, el: &Element, r: &mut Rng, hit: bool) -> LookupKey {
    let v = |i: usize, r: &mut Rng| -> u128 {
        let (l, h) = el.ranges()[i];
        if hit {
            l + (r.next() as u128 % (h - l).saturating_add(1).max(1))
        } else {
            r.next() as u128
        }
    };
    match shape {
        Shape::V4Exact | Shape::V4ExactTimeout | Shape::V4Net => {
            LookupKey::new().addr(Family::V4, v(0, r) & 0xffff_ffff)
        }
        Shape::V6Exact | Shape::V6Net => {
            let x = if hit {
                v(0, r)
            } else {
                ((r.next() as u128) << 64) | r.next() as u128
            };
            LookupKey::new().addr(Family::V6, x)
        }
        Shape::V4PortExact => LookupKey::new()
            .addr(Family::V4, v(0, r) & 0xffff_ffff)
            .proto(if hit { el.ranges()[1].0 as u8 } else { 6 })
            .port(v(2, r) as u16),
        Shape::Port => LookupKey::new().port(v(0, r) as u16),
        Shape::V4NetPort => LookupKey::new()
            .addr(Family::V4, v(0, r) & 0xffff_ffff)
            .port(v(1, r) as u16),
    }
}

fn stats(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

fn fmt_rate(x: f64) -> String {
    if x >= 1e6 {
        format!("{:.1} M", x / 1e6)
    } else if x >= 1e3 {
        format!("{:.0} k", x / 1e3)
    } else {
        format!("{x:.0}")
    }
}

fn fmt3((m, lo, hi): (f64, f64, f64)) -> String {
    format!("{} ({}–{})", fmt_rate(m), fmt_rate(lo), fmt_rate(hi))
}

fn main() {
    let runs: usize = std::env::var("SETS_BENCH_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let quick = std::env::var("SETS_BENCH_QUICK").is_ok();
    let max: usize = std::env::var("SETS_BENCH_MAX")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(if quick { 100_000 } else { 10_000_000 });
    let sizes: Vec<usize> = [10usize, 1_000, 100_000, 1_000_000, 10_000_000]
        .into_iter()
        .filter(|&n| n <= max)
        .collect();
    let only = std::env::var("SETS_BENCH_ONLY").unwrap_or_default();
    let want = |sec: &str| only.is_empty() || only.split(',').any(|o| o == sec);
    println!("parapet-sets benchmark: {runs} runs per figure; rates per second of thread CPU time, median (min–max)");
    println!();
    println!("| backend / key | n | insert/s | delete/s | lookup/s (50 % hits) | bytes/elem | elements stored |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for case in cases().into_iter().filter(|_| want("backends")) {
        for &n in &sizes {
            let big = n > 1_000_000;
            let hashy = matches!(case.shape, Shape::V4Exact | Shape::V4ExactTimeout);
            if big && !hashy {
                continue;
            }
            if big && case.name.contains("memory") {
                continue;
            }
            if matches!(case.shape, Shape::Port) && n > 1_000 {
                // the whole domain is 65,536 ports
                if n != 100_000 {
                    continue;
                }
            }
            let mut desc = case.desc.clone();
            if case.name.contains("fixed") {
                desc = desc.size(n);
            }
            let mut rng = Rng(42 + n as u64);
            let els: Vec<Element> = (0..n).map(|_| element(case.shape, &mut rng)).collect();
            let nkeys = 1 << 20;
            let keys: Vec<LookupKey> = (0..nkeys)
                .map(|i| {
                    let el = &els[(rng.next() as usize) % n];
                    key_of(case.shape, el, &mut rng, i % 2 == 0)
                })
                .collect();
            let (mut ins, mut del, mut look) = (Vec::new(), Vec::new(), Vec::new());
            let mut mem = 0.0;
            let mut stored = 0;
            let lookups = if n <= 1000 { 4 * nkeys } else { nkeys };
            for _ in 0..runs {
                let mut set = Set::new("bench", desc.clone()).unwrap();
                let now = 1_000;
                // insert, one call per element (the small-n cases repeat to get a measurable time)
                let reps = (100_000 / n).max(1);
                let t = Timer::now();
                for rep in 0..reps {
                    if rep > 0 {
                        set.flush();
                    }
                    for e in &els {
                        set.add(e, now).unwrap();
                    }
                }
                ins.push((n * reps) as f64 / t.elapsed());
                stored = set.len();
                mem = set.memory_bytes() as f64 / stored.max(1) as f64;
                // lookup
                let t = Timer::now();
                let mut hits = 0usize;
                for i in 0..lookups {
                    hits += set.contains(&keys[i & (nkeys - 1)], now) as usize;
                }
                black_box(hits);
                look.push(lookups as f64 / t.elapsed());
                // delete (small n: repeated, re-inserting untimed)
                let mut dt = 0.0;
                for rep in 0..reps {
                    if rep > 0 {
                        for e in &els {
                            set.add(e, now).unwrap();
                        }
                    }
                    let t = Timer::now();
                    for e in &els {
                        set.del(e).unwrap();
                    }
                    dt += t.elapsed();
                }
                del.push((n * reps) as f64 / dt);
                assert_eq!(set.len(), 0);
            }
            println!(
                "| {} | {} | {} | {} | {} | {:.1} | {} |",
                case.name,
                n,
                fmt3(stats(ins)),
                fmt3(stats(del)),
                fmt3(stats(look)),
                mem,
                stored
            );
        }
    }
    // bulk insert (one add_many call)
    println!();
    println!("| bulk add_many | n | insert/s |");
    println!("|---|---:|---:|");
    for (name, shape, desc) in [
        (
            "hash ipv4_addr",
            Shape::V4Exact,
            SetDesc::new(&[KeyPart::Ipv4Addr]),
        ),
        (
            "interval ipv4_addr",
            Shape::V4Net,
            SetDesc::new(&[KeyPart::Ipv4Addr]).interval(),
        ),
    ] {
        if !want("bulk") {
            break;
        }
        for &n in sizes.iter().filter(|&&n| (1_000..=1_000_000).contains(&n)) {
            let mut rng = Rng(7);
            let els: Vec<Element> = (0..n).map(|_| element(shape, &mut rng)).collect();
            let mut v = Vec::new();
            for _ in 0..runs {
                let mut set = Set::new("b", desc.clone()).unwrap();
                let t = Timer::now();
                set.add_many(&els, 0).unwrap();
                v.push(n as f64 / t.elapsed());
                black_box(set.len());
            }
            println!("| {name} | {n} | {} |", fmt3(stats(v)));
        }
    }
    // end-to-end ipset-save load
    println!();
    println!("| ipset restore (parse + load, one call) | elements | CPU seconds | wall seconds | elements/s (CPU) | save CPU seconds |");
    println!("|---|---:|---:|---:|---:|---:|");
    let n = if quick { 100_000 } else { 1_000_000 };
    for (typ, shape, extra) in if want("ipset") {
        vec![
            ("hash:ip", Shape::V4Exact, ""),
            ("hash:ip", Shape::V4Exact, " timeout 600"),
            ("hash:net", Shape::V4Net, ""),
            ("hash:ip,port", Shape::V4PortExact, ""),
        ]
    } else {
        vec![]
    } {
        if std::env::var("SETS_BENCH_IPSET").is_ok_and(|t| t != typ) {
            continue;
        }
        let mut rng = Rng(99);
        let mut text =
            format!("create s {typ} family inet hashsize 1024 maxelem 16777216{extra}\n");
        for _ in 0..n {
            let el = element(shape, &mut rng);
            let r = el.ranges();
            let a = std::net::Ipv4Addr::from(r[0].0 as u32);
            match shape {
                Shape::V4Net => {
                    let len = 32 - (r[0].1 - r[0].0 + 1).trailing_zeros();
                    text += &format!("add s {a}/{len}\n");
                }
                Shape::V4PortExact => {
                    text += &format!(
                        "add s {a},{}:{}\n",
                        if r[1].0 == 6 { "tcp" } else { "udp" },
                        r[2].0
                    )
                }
                _ => {
                    text += &format!("add s {a}");
                    if !extra.is_empty() {
                        text += " timeout 300";
                    }
                    text.push('\n');
                }
            }
        }
        let mut secs = Vec::new();
        let mut walls = Vec::new();
        let mut save = Vec::new();
        let mut count = 0;
        for _ in 0..runs {
            let mut store = SetStore::new();
            let t = Timer::now();
            let w = Instant::now();
            store.load_ipset(&text).unwrap();
            secs.push(t.elapsed());
            walls.push(w.elapsed().as_secs_f64());
            count = store.get("s").unwrap().len();
            let t = Timer::now();
            black_box(store.save_ipset(None).len());
            save.push(t.elapsed());
        }
        let (m, lo, hi) = stats(secs);
        let (sm, _, _) = stats(save);
        let (wm, wlo, whi) = stats(walls);
        println!(
            "| {typ}{extra} ({:.0} MB text) | {count} | {m:.3} ({lo:.3}–{hi:.3}) | {wm:.3} ({wlo:.3}–{whi:.3}) | {} | {sm:.3} |",
            text.len() as f64 / 1e6,
            fmt_rate(count as f64 / m)
        );
    }
}
