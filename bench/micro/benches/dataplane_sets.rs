//! Kernel-side cost of set membership, measured with BPF_PROG_TEST_RUN
//! (kernel-timed, JIT on; median of 5 batches), and the cost of loading
//! elements. Needs root.
//!
//! `cargo bench -p parapet-bench-micro --bench dataplane_sets -- [repeat] [big]`
//!
//! The image has 4 entries "member of reference n → DROP" and the packet is
//! a member of none (so the walk is the same in every case); only the
//! number of references the header declares changes. `big` (default
//! 1,000,000) is the element count of the large LPM case.

#[path = "../../../crates/parapet-dataplane/tests/common/image.rs"]
mod image;

use std::net::Ipv4Addr;
use std::time::Instant;

use image::set_membership_image;
use parapet_dataplane::frame::Frame;
use parapet_dataplane::{
    AttachPoint, Dataplane, LoadOptions, PacketPart, SetDim, SetElement, SetSizing,
};

fn ns_per_packet(dp: &Dataplane, frame: &[u8], repeat: u32) -> f64 {
    let mut v: Vec<f64> = (0..5)
        .map(|_| {
            let r = dp
                .test_run(AttachPoint::Xdp, frame, 0, repeat)
                .expect("test run");
            r.duration.as_nanos() as f64
        })
        .collect();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[2]
}

/// xorshift64*
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// `n` random IPv4 prefixes of length 16..=32 outside 10/8 (the bench
/// packets' source and destination are in 10/8).
fn prefixes(rng: &mut Rng, n: usize) -> Vec<SetElement> {
    (0..n)
        .map(|_| {
            let len = 16 + (rng.next() % 17) as u32;
            let mut a = rng.next() as u32;
            if a >> 24 == 10 {
                a ^= 0x8000_0000;
            }
            let host = if len == 32 { 0 } else { u32::MAX >> len };
            let lo = a & !host;
            SetElement::new(&[(u128::from(lo), u128::from(lo | host))])
        })
        .collect()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let repeat: u32 = args.next().and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let big: usize = args
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let mut dp = match Dataplane::load_sized(
        &LoadOptions::default(),
        &SetSizing {
            lpm_entries: 4 << 20,
            tuple_entries: 1 << 16,
            ..SetSizing::default()
        },
    ) {
        Ok(dp) => dp,
        Err(e) => {
            eprintln!("skipped: cannot load the BPF dataplane ({e}); run as root");
            return;
        }
    };
    let mut rng = Rng(0x1234_5678_9abc_def1);
    let src = Ipv4Addr::new(10, 0, 0, 1);
    let dst = Ipv4Addr::new(10, 0, 0, 2);
    let pkt = Frame::ipv4(src, dst).udp(4000, 53).payload(32).build();

    // Sets: 0 = 1k IPv4 prefixes, 1 = addr . port (exact, one shape),
    // 2 = ports (LPM), 3 = `big` IPv4 prefixes, 4 = addr . port with 8
    // shapes.
    dp.create_set(0, &[SetDim::Ipv4Addr]).unwrap();
    dp.set_add(0, &prefixes(&mut rng, 1000)).unwrap();
    dp.create_set(1, &[SetDim::Ipv4Addr, SetDim::Port]).unwrap();
    let ap: Vec<SetElement> = (0..1000u32)
        .map(|i| SetElement::exact(&[u128::from(0xc000_0000 + i), 80]))
        .collect();
    dp.set_add(1, &ap).unwrap();
    dp.create_set(2, &[SetDim::Port]).unwrap();
    dp.set_add(
        2,
        &[SetElement::new(&[(1000, 2000)]), SetElement::exact(&[22])],
    )
    .unwrap();
    dp.create_set(4, &[SetDim::Ipv4Addr, SetDim::Port]).unwrap();
    let shapes: Vec<SetElement> = (0..8u32)
        .map(|i| {
            SetElement::new(&[
                (0xc000_0000, 0xc000_0000 | (u32::MAX >> (8 + i)) as u128),
                (80, 80),
            ])
        })
        .collect();
    dp.set_add(4, &shapes).unwrap();

    let run = |dp: &mut Dataplane, refs: &[(u32, &[PacketPart])], what: &str| {
        for (n, (set, parts)) in refs.iter().enumerate() {
            dp.define_set_ref(n as u32, *set, parts).unwrap();
        }
        dp.write_image(&set_membership_image(4, refs.len() as u32))
            .unwrap();
        dp.swap().unwrap();
        let ns = ns_per_packet(dp, &pkt, repeat);
        println!("{what}: {ns:.1} ns/packet");
        ns
    };
    use PacketPart::*;
    let base = run(&mut dp, &[], "0 set references");
    let one = run(&mut dp, &[(0, &[SrcAddr])], "1 reference, LPM, 1k prefixes");
    let four = run(
        &mut dp,
        &[
            (0, &[SrcAddr]),
            (0, &[DstAddr]),
            (1, &[SrcAddr, DstPort]),
            (2, &[DstPort]),
        ],
        "4 references (LPM src, LPM dst, addr.port hash, port LPM)",
    );
    let tuple8 = run(
        &mut dp,
        &[(4, &[SrcAddr, DstPort])],
        "1 reference, addr.port with 8 shapes",
    );
    println!(
        "added: 1 ref {:.1} ns, 4 refs {:.1} ns, 8-shape tuple {:.1} ns",
        one - base,
        four - base,
        tuple8 - base
    );

    dp.create_set(3, &[SetDim::Ipv4Addr]).unwrap();
    let els = prefixes(&mut rng, big);
    let t = Instant::now();
    for chunk in els.chunks(100_000) {
        dp.set_add(3, chunk).unwrap();
    }
    let load = t.elapsed().as_secs_f64();
    println!(
        "loaded {big} prefixes ({} LPM entries) in {load:.2} s: {:.0} elements/s",
        dp.set_entries(3).unwrap(),
        big as f64 / load
    );
    let bigns = run(&mut dp, &[(3, &[SrcAddr])], "1 reference, LPM, big set");
    // a member: the packet's source inside the big set
    let hit = els[big / 2].ranges[0].0 as u32;
    let member = Frame::ipv4(Ipv4Addr::from(hit), dst)
        .udp(4000, 53)
        .payload(32)
        .build();
    let ns = ns_per_packet(&dp, &member, repeat);
    println!("  member packet (rule 1 decides, fewer entries walked): {ns:.1} ns/packet");
    println!("added: big LPM {:.1} ns", bigns - base);
    let t = Instant::now();
    dp.set_del(3, &els[..100_000]).unwrap();
    println!(
        "deleted 100000 prefixes in {:.2} s",
        t.elapsed().as_secs_f64()
    );
}
