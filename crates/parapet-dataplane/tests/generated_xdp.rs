//! Generated XDP programs (src/codegen) against the spec: random decision
//! lists of the eligible fields (addresses and prefixes of both families,
//! port ranges and their edges, protocols, ICMP, TCP flags, fragments,
//! TTL, DSCP, length, RETURN and counter entries) checked frame by frame
//! against the linear scan of the list and against the main program (its
//! image walker) on the same frames — well-formed ones and truncated,
//! malformed, VLAN-tagged, fragmented and extension-chained ones, whose
//! fate the parser decides. Also: what is not eligible is refused, and the
//! verifier takes the longest eligible list.

mod common;

use std::net::{Ipv4Addr, Ipv6Addr};

use common::eligible::{eligible, random_cases, RandomCase};
use common::lo::{dp_on_lo, LO};
use common::wire::{frame_of, wire_packet};
use common::Rng;
use parapet_compile::{compile, CompileOptions};
use parapet_dataplane::codegen::{ineligible, GeneratedXdp, MAX_BRANCHES, MAX_ENTRIES};
use parapet_dataplane::frame::{parse_frame, Ext, Frame};
use parapet_dataplane::{AttachPoint, Dataplane, ParseStatus};
use parapet_gen::{packets_for, random_ruleset_with_header_fields, worst_case, RandomSpec};
use parapet_model::{flatten, Decision, DecisionList, EntryKind, Field, IfName, Verdict};
use std::collections::HashMap;

/// Whether `frame` passes by the spec: a frame that is not IP passes, one
/// the parser refuses (truncated, malformed, nested too deep) is dropped,
/// and the decision list decides the others.
fn spec_passes(list: &DecisionList, frame: &[u8]) -> bool {
    let (status, key) = parse_frame(frame, frame.len() as u32, LO);
    match status {
        ParseStatus::NotIp => true,
        ParseStatus::Ok => {
            let p = key.to_packet(IfName::new("lo").unwrap()).expect("IP");
            list.classify(&p, &[]).verdict == Verdict::Accept
        }
        _ => false,
    }
}

/// The spec's decision for a frame the rules decide, and its L3 length.
fn spec_decision(list: &DecisionList, frame: &[u8]) -> Option<(Decision, u64)> {
    let (status, key) = parse_frame(frame, frame.len() as u32, LO);
    if status != ParseStatus::Ok {
        return None;
    }
    let p = key.to_packet(IfName::new("lo").unwrap()).expect("IP");
    Some((list.classify(&p, &[]), u64::from(p.len)))
}

/// Frames the parser must get right beyond well-formed ones: cut short,
/// with bytes of the headers overwritten, VLAN tags, IPv4 options and
/// fragments, IPv6 extension chains (up to one past the limit), non-IP.
fn odd_frames(rng: &mut Rng, base: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for f in base.iter().take(60) {
        let cut = 14 + rng.below((f.len() - 14) as u64) as usize;
        out.push(f[..cut].to_vec());
        let mut g = f.clone();
        for _ in 0..1 + rng.below(3) {
            let at = 12 + rng.below(70.min(g.len() as u64 - 12)) as usize;
            g[at] = rng.u8();
        }
        out.push(g);
    }
    let a = Ipv4Addr::new(10, 0, 0, 1);
    let b = Ipv4Addr::new(192, 0, 2, 7);
    let a6: Ipv6Addr = "2001:db8::1".parse().unwrap();
    let b6: Ipv6Addr = "2001:db8:ffff::7".parse().unwrap();
    for dport in [0u16, 1, 22, 80, 443, 1023, 1024, 65535] {
        let tcp = Frame::ipv4(a, b).tcp(40000, dport, 0x12);
        out.push(tcp.clone().build());
        out.push(tcp.clone().vlan(0x8100, 5).build());
        out.push(tcp.clone().vlan(0x88a8, 5).vlan(0x8100, 6).build());
        out.push(
            tcp.clone()
                .vlan(0x8100, 5)
                .vlan(0x8100, 6)
                .vlan(0x8100, 7)
                .build(),
        );
        out.push(tcp.clone().ipv4_options(3).build());
        out.push(tcp.clone().ipv4_frag(0, true).build());
        out.push(tcp.clone().ipv4_frag(185, false).build());
        out.push(tcp.clone().ihl(4).build());
        out.push(tcp.clone().l3_len(10).build());
        out.push(tcp.clone().l3_len(0).build());
        out.push(tcp.clone().l3_len(2000).build());
        out.push(tcp.clone().truncate(14 + 20 + 10).build());
        out.push(
            Frame::ipv4(a, b)
                .udp(53, dport)
                .truncate(14 + 20 + 7)
                .build(),
        );
        let tcp6 = Frame::ipv6(a6, b6).tcp(40000, dport, 0x02);
        out.push(tcp6.clone().build());
        out.push(tcp6.clone().ext(Ext::HopByHop { len8: 0 }).build());
        out.push(
            tcp6.clone()
                .ext(Ext::Routing { len8: 2 })
                .ext(Ext::DestOpts { len8: 1 })
                .build(),
        );
        out.push(
            tcp6.clone()
                .ext(Ext::Fragment {
                    offset: 0,
                    more: true,
                })
                .build(),
        );
        out.push(
            tcp6.clone()
                .ext(Ext::Fragment {
                    offset: 0,
                    more: false,
                })
                .build(),
        );
        out.push(
            tcp6.clone()
                .ext(Ext::Fragment {
                    offset: 90,
                    more: false,
                })
                .build(),
        );
        out.push(tcp6.clone().ext(Ext::Ah { len4: 1 }).build());
        let mut deep = tcp6.clone();
        for _ in 0..8 {
            deep = deep.ext(Ext::DestOpts { len8: 0 });
        }
        out.push(deep.clone().build());
        out.push(deep.ext(Ext::HopByHop { len8: 0 }).build());
        out.push(tcp6.clone().truncate(14 + 40 + 19).build());
        out.push(Frame::ipv6(a6, b6).udp(dport, 53).build());
        out.push(Frame::non_ip(0x0806).payload(28).build());
    }
    out
}

