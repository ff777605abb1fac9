//! Shared test helpers: a tiny private ClassBench reader (until
//! `parapet-parse` lands) and engine configurations.
#![allow(dead_code)]

use parapet_compile::{BuildOptions, Engine};
use parapet_model::*;
use std::path::{Path, PathBuf};

/// Where the shared ClassBench data lives.
pub fn classbench_dir() -> PathBuf {
    PathBuf::from("/work/shared/data/classbench")
}

/// Reads a file, through `zcat` when gzipped.
pub fn read_maybe_gz(path: &Path) -> Option<String> {
    if path.extension().is_some_and(|e| e == "gz") {
        let out = std::process::Command::new("zcat").arg(path).output().ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into())
    } else {
        std::fs::read_to_string(path).ok()
    }
}

fn prefix(s: &str) -> IntervalSet {
    let (addr, len) = s.split_once('/').expect("prefix");
    let a: std::net::Ipv4Addr = addr.parse().expect("ipv4");
    IntervalSet::prefix(u32::from(a) as u128, len.parse().expect("len"), 32)
}

/// ClassBench filters as one chain, 5-tuple semantics, policy DROP.
pub fn classbench_list(text: &str) -> DecisionList {
    let rules = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix('@'))
        .map(|l| {
            let t: Vec<&str> = l.split_whitespace().collect();
            // src dst slo : shi dlo : dhi proto/mask [flags]
            let mut m = Matches::any();
            m.constrain(Field::Family, IntervalSet::point(4));
            m.constrain(Field::SrcAddr, prefix(t[0]));
            m.constrain(Field::DstAddr, prefix(t[1]));
            let num = |s: &str| s.parse::<u128>().expect("port");
            m.constrain(Field::SrcPort, IntervalSet::range(num(t[2]), num(t[4])));
            m.constrain(Field::DstPort, IntervalSet::range(num(t[5]), num(t[7])));
            let (p, mask) = t[8].split_once('/').expect("proto");
            let hex = |s: &str| u128::from_str_radix(s.trim_start_matches("0x"), 16).expect("hex");
            if hex(mask) == 0xff {
                m.constrain(Field::Proto, IntervalSet::point(hex(p)));
            }
            Rule::new(0, m, Action::Verdict(Verdict::Accept))
        })
        .collect();
    let rs = parapet_gen::one_chain(rules, Verdict::Drop);
    flatten(&rs, rs.select_chain(None).unwrap()).unwrap()
}

/// Trace packets: `src dst sport dport proto …`.
pub fn classbench_trace(text: &str) -> Vec<Packet> {
    text.lines()
        .filter_map(|l| {
            let t: Vec<u64> = l
                .split_whitespace()
                .take(5)
                .filter_map(|x| x.parse().ok())
                .collect();
            (t.len() == 5).then(|| {
                Packet::v4(
                    t[0] as u32,
                    t[1] as u32,
                    t[4] as u8,
                    t[2] as u16,
                    t[3] as u16,
                )
            })
        })
        .collect()
}

/// The engine configurations every differential test runs.
pub fn configs() -> Vec<(&'static str, BuildOptions)> {
    vec![
        ("auto", BuildOptions::default()),
        (
            "linear",
            BuildOptions {
                engine: Engine::Linear,
                ..Default::default()
            },
        ),
        (
            "tree",
            BuildOptions {
                engine: Engine::Tree,
                ..Default::default()
            },
        ),
        (
            "tree leaf=1",
            BuildOptions {
                engine: Engine::Tree,
                leaf_size: Some(1),
                ..Default::default()
            },
        ),
        (
            "tree unpartitioned",
            BuildOptions {
                engine: Engine::Tree,
                partition: false,
                leaf_size: Some(2),
                ..Default::default()
            },
        ),
        (
            "tree tight memory",
            BuildOptions {
                engine: Engine::Tree,
                max_memory: 1,
                leaf_size: Some(1),
                ..Default::default()
            },
        ),
    ]
}
