//! Kernel-side cost per packet of the real BPF program, measured with
//! BPF_PROG_TEST_RUN (`repeat` runs, kernel-timed, JIT on), for the interim
//! classifier and for classifier images of growing size (linear scans and
//! balanced dport trees). Needs root.
//!
//! `cargo bench -p parapet-bench-micro --bench dataplane_testrun -- [repeat]`
//!
//! The numbers include parsing, counters and the verdict, not the driver.

#[path = "../../../crates/parapet-dataplane/tests/common/image.rs"]
mod image;

use std::net::Ipv4Addr;
use std::time::Instant;

use image::{assemble, to_bytes, udp_dport_entry, Entry, ImageSpec, Tree};
use parapet_compile::{compile, Backend, CompileOptions};
use parapet_dataplane::frame::Frame;
use parapet_dataplane::{AttachPoint, Dataplane, KernelVerdict, LoadOptions};
use parapet_gen::{packets_for, random_ruleset, RandomSpec};
use parapet_model::{flatten, Family};

/// A balanced tree on dport over entries `lo..hi` (entry i matches port
/// 1000 + i), leaves of at most 4 entries.
fn tree(lo: u32, hi: u32) -> Tree {
    if hi - lo <= 4 {
        return Tree::Leaf((lo..hi).collect());
    }
    let mid = (lo + hi) / 2;
    Tree::Node {
        field: 5,
        cut: u128::from(1000 + mid - 1),
        le: Box::new(tree(lo, mid)),
        gt: Box::new(tree(mid, hi)),
    }
}

fn ns_per_packet(dp: &Dataplane, hook: AttachPoint, frame: &[u8], repeat: u32) -> f64 {
    // median of 5 kernel-timed batches
    let mut v: Vec<f64> = (0..5)
        .map(|_| {
            let r = dp.test_run(hook, frame, 0, repeat).expect("test run");
            r.duration.as_nanos() as f64
        })
        .collect();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[2]
}

fn main() {
    let repeat: u32 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(100_000);
    let t0 = Instant::now();
    let mut dp = match Dataplane::load(&LoadOptions {
        slot_pages: 256,
        ..LoadOptions::default()
    }) {
        Ok(dp) => dp,
        Err(e) => {
            eprintln!("skipped: cannot load the BPF dataplane ({e}); run as root");
            return;
        }
    };
    println!(
        "load + verify both programs: {:.1} ms",
        t0.elapsed().as_secs_f64() * 1e3
    );
    let a = Ipv4Addr::new(10, 0, 0, 1);
    let b = Ipv4Addr::new(10, 0, 0, 2);

    dp.set_action(1, KernelVerdict::Drop, false).unwrap();
    dp.set_lite_rule(17, 53, 1).unwrap();
    let dns = Frame::ipv4(a, b).udp(4000, 53).payload(32).build();
    for hook in [AttachPoint::Xdp, AttachPoint::Tc] {
        println!(
            "interim classifier, udp/53, {hook:?}: {:.1} ns/packet",
            ns_per_packet(&dp, hook, &dns, repeat)
        );
    }

    for n in [10u32, 100, 1000] {
        let entries: Vec<Entry> = (0..n)
            .map(|i| udp_dport_entry(i + 1, (1000 + i) as u16, 1))
            .collect();
        let last = Frame::ipv4(a, b)
            .udp(4000, (1000 + n - 1) as u16)
            .payload(32)
            .build();
        let linear = ImageSpec {
            entries: entries.clone(),
            verdicts: vec![0, 1],
            policy: 0,
            partitions: vec![Tree::Leaf((0..n).collect())],
        };
        let t = ImageSpec {
            partitions: vec![tree(0, n)],
            ..linear.clone_spec()
        };
        for (what, spec) in [("linear", &linear), ("tree", &t)] {
            let bytes = to_bytes(&assemble(spec));
            let t = Instant::now();
            dp.write_image(&bytes).unwrap();
            let written = t.elapsed();
            dp.swap().unwrap();
            let swapped = t.elapsed() - written;
            println!(
                "  write {:.2} ms, swap (flip + RCU grace period) {:.2} ms",
                written.as_secs_f64() * 1e3,
                swapped.as_secs_f64() * 1e3
            );
            let ns = ns_per_packet(&dp, AttachPoint::Xdp, &last, repeat.min(20_000));
            println!(
                "image {what:6} {n:5} rules ({} bytes), last rule matches, XDP: {ns:.1} ns/packet",
                bytes.len()
            );
        }
    }
    compiled(&mut dp, repeat.min(2_000));
}

/// Compiled random rulesets (parapet-gen + parapet-compile): mean kernel
/// time over packets aimed at the rules' edges.
fn compiled(dp: &mut Dataplane, repeat: u32) {
    for rules in [100usize, 1000, 5000] {
        let spec = RandomSpec {
            rules,
            user_chains: 0,
            ipv6: false,
            set_refs: 0,
            control_flow: false,
        };
        let rs = random_ruleset(7, &spec);
        let list = flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
        let pkts: Vec<Vec<u8>> = packets_for(&rs, 7, 40)
            .into_iter()
            .filter(|p| p.family == Family::V4)
            .map(|p| {
                let f = Frame::ipv4(Ipv4Addr::from(p.src as u32), Ipv4Addr::from(p.dst as u32));
                match p.proto {
                    6 => f.tcp(p.sport, p.dport, p.tcp_flags),
                    _ => f.udp(p.sport, p.dport),
                }
                .payload(16)
                .build()
            })
            .collect();
        for backend in [Backend::Linear, Backend::Tree] {
            let opts = CompileOptions {
                backend,
                ..CompileOptions::default()
            };
            let (img, _) = compile(&list, &opts).unwrap();
            let bytes = img.to_bytes();
            if bytes.len() > dp.slot_capacity() {
                println!("compiled {rules:5} rules {backend:?}: image too large for the slot");
                continue;
            }
            dp.write_image(&bytes).unwrap();
            dp.swap().unwrap();
            let total: f64 = pkts
                .iter()
                .map(|f| ns_per_packet(dp, AttachPoint::Xdp, f, repeat))
                .sum();
            println!(
                "compiled random ruleset {rules:5} rules, {backend:?} ({} bytes), XDP: {:.0} ns/packet (mean of {} packets)",
                bytes.len(),
                total / pkts.len() as f64,
                pkts.len()
            );
        }
    }
}

trait CloneSpec {
    fn clone_spec(&self) -> ImageSpec;
}

impl CloneSpec for ImageSpec {
    fn clone_spec(&self) -> ImageSpec {
        ImageSpec {
            entries: self.entries.clone(),
            verdicts: self.verdicts.clone(),
            policy: self.policy,
            partitions: self.partitions.clone(),
        }
    }
}
