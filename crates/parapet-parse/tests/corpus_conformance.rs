//! The conformance suite over `../shared/corpus` (322 real rulesets parapet's
//! authors did not write; `SOURCES.md` there says where each comes from).
//!
//! Every file is loaded by the function `parapet check` calls and the outcome is
//! compared with `tests/corpus_expectations.tsv`, which must match exactly:
//! a file that was accepted and is now refused fails (a regression), and a
//! file that was refused and now loads, or is refused for another reason,
//! fails too, asking to update the expectations. Regenerate with
//!
//! ```text
//! PARAPET_UPDATE_EXPECTATIONS=1 cargo test -p parapet-parse --test corpus_conformance
//! ```
//!
//! Every accepted iptables file must also survive parse → render
//! iptables-save → parse with an equal model (tables left to the kernel
//! included). The corpus is found at `$PARAPET_CORPUS`, else at
//! `../shared/corpus` next to the repository. When neither exists the test
//! says so and passes — except under CI (`CI` set), where a missing corpus
//! is a failure, so the suite can never pass there without running.
//!
//! ufw's rule files are fragments that jump to chains ufw's code creates:
//! they are loaded inside that frame, as ufw loads them
//! (`corpus_support/ufw.rs`).

#[path = "corpus_support/ufw.rs"]
mod ufw;

use parapet_parse::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const EXPECTATIONS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/corpus_expectations.tsv");

const DIRS: [&str; 3] = ["iptables", "nft", "ipset"];

fn corpus_dir() -> Option<PathBuf> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::env::var_os("PARAPET_CORPUS")
        .map(PathBuf::from)
        .into_iter()
        .chain([repo.join("../shared/corpus")])
        .find(|d| d.join("iptables").is_dir())
}

/// The issue's table rows: real-world files apart from the tools' own test
/// dumps.
fn category(file: &str) -> &'static str {
    let (dir, name) = file.split_once('/').unwrap_or(("", file));
    match dir {
        "iptables" if name.starts_with("iptables-tests_") => "iptables, iptables' test dumps",
        "iptables" => "iptables-save, real-world",
        "nft"
            if ["cfg_", "debian12_", "openwrt-fw4_"]
                .iter()
                .any(|p| name.starts_with(p)) =>
        {
            "nft, real-world configs"
        }
        "nft" => "nft, test dumps",
        _ => "ipset save",
    }
}

/// `refused: CONSTRUCT`: the first error without its position and without
/// the list of what is supported (`(supported: …)`, `: expected …`) (which grows with every
/// construct added, and is not what refused the file).
fn refusal(message: &str) -> String {
    let msg = message.split(" (").next().unwrap_or(message);
    let msg = msg.split(": expected ").next().unwrap_or(msg);
    format!("refused: {}", msg.replace('\t', " "))
}

/// Loads one file exactly as `parapet check` does ([`check::check`]: rules,
/// set blocks or ipset sets, jumps); `Ok` carries what the round trip needs.
fn load(file: &str, text: &str) -> Result<Option<Parsed>, String> {
    check::check(text, file, Format::Auto)
        .map(|c| c.parsed)
        .map_err(|errs| refusal(&errs[0].message))
}

/// parse → render iptables-save → parse gives an equal model.
fn iptables_round_trip(file: &str, parsed: &Parsed) -> Result<(), String> {
    let rs = &parsed.ruleset;
    let text = render::iptables_save(rs).map_err(|e| format!("{file}: render: {e}"))?;
    let again = parse(&text, "rendered", Format::Auto)
        .map_err(|e| format!("{file}: rendered text does not parse: {e:?}\n{text}"))?;
    if again.format != parsed.format {
        return Err(format!(
            "{file}: rendered as {}, re-read as {}",
            parsed.format, again.format
        ));
    }
    if in_listing_order(&without_origins(&again.ruleset)) != in_listing_order(&without_origins(rs))
    {
        return Err(format!("{file}: round trip changed the model\n{text}"));
    }
    Ok(())
}

/// The ruleset with its rule ids numbered in the order the rules are
/// listed: a rule's id is its position in the file, and `-I CHAIN` puts
/// a rule before rules written above it, so the listing (which writes
/// each chain in order) renumbers it. Rules sharing an id (`-m multiport
/// --ports`) keep sharing one.
fn in_listing_order(rs: &parapet_model::Ruleset) -> parapet_model::Ruleset {
    let mut rs = rs.clone();
    let mut new_ids = std::collections::HashMap::new();
    for t in &mut rs.tables {
        for c in &mut t.chains {
            for r in &mut c.rules {
                let next = new_ids.len() as u32 + 1;
                r.id = *new_ids.entry(r.id).or_insert(next);
            }
        }
    }
    rs
}

/// parse → render nft (with the file's set blocks) → parse gives an equal
/// model. `Ok(false)`: the model has something nft cannot write (said by
/// the renderer, with the rule).
fn nft_round_trip(file: &str, parsed: &Parsed) -> Result<bool, String> {
    let rs = &parsed.ruleset;
    // `-m limit` (xt_limit's jiffy credits) has no exact nft spelling: the
    // listing writes nft's `limit rate` (nanosecond tokens), whose bucket
    // rounds otherwise. Not a listing nft can express exactly.
    if rs.rules().any(|r| {
        r.limit
            .as_ref()
            .is_some_and(|l| l.flavor == parapet_model::LimitFlavor::Xt)
    }) {
        return Ok(false);
    }
    let Ok(text) = render::nft_with_sets(rs, &parsed.set_blocks) else {
        return Ok(false);
    };
    let again = check::check(&text, "rendered.nft", Format::Nft)
        .map_err(|e| format!("{file}: nft listing does not check: {e:?}\n{text}"))?
        .parsed
        .expect("an nft listing holds rules");
    if without_ids(&again.ruleset) != without_ids(rs) {
        return Err(format!("{file}: nft round trip changed the model\n{text}"));
    }
    Ok(true)
}

