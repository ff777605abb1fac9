//! `parapet lint` on lists whose verdicts alternate. Whether a rule is
//! reached does not depend on the verdicts before it, so the search takes
//! every run of deciding rules as one union whatever their verdicts
//! (`Settle::Arrival`): a piece covered by a wide rule is settled there at
//! once, instead of being cut on every small rule of another verdict in
//! list order. With runs of one verdict only, the small rules below split
//! the searched box hundreds of times and the search runs out of its box
//! budget (the rule is then "not proven").

use parapet_model::*;
use parapet_parse::*;

/// Small rules of alternating verdicts, a wide rule over all of them, and
/// two rules inside the wide one (unreachable).
fn alternating(small: u32) -> String {
    let mut text = String::from("*filter\n:INPUT ACCEPT [0:0]\n");
    for k in 0..small {
        // Spread over 10.0.0.0/8 so that no two share a small block.
        let a = k.wrapping_mul(2_654_435_761) & 0x00ff_ffff;
        let verdict = if k % 2 == 0 { "ACCEPT" } else { "DROP" };
        text.push_str(&format!(
            "-A INPUT -s 10.{}.{}.{}/32 -p tcp -m tcp --dport {} -j {verdict}\n",
            a >> 16,
            (a >> 8) & 0xff,
            a & 0xff,
            1000 + k
        ));
    }
    text.push_str("-A INPUT -s 10.0.0.0/8 -j DROP\n");
    text.push_str("-A INPUT -s 10.0.0.0/8 -p tcp -j ACCEPT\n");
    text.push_str("-A INPUT -s 10.0.0.0/9 -p tcp -m tcp --dport 1000:2000 -j DROP\n");
    text.push_str("COMMIT\n");
    text
}

#[test]
fn alternating_verdicts_are_searched_as_one_union() {
    const SMALL: u32 = 400;
    let text = alternating(SMALL);
    let rs = parse(&text, "alternating.v4", Format::IptablesSave)
        .unwrap()
        .ruleset;
    let list = flatten_unpruned(&rs, rs.select_chain(None).unwrap(), 1000).unwrap();
    // Few boxes at once: enough for a search that settles at the wide
    // rule, far too few for one cut on every small rule.
    let budget = Budget {
        max_cubes: 300,
        deadline: None,
    };
    let report = lint_with(&rs, &[list], budget, LintOptions { correlations: 10 }).unwrap();
    let wide = SMALL + 1;
    let inside = SMALL + 2;
    let partly = SMALL + 3;
    assert!(
        report.unproven.is_empty(),
        "unproven: {:?}",
        report.unproven
    );
    let unreachable: Vec<(u32, &[u32])> = report
        .findings
        .iter()
        .filter(|f| f.kind == FindingKind::Unreachable)
        .map(|f| (f.rule, &f.by[..]))
        .collect();
    // Rules `inside` and `partly` lie in the wide rule: shadowed by it
    // alone (`partly` overlaps small rules too, which take part of it).
    assert_eq!(
        unreachable,
        vec![(inside, &[wide][..]), (partly, &[wide][..])],
        "findings: {:?}",
        report.findings
    );
    // The small rules are all reached (each is the first to match its
    // own address and port); the DROP ones (even ids) are redundant before
    // the wide DROP, the ACCEPT ones are needed.
    let small: Vec<(u32, FindingKind)> = report
        .findings
        .iter()
        .filter(|f| f.rule <= SMALL)
        .map(|f| (f.rule, f.kind))
        .collect();
    let expected: Vec<(u32, FindingKind)> = (1..=SMALL)
        .filter(|id| id % 2 == 0)
        .map(|id| (id, FindingKind::Redundant))
        .collect();
    assert_eq!(small, expected);
    assert!(report.correlations_complete);
}