/// The main program deciding `list` through its image.
fn main_program(dp: &mut Dataplane, list: &DecisionList) {
    let (image, _) = compile(list, &CompileOptions::default()).unwrap();
    dp.write_image(&image.to_bytes()).unwrap();
    dp.swap().unwrap();
}

#[test]
#[ignore = "needs root"]
fn generated_programs_agree_with_the_spec_and_the_main_program() {
    let mut dp = dp_on_lo("generated_programs_agree_with_the_spec_and_the_main_program");
    let mut rng = Rng::new(0x6765_6e78);
    let (mut checked, mut dropped, mut by_parser, mut lists) = (0, 0, 0, 0);
    let mut counted_rules = 0;
    for RandomCase { seed, rs, list } in
        random_cases(0..24, |s| 5 + (s as usize * 23) % 120, eligible)
    {
        if list.entries.len() > MAX_ENTRIES {
            continue;
        }
        assert_eq!(ineligible(&list), None, "seed {seed}");
        let prog = GeneratedXdp::load(&list, true).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        // (packets, bytes) by rule id (0: the policy), as the spec counts
        let mut want_counts: HashMap<u32, (u64, u64)> = HashMap::new();
        main_program(&mut dp, &list);
        lists += 1;
        let frames: Vec<Vec<u8>> = packets_for(&rs, seed, 200)
            .into_iter()
            .map(|p| frame_of(&wire_packet(p)))
            .collect();
        let odd = odd_frames(&mut rng, &frames);
        for (i, f) in frames.iter().chain(&odd).enumerate() {
            let want = spec_passes(&list, f);
            let got = prog.test_run(f, LO, 1).unwrap().passed;
            let main = dp.test_run(AttachPoint::Xdp, f, LO, 1).unwrap().passed;
            assert_eq!(
                (got, main),
                (want, want),
                "seed {seed} frame {i} (generated, main program) against the spec: {f:02x?}"
            );
            if let Some((d, len)) = spec_decision(&list, f) {
                for id in std::iter::once(d.rule_id).chain(d.nonterminal) {
                    let c = want_counts.entry(id).or_default();
                    *c = (c.0 + 1, c.1 + len);
                }
            }
            checked += 1;
            dropped += usize::from(!want);
            by_parser += usize::from(parse_frame(f, f.len() as u32, LO).0 != ParseStatus::Ok);
        }
        let mut got_counts: HashMap<u32, (u64, u64)> = HashMap::new();
        let counts = prog.counters().unwrap().expect("loaded with counters");
        let ids = list.entries.iter().map(|e| e.rule_id).chain([0]);
        for (id, (packets, bytes)) in ids.zip(counts) {
            if packets > 0 {
                let c = got_counts.entry(id).or_default();
                *c = (c.0 + packets, c.1 + bytes);
            }
        }
        assert_eq!(got_counts, want_counts, "seed {seed}: counters by rule id");
        counted_rules += got_counts.len();
    }
    assert!(
        counted_rules > 100,
        "{counted_rules} rules counted something"
    );
    assert!(lists >= 20, "{lists} lists generated");
    assert!(
        dropped > checked / 10 && dropped < checked * 9 / 10,
        "{dropped} of {checked} frames dropped"
    );
    assert!(by_parser > 500, "{by_parser} frames decided by the parser");
    println!("{lists} lists, {checked} frames, {dropped} dropped, {by_parser} by the parser");
}

