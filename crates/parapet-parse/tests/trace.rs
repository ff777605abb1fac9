//! Trace files.

use parapet_model::Family;
use parapet_parse::trace::{self, TraceReader};

#[test]
fn reads_v4_decimal_and_v6_text() {
    let text = "# comment\n3660722196\t2190693700\t65535\t20\t6\t4294967295\t21160\n\n2001:db8::1 2001:db8::2 53 5353 17\n";
    let pkts: Vec<_> = TraceReader::new(text.as_bytes(), "t")
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(pkts.len(), 2);
    assert_eq!(pkts[0].src, 3660722196);
    assert_eq!(
        (pkts[0].sport, pkts[0].dport, pkts[0].proto),
        (65535, 20, 6)
    );
    assert_eq!(pkts[1].family, Family::V6);
    assert_eq!(pkts[1].dst, 0x2001_0db8_0000_0000_0000_0000_0000_0002);
}

#[test]
fn errors_carry_line_and_column() {
    let text = "1 2 3 4 6\n1 2 3 70000 6\n1 2 3\n1 ::1 3 4 6\n";
    let errs: Vec<String> = TraceReader::new(text.as_bytes(), "t.trace")
        .filter_map(Result::err)
        .map(|e| e.to_string())
        .collect();
    assert_eq!(
        errs,
        [
            "t.trace:2:7: expected a destination port 0-65535, found '70000'",
            "t.trace:3:6: expected 5 fields 'src dst sport dport proto', found 3",
            "t.trace:4:3: source and destination must be of the same family",
        ]
    );
}

#[test]
fn read_reports_missing_files() {
    let e = trace::read("/nonexistent/trace").unwrap_err();
    assert!(
        e.to_string()
            .starts_with("/nonexistent/trace:0:0: cannot open"),
        "{e}"
    );
}

#[test]
fn reads_gzipped_traces() {
    let path = "/work/shared/data/classbench/acl1_10k_trace.gz";
    if !std::path::Path::new(path).exists() {
        eprintln!("skipping: {path} is absent");
        return;
    }
    let first: Vec<_> = trace::open(path)
        .unwrap()
        .take(3)
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(first.len(), 3);
    assert_eq!(first[0].src, 1603215871);
}
