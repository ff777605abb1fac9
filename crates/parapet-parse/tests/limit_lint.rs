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

/// A limit on a jump, and matches after a stateful one, are flattened as a
/// guarded rule (a conditional RETURN into the rule's entries, an
/// unconditional one past them): lint must still reach the chain jumped to
/// and the rules after, and find the real repeat.
#[test]
fn a_guarded_rule_hides_nothing_from_lint() {
    let text = "*filter
:INPUT DROP [0:0]
:LIM - [0:0]
-A INPUT -p tcp -m tcp --dport 22 -m limit --limit 3/min -j LIM
-A INPUT -p tcp -m tcp --dport 22 -s 10.0.0.0/8 -j ACCEPT
-A INPUT -p udp -m recent --set --name A -m udp --dport 53 -j ACCEPT
-A INPUT -p udp -m udp --dport 53 -j ACCEPT
-A INPUT -p udp -m udp --dport 53 -j ACCEPT
-A LIM -s 10.0.0.0/8 -j ACCEPT
COMMIT
";
    let rs = parse(text, "guard.v4", Format::IptablesSave)
        .unwrap()
        .ruleset;
    let list = flatten_unpruned(&rs, rs.select_chain(None).unwrap(), 1000).unwrap();
    let report = lint(&rs, &[list], Budget::default()).unwrap();
    let rules: Vec<u32> = report.findings.iter().map(|f| f.rule).collect();
    // Rule 5 repeats rule 4; rule 6 (LIM's) and rule 2 are reachable.
    assert_eq!(rules, [5], "findings: {:?}", report.findings);
}
