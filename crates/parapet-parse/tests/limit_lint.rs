//! Analysis with limits: a rule with a limit decides only while its bucket
//! lasts, so the rules after it stay reachable and it is never redundant
//! (`parapet lint` must not tell a user to delete the DROP after a
//! rate-limited ACCEPT).

use parapet_model::*;
use parapet_parse::*;

#[test]
fn a_limited_rule_shadows_nothing() {
    let text = "*filter
:INPUT ACCEPT [0:0]
-A INPUT -p icmp -m icmp --icmp-type 8 -m limit --limit 1/sec -j ACCEPT
-A INPUT -p icmp -m icmp --icmp-type 8 -j DROP
-A INPUT -p icmp -m icmp --icmp-type 8 -j DROP
COMMIT
";
    let rs = parse(text, "ping.v4", Format::IptablesSave)
        .unwrap()
        .ruleset;
    let list = flatten_unpruned(&rs, rs.select_chain(None).unwrap(), 1000).unwrap();
    let report = lint(&rs, &[list], Budget::default()).unwrap();
    let by_rule: Vec<(u32, FindingKind)> =
        report.findings.iter().map(|f| (f.rule, f.kind)).collect();
    // Rule 3 repeats rule 2 (that one is real); rules 1 and 2 are fine.
    assert!(
        by_rule.iter().all(|(r, _)| *r == 3),
        "findings: {:?}",
        report.findings
    );
    assert!(!by_rule.is_empty(), "rule 3 is unreachable behind rule 2");
}
