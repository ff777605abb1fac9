//! Rule files through the parser and the analysis alone, as the match
//! oracles check them beside the kernel: an iptables-save listing that
//! keeps every rule line as written and reads back, files the parser must
//! refuse (their errors, to check the position and the words), and a
//! file's lint report. Not in `common/mod.rs`: the files that use it name
//! it with `#[path]`.

#![allow(dead_code)]

use parapet_model::{flatten_unpruned, lint, Budget, DecisionList, LintReport, Ruleset};
use parapet_parse::{parse, render, Format};

/// Reads iptables-save `rules` as `name`, lists them with
/// `render::iptables_save`, asserts that every `-A` line of `rules` stands
/// in the listing as written, and reads the listing again: (the rules
/// read, the listing, the listing read). What must be equal between the
/// two readings is the caller's to say.
pub fn listed_back(rules: &str, name: &str) -> (Ruleset, String, Ruleset) {
    let rs = parse(rules, name, Format::IptablesSave).unwrap().ruleset;
    let listed = render::iptables_save(&rs).unwrap();
    for line in rules.lines().filter(|l| l.starts_with("-A")) {
        assert!(listed.contains(line), "{line} not in\n{listed}");
    }
    let back = parse(&listed, "listed.v4", Format::IptablesSave)
        .unwrap()
        .ruleset;
    (rs, listed, back)
}

/// The parser's errors for `text` read as `name` in `format`, one a line;
/// panics if the parser reads the text.
pub fn refused(text: &str, name: &str, format: Format) -> String {
    match parse(text, name, format) {
        Ok(_) => panic!("{name}: accepted\n{text}"),
        Err(e) => e
            .iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

/// `rule` as the third line of an iptables-save file `bad.v4` whose
/// filter table has only INPUT, for [`refused`] and [`refused_at`].
pub fn input_rule_file(rule: &str) -> String {
    format!("*filter\n:INPUT ACCEPT [0:0]\n{rule}\nCOMMIT\n")
}

/// Asserts that the parser refuses `rule` ([`input_rule_file`]) at column
/// `col` of its line, with words that contain `says`.
pub fn refused_at(rule: &str, col: u32, says: &str) {
    let err = refused(&input_rule_file(rule), "bad.v4", Format::IptablesSave);
    assert!(
        err.contains(&format!("bad.v4:3:{col}:")) && err.contains(says),
        "{rule}: {err}"
    );
}

/// `text` read as `name` in `format`, its default chain flattened
/// (unpruned) and linted with the default budget: (the rules, the list,
/// the report).
pub fn linted(text: &str, name: &str, format: Format) -> (Ruleset, DecisionList, LintReport) {
    let rs = parse(text, name, format).unwrap().ruleset;
    let list = flatten_unpruned(&rs, rs.select_chain(None).unwrap(), 1000).unwrap();
    let report = lint(&rs, std::slice::from_ref(&list), Budget::default()).unwrap();
    (rs, list, report)
}
