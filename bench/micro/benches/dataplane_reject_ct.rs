//! Cost of the conntrack lookup and of REJECT answers, kernel-timed with
//! BPF_PROG_TEST_RUN (JIT on). Needs root.
//!
//! `cargo bench -p parapet-bench-micro --bench dataplane_reject_ct -- [repeat]`
//!
//! - conntrack: the same packets through a program loaded without the
//!   lookup, one loaded with it and switched off at run time
//!   (`Dataplane::set_conntrack(false)`, what parapetd runs while its
//!   ruleset reads no ctstate) and one with it on, interleaved, median of 5
//!   batches of `repeat` runs each (the packets belong to no connection:
//!   one hash probe);
//! - REJECT: one run per packet (a repeated run would see its own answer),
//!   median of 2,000 runs, against the same packet dropped.

use std::net::{Ipv4Addr, Ipv6Addr};

use parapet_dataplane::abi::reject;
use parapet_dataplane::frame::Frame;
use parapet_dataplane::{AttachPoint, Dataplane, Features, KernelVerdict, LoadOptions, SetSizing};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn batch(dp: &Dataplane, hook: AttachPoint, frame: &[u8], repeat: u32) -> f64 {
    let r = dp.test_run(hook, frame, 0, repeat).expect("test run");
    r.duration.as_nanos() as f64
}

fn single(dp: &Dataplane, hook: AttachPoint, frame: &[u8]) -> f64 {
    median((0..2000).map(|_| batch(dp, hook, frame, 1)).collect())
}

fn main() {
    let repeat: u32 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(100_000);
    let load = |conntrack| {
        Dataplane::load_with(
            &LoadOptions::default(),
            &SetSizing::default(),
            &Features {
                conntrack,
                ..Features::default()
            },
        )
    };
    let timed = |conntrack| {
        let t0 = std::time::Instant::now();
        let r = load(conntrack);
        println!(
            "load + verify, conntrack {}: {:.0} ms",
            if conntrack { "linked" } else { "not linked" },
            t0.elapsed().as_secs_f64() * 1e3
        );
        r
    };
    let (mut off, mut on, mut switched) = match (timed(false), timed(true), load(true)) {
        (Ok(a), Ok(b), Ok(c)) => (a, b, c),
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
            eprintln!("skipped: cannot load the BPF dataplane ({e}); run as root");
            return;
        }
    };
    if !on.conntrack() {
        println!("conntrack lookup unavailable: {:?}", on.conntrack_note());
    }
    switched.set_conntrack(false).unwrap();
    let a = Ipv4Addr::new(192, 0, 2, 1);
    let b = Ipv4Addr::new(198, 51, 100, 7);
    let a6: Ipv6Addr = "2001:db8::1".parse().unwrap();
    let b6: Ipv6Addr = "2001:db8:1::2".parse().unwrap();
    for dp in [&mut off, &mut on, &mut switched] {
        dp.set_policy(KernelVerdict::Accept).unwrap();
    }
    let udp = Frame::ipv4(a, b).udp(4000, 53).payload(32).build();
    let syn = Frame::ipv4(a, b).tcp(4000, 80, 0x02).build();
    let udp6 = Frame::ipv6(a6, b6).udp(4000, 53).payload(32).build();
    for (what, f) in [("udp", &udp), ("tcp syn", &syn), ("udp v6", &udp6)] {
        for hook in [AttachPoint::Xdp, AttachPoint::Tc] {
            let (mut x, mut y, mut z) = (Vec::new(), Vec::new(), Vec::new());
            for _ in 0..5 {
                x.push(batch(&off, hook, f, repeat));
                z.push(batch(&switched, hook, f, repeat));
                y.push(batch(&on, hook, f, repeat));
            }
            let (x, y, z) = (median(x), median(y), median(z));
            println!(
                "{what:8} {hook:?}: conntrack not linked {x:.1} ns/packet, linked but off {z:.1} ({:+.1}), on {y:.1} (+{:.1})",
                z - x,
                y - x
            );
        }
    }

    let dp = &mut off;
    dp.set_reject_rate(100_000_000, 100_000_000).unwrap();
    dp.set_lite_rule(0, 0, 1).unwrap();
    let big6 = Frame::ipv6(a6, b6).udp(4000, 9).payload(1400).build();
    let cases: [(&str, u8, &[u8]); 4] = [
        ("tcp-reset, SYN", reject::TCP_RESET, &syn),
        ("icmp port unreachable, udp", reject::DEFAULT, &udp),
        ("icmp6 port unreachable, udp v6", reject::DEFAULT, &udp6),
        (
            "icmp6, 1,400-byte payload (1,232 quoted)",
            reject::DEFAULT,
            &big6,
        ),
    ];
    for (what, t, f) in cases {
        for hook in [AttachPoint::Xdp, AttachPoint::Tc] {
            dp.set_action(1, KernelVerdict::Drop, false).unwrap();
            let d = single(dp, hook, f);
            dp.set_action_reject(1, t, false).unwrap();
            let r = single(dp, hook, f);
            println!(
                "REJECT {what:42} {hook:?}: {r:.0} ns/packet (DROP {d:.0}, +{:.0})",
                r - d
            );
        }
    }
}
