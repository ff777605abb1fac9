//! ClassBench: every published filter set parses with the expected rule
//! count, and on the traces the linear engine's first match is at or before
//! the filter that generated the header, which itself matches.

use flate2::read::GzDecoder;
use parapet_model::*;
use parapet_parse::trace::TraceReader;
use parapet_parse::*;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

const DIR: &str = "/work/shared/data/classbench";

/// The data lives outside the repository; skip (loudly) when it is absent.
fn data_dir() -> Option<PathBuf> {
    let d = Path::new(DIR);
    if d.is_dir() {
        Some(d.to_path_buf())
    } else {
        eprintln!("skipping: {DIR} is absent");
        None
    }
}

fn read_maybe_gz(path: &Path) -> String {
    let mut s = String::new();
    let f = std::fs::File::open(path).unwrap();
    if path.extension().is_some_and(|e| e == "gz") {
        GzDecoder::new(f).read_to_string(&mut s).unwrap();
    } else {
        BufReader::new(f).read_to_string(&mut s).unwrap();
    }
    s
}

fn filter_sets(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_str().unwrap().ends_with(suffix))
        .collect();
    v.sort();
    v
}

#[test]
fn every_1k_set_parses_with_its_line_count() {
    let Some(dir) = data_dir() else { return };
    let sets = filter_sets(&dir, "_1k");
    assert_eq!(sets.len(), 12, "{sets:?}");
    for path in sets {
        let text = read_maybe_gz(&path);
        let expected = text.lines().filter(|l| !l.trim().is_empty()).count();
        let name = path.display().to_string();
        assert_eq!(detect(&text), Format::Classbench, "{name}");
        let p = parse(&text, &name, Format::Auto).unwrap_or_else(|e| panic!("{}", e[0]));
        assert_eq!(p.ruleset.rule_count(), expected, "{name}");
        // Ids are line numbers.
        for (i, r) in p.ruleset.rules().enumerate() {
            assert_eq!(r.id as usize, i + 1);
            assert_eq!(r.origin.line, r.id);
        }
    }
}

#[test]
fn traces_first_match_at_or_before_the_generating_filter() {
    let Some(dir) = data_dir() else { return };
    let traces = filter_sets(&dir, "_10k_trace.gz");
    assert!(!traces.is_empty());
    // A debug-build linear scan over 10k filters is slow; a prefix of each
    // trace checks the same property.
    const PER_TRACE: usize = 1000;
    for trace in traces {
        let tname = trace.file_name().unwrap().to_str().unwrap().to_string();
        let set = dir.join(tname.replace("_trace", ""));
        let text = read_maybe_gz(&set);
        let rs = parse(&text, &set.display().to_string(), Format::Classbench)
            .unwrap_or_else(|e| panic!("{}", e[0]))
            .ruleset;
        let rules: Vec<&Rule> = rs.rules().collect();
        let engine = LinearEngine::new(&rs, rs.select_chain(None).unwrap()).unwrap();
        let raw = read_maybe_gz(&trace);
        let mut checked = 0;
        for (line, pkt) in raw
            .lines()
            .zip(TraceReader::new(raw.as_bytes(), &tname))
            .take(PER_TRACE)
        {
            let pkt = pkt.unwrap();
            let generator: usize = line.split_whitespace().last().unwrap().parse().unwrap();
            let gen_rule = rules[generator];
            assert!(
                gen_rule.matches.matches(&pkt, &mut |_| false),
                "{tname}: filter {generator} does not match its own header {line}"
            );
            let d = engine.classify(&pkt, &NoSets).unwrap();
            assert!(
                d.rule_id >= 1 && d.rule_id as usize <= generator + 1,
                "{tname}: {line} first matched rule {} after its generator {}",
                d.rule_id,
                generator + 1
            );
            checked += 1;
        }
        assert_eq!(checked, PER_TRACE.min(raw.lines().count()));
    }
}

#[test]
fn proto_masks_enumerate_values() {
    // 0x00/0x00 is any protocol: no constraint at all.
    let any = "@1.2.3.0/24\t0.0.0.0/0\t0 : 65535\t0 : 65535\t0x00/0x00\t0x0000/0x0000\n";
    let rs = parse(any, "a", Format::Classbench).unwrap().ruleset;
    let r = rs.rules().next().unwrap();
    assert!(r.matches.get(Field::Proto).is_none());
    assert!(r.matches.get(Field::SrcPort).is_none());
    assert_eq!(
        r.matches.get(Field::SrcAddr).unwrap().ranges(),
        &[(0x0102_0300, 0x0102_03ff)]
    );
    assert_eq!(r.action, Action::Verdict(Verdict::Accept));
    assert_eq!(
        rs.tables[0].chains[0].base.as_ref().unwrap().policy,
        Verdict::Drop
    );
    // An odd mask: value 0x06 under mask 0xFE is {6, 7}.
    let odd = "@0.0.0.0/0 0.0.0.0/0 0 : 65535 1024 : 2048 0x06/0xFE\n";
    let rs = parse(odd, "b", Format::Classbench).unwrap().ruleset;
    let r = rs.rules().next().unwrap();
    assert_eq!(r.matches.get(Field::Proto).unwrap().ranges(), &[(6, 7)]);
    assert_eq!(
        r.matches.get(Field::DstPort).unwrap().ranges(),
        &[(1024, 2048)]
    );
}

#[test]
fn classbench_errors() {
    let text = "@1.2.3.4/32\t5.6.7.8/32\t0 : 65535\t80 : 80\t0x06/0xFF\n@1.2.3.4/40\t5.6.7.8/32\t0 : 65535\t80 : 80\t0x06/0xFF\n1.2.3.4/32 x\n@1.2.3.4/32\t5.6.7.8/32\t0 : 65535\t90 : 80\t0x06/0xFF\n@1.2.3.4/32\t5.6.7.8/32\t0 : 65535\t80 - 80\t0x06/0xFF\n@1.2.3.4/32\t5.6.7.8/32\t0 : 65535\t80 : 80\n";
    let errs: Vec<String> = parse(text, "cb", Format::Classbench)
        .unwrap_err()
        .iter()
        .map(|e| e.to_string())
        .collect();
    assert_eq!(
        errs,
        [
            "cb:2:2: prefix length 40 is longer than 32",
            "cb:3:1: expected '@' and a source prefix, found '1.2.3.4/32'",
            "cb:4:34: port range 90 : 80 is empty (start after end)",
            "cb:5:37: expected ':' between the ports, found '-'",
            "cb:6:41: expected a protocol VALUE/MASK like 0x06/0xFF",
        ]
    );
}