/// The model without origins, rule ids and what nft cannot carry or
/// orders otherwise (policy counters; iptables tables left to the kernel;
/// the layout and order of chains left to the kernel). A verdict map or anonymous
/// concatenated set is one rule id over several model rules, which the nft
/// listing writes one rule each (numbered apart when read back): the
/// listing decides the same, under other ids (see the report of issue 13).
fn without_ids(rs: &parapet_model::Ruleset) -> parapet_model::Ruleset {
    let mut rs = without_origins(rs);
    for t in &mut rs.tables {
        for c in &mut t.chains {
            for r in &mut c.rules {
                r.id = 0;
            }
        }
    }
    // nft base chains carry no policy counters, and the kernel's chains
    // go back in another order and layout: neither decides a packet.
    for t in &mut rs.tables {
        for c in &mut t.chains {
            if let Some(b) = &mut c.base {
                b.counters = Default::default();
            }
        }
    }
    for l in &mut rs.left_to_kernel {
        l.first_id = 0;
        l.text = l
            .text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join("\n");
    }
    // iptables tables left to the kernel (`*nat`) have no nft listing: the
    // listing names them in a comment.
    rs.left_to_kernel.retain(|l| l.nft);
    rs.left_to_kernel
        .sort_by(|a, b| (&a.table, &a.chains, &a.object).cmp(&(&b.table, &b.chains, &b.object)));
    rs
}

fn read_expectations() -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(EXPECTATIONS).unwrap_or_default();
    text.lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split_once('\t'))
        .map(|(f, o)| (f.to_string(), o.to_string()))
        .collect()
}

fn write_expectations(outcomes: &BTreeMap<String, String>) {
    let mut out = String::from(
        "# file\taccepted | refused: CONSTRUCT (first error, position and supported-list cut)\n\
         # Generated by PARAPET_UPDATE_EXPECTATIONS=1 cargo test -p parapet-parse --test corpus_conformance\n",
    );
    for (f, o) in outcomes {
        out.push_str(&format!("{f}\t{o}\n"));
    }
    std::fs::write(EXPECTATIONS, out).expect("write the expectations");
}

#[test]
fn corpus_matches_expectations() {
    let Some(dir) = corpus_dir() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "no corpus at $PARAPET_CORPUS or ../shared/corpus: CI must run this suite"
        );
        eprintln!(
            "SKIPPED: no corpus (set PARAPET_CORPUS or put it at ../shared/corpus); nothing checked"
        );
        return;
    };
    let mut outcomes = BTreeMap::new();
    let mut round_trip_failures = Vec::new();
    let mut nft_listed = 0;
    for sub in DIRS {
        let mut names: Vec<_> = std::fs::read_dir(dir.join(sub))
            .unwrap_or_else(|e| panic!("{}/{sub}: {e}", dir.display()))
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        for name in names {
            let file = format!("{sub}/{name}");
            let bytes = std::fs::read(dir.join(&file)).unwrap();
            let mut text = String::from_utf8_lossy(&bytes).into_owned();
            if ufw::is_fragment(&file) {
                text = ufw::as_ufw_loads(&file, &text).unwrap_or(text);
            }
            let outcome = match load(&file, &text) {
                Ok(parsed) => {
                    if let Some(p) = parsed.as_ref().filter(|_| sub == "iptables") {
                        if let Err(e) = iptables_round_trip(&file, p) {
                            round_trip_failures.push(e);
                        }
                    }
                    if let Some(p) = &parsed {
                        match nft_round_trip(&file, p) {
                            Ok(true) => nft_listed += 1,
                            Ok(false) => {}
                            Err(e) => round_trip_failures.push(e),
                        }
                    }
                    "accepted".to_string()
                }
                Err(refused) => refused,
            };
            outcomes.insert(file, outcome);
        }
    }

    let mut counts: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for (f, o) in &outcomes {
        let c = counts.entry(category(f)).or_default();
        c.1 += 1;
        c.0 += usize::from(o == "accepted");
    }
    eprintln!("nft listings read back to an equal model: {nft_listed} accepted files (the others have what nft cannot write)");
    eprintln!("| files | accepted |\n| --- | --- |");
    for (cat, (ok, all)) in &counts {
        eprintln!("| {cat} | {ok} of {all} |");
    }

    if std::env::var_os("PARAPET_UPDATE_EXPECTATIONS").is_some() {
        write_expectations(&outcomes);
        eprintln!("wrote {EXPECTATIONS}");
    } else {
        let expected = read_expectations();
        let mut problems = Vec::new();
        for (f, got) in &outcomes {
            match expected.get(f) {
                None => problems.push(format!("{f}: new file ({got}); update the expectations")),
                Some(want) if want == got => {}
                Some(want) if want == "accepted" => {
                    problems.push(format!("{f}: REGRESSION: was accepted, now {got}"))
                }
                Some(want) => problems.push(format!(
                    "{f}: expected '{want}', now '{got}'; update the expectations"
                )),
            }
        }
        for f in expected.keys().filter(|f| !outcomes.contains_key(*f)) {
            problems.push(format!(
                "{f}: in the expectations but not in the corpus; update the expectations"
            ));
        }
        assert!(
            problems.is_empty(),
            "{} difference(s) from {EXPECTATIONS} (regenerate with PARAPET_UPDATE_EXPECTATIONS=1 \
             once the change is intended):\n{}",
            problems.len(),
            problems.join("\n")
        );
    }
    assert!(
        round_trip_failures.is_empty(),
        "{}",
        round_trip_failures.join("\n\n")
    );
}