#[test]
fn what_the_program_cannot_do_is_not_eligible() {
    let spec = RandomSpec {
        rules: 40,
        ..RandomSpec::default()
    };
    let rs = random_ruleset_with_header_fields(3, &spec);
    let list = flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
    let base = eligible(list);
    assert_eq!(ineligible(&base), None);
    let with_iface = {
        let mut l = base.clone();
        l.entries[0]
            .matches
            .constrain(Field::InIface, parapet_model::IntervalSet::point(1));
        l
    };
    assert!(ineligible(&with_iface).unwrap().contains("InIface"));
    let with_reject = {
        let mut l = base.clone();
        l.policy = Verdict::Reject { with: None };
        l
    };
    assert!(ineligible(&with_reject).is_some());
    let with_log = {
        let mut l = base.clone();
        l.entries[0].kind = EntryKind::Log;
        l
    };
    assert!(ineligible(&with_log).unwrap().contains("logs"));
    let rs = worst_case(MAX_ENTRIES + 1);
    let too_long = flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
    assert!(ineligible(&too_long).unwrap().contains("entries"));
    assert!(parapet_dataplane::codegen::generate(&with_log, None).is_err());
}

/// The verifier takes the longest eligible lists: nf-HiPAC's worst case
/// (six fields, eight comparisons and a counter per rule) as long as MAX_BRANCHES lets
/// it be, and a random list as long as the limits let it be; the worst
/// case's probe walks every rule to the last.
#[test]
#[ignore = "needs root"]
fn the_verifier_takes_the_longest_eligible_lists() {
    parapet_testbed::require_root();
    // nine jumps a rule: eight comparisons and the counter's null check
    let rs = worst_case(MAX_BRANCHES / 9 - 1);
    let worst = flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
    assert_eq!(ineligible(&worst), None);
    let rs = worst_case(MAX_BRANCHES / 9);
    let one_more = flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
    assert!(ineligible(&one_more).unwrap().contains("comparisons"));
    let prog = GeneratedXdp::load(&worst, true).unwrap();
    let probe = frame_of(&parapet_gen::worst_case_packet());
    assert!(prog.test_run(&probe, LO, 1).unwrap().passed);
    let mut miss = parapet_gen::worst_case_packet();
    miss.dport = 10_000 + (MAX_BRANCHES as u16 / 9 - 2);
    assert!(!prog.test_run(&frame_of(&miss), LO, 1).unwrap().passed);
    println!(
        "worst case, {} entries: {} instructions, {} verified",
        worst.entries.len(),
        prog.insn_count(),
        prog.verified_insns().unwrap()
    );
    let spec = RandomSpec {
        rules: MAX_ENTRIES,
        ..RandomSpec::default()
    };
    let rs = random_ruleset_with_header_fields(7, &spec);
    let mut random = eligible(flatten(&rs, rs.select_chain(None).unwrap()).unwrap());
    // the longest prefix within the limits (Returns past it resume at its end)
    let mut len = random.entries.len().min(MAX_ENTRIES);
    loop {
        random.entries.truncate(len);
        for e in &mut random.entries {
            if let EntryKind::Return { resume, .. } = &mut e.kind {
                *resume = (*resume).min(len as u32);
            }
        }
        if ineligible(&random).is_none() {
            break;
        }
        len -= 16;
    }
    assert!(len >= 256, "{len} entries");
    let prog = GeneratedXdp::load(&random, true).unwrap();
    println!(
        "random, {} entries: {} instructions, {} verified",
        random.entries.len(),
        prog.insn_count(),
        prog.verified_insns().unwrap()
    );
}
