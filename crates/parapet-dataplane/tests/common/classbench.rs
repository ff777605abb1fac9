//! ClassBench filter sets and their traces from the shared data, as the
//! tree form's tests read them.

use std::io::BufReader;

use parapet_model::{flatten, DecisionList, EntryKind, Packet, Verdict};

/// Reads a file, through `zcat` when gzipped.
pub fn read_maybe_gz(path: &str) -> String {
    if path.ends_with(".gz") {
        let out = std::process::Command::new("zcat")
            .arg(path)
            .output()
            .unwrap();
        assert!(out.status.success(), "zcat {path}");
        String::from_utf8(out.stdout).unwrap()
    } else {
        std::fs::read_to_string(path).unwrap()
    }
}

pub const CLASSBENCH: &str = "/work/shared/data/classbench";

/// A ClassBench filter set's decision list (verdicts alternating by rule,
/// so that the verdict says which rule decided, policy DROP as the parser
/// makes it) and its trace's packets.
pub fn classbench(name: &str) -> Option<(DecisionList, Vec<Packet>)> {
    let rules = format!("{CLASSBENCH}/{name}.gz");
    if !std::path::Path::new(&rules).exists() {
        eprintln!("skipped: no {rules}");
        return None;
    }
    let text = read_maybe_gz(&rules);
    let parsed =
        parapet_parse::parse(&text, &rules, parapet_parse::Format::Classbench).expect("parses");
    let rs = &parsed.ruleset;
    let mut list = flatten(rs, rs.select_chain(None).unwrap()).unwrap();
    for (i, e) in list.entries.iter_mut().enumerate() {
        if i % 3 == 1 {
            e.kind = EntryKind::Decide(Verdict::Drop);
        }
    }
    let trace = read_maybe_gz(&format!("{CLASSBENCH}/{name}_trace.gz"));
    let packets = parapet_parse::trace::TraceReader::new(BufReader::new(trace.as_bytes()), name)
        .map(|p| p.unwrap())
        .collect();
    Some((list, packets))
}
