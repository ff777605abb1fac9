//! What a program attached on the main program's maps counted for a batch
//! of frames, against what the linear engine says (the attached tree
//! form's tests, one program or split).

use std::collections::HashMap;

use parapet_dataplane::frame::parse_frame;
use parapet_dataplane::{Dataplane, HookCount, ParseStatus, Stat};
use parapet_model::{DecisionList, IfName, Packet, Verdict};

use super::lo::LO;
use super::wire::{frame_of, wire_packet};
use super::Rng;

/// What one program did with a batch of frames: per frame whether it
/// passed; the per-rule counters that moved (rule id: packets, bytes);
/// the packets and non-IP statistics; the XDP row of the hook statistics
/// in loopback's column (packets, bytes, dropped).
#[derive(Debug, PartialEq, Eq)]
pub struct Counted {
    pub passed: Vec<bool>,
    pub rules: HashMap<u32, (u64, u64)>,
    pub packets: u64,
    pub not_ip: u64,
    pub hook: (u64, u64, u64),
}

pub fn xdp_row(dp: &Dataplane) -> HookCount {
    dp.hook_counts(&[LO])
        .unwrap()
        .into_iter()
        .find(|h| h.hook == 1 && h.ifindex == LO)
        .unwrap_or_default()
}

/// Runs `frames` through `run` (one program's test run) on `dp`'s
/// counters, reset first, and reads back what it counted for the rule
/// ids of `list` and the policy's 0.
pub fn run_counted(
    dp: &mut Dataplane,
    list: &DecisionList,
    frames: &[Vec<u8>],
    run: &dyn Fn(&[u8]) -> bool,
) -> Counted {
    dp.reset_counters().unwrap();
    let (stats, hook) = (dp.stats().unwrap(), xdp_row(dp));
    let passed = frames.iter().map(|f| run(f)).collect();
    let mut rules = HashMap::new();
    for id in list.entries.iter().map(|e| e.rule_id).chain([0]) {
        let c = dp.counter(id).unwrap();
        if c.packets > 0 {
            rules.insert(id, (c.packets, c.bytes));
        }
    }
    let (after, hook_after) = (dp.stats().unwrap(), xdp_row(dp));
    let delta = |s: Stat| after.get(s) - stats.get(s);
    Counted {
        passed,
        rules,
        packets: delta(Stat::Packets),
        not_ip: delta(Stat::NotIp),
        hook: (
            hook_after.packets - hook.packets,
            hook_after.bytes - hook.bytes,
            hook_after.dropped - hook.dropped,
        ),
    }
}

/// The spec's fate of each frame (passes) and the per-rule counts the
/// linear engine gives them.
pub fn spec(list: &DecisionList, frames: &[Vec<u8>]) -> (Vec<bool>, HashMap<u32, (u64, u64)>) {
    let (mut passed, mut rules) = (Vec::new(), HashMap::new());
    for f in frames {
        let (status, key) = parse_frame(f, f.len() as u32, LO);
        passed.push(match status {
            ParseStatus::NotIp => true,
            ParseStatus::Ok => {
                let p = key.to_packet(IfName::new("lo").unwrap()).expect("IP");
                let d = list.classify(&p, &[]);
                let c: &mut (u64, u64) = rules.entry(d.rule_id).or_default();
                *c = (c.0 + 1, c.1 + u64::from(p.len));
                d.verdict == Verdict::Accept
            }
            _ => false,
        });
    }
    (passed, rules)
}

/// Frames of `packets`, some cut short (the parser drops them), and one
/// that is not IP.
pub fn frames_of(rng: &mut Rng, packets: Vec<Packet>) -> Vec<Vec<u8>> {
    let mut frames: Vec<Vec<u8>> = packets
        .into_iter()
        .map(|p| frame_of(&wire_packet(p)))
        .collect();
    let whole = frames.len();
    for i in 0..20 {
        let f = &frames[i % whole];
        let cut = 14 + rng.below((f.len() - 14) as u64) as usize;
        frames.push(f[..cut].to_vec());
    }
    let mut arp = frames[0][..42.min(frames[0].len())].to_vec();
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    frames.push(arp);
    frames
}
