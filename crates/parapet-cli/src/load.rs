//! Reading ruleset and trace files (plain or gzipped), with every error
//! reported as `FILE:LINE:COL: message`.

use anyhow::{anyhow, Context, Result};
use parapet_model::{LeftToKernel, Packet, Ruleset};
use parapet_parse::trace::TraceReader;
use parapet_parse::{Format, ParseError, ParseOptions};

pub use crate::pcap::TraceItem;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

/// Opens a file for reading, decompressing `.gz` files on the fly; `-` is stdin.
/// A file's lines (`-`: standard input; `.gz`: decompressed).
pub fn open(path: &Path) -> Result<Box<dyn BufRead>> {
    if path == Path::new("-") {
        return Ok(Box::new(BufReader::new(std::io::stdin())));
    }
    let file =
        std::fs::File::open(path).with_context(|| format!("{}: cannot open", path.display()))?;
    if path.extension().is_some_and(|e| e == "gz") {
        Ok(Box::new(BufReader::with_capacity(
            1 << 16,
            flate2::read::MultiGzDecoder::new(file),
        )))
    } else {
        Ok(Box::new(BufReader::with_capacity(1 << 16, file)))
    }
}

/// Parses a ruleset file. On failure, every error is printed to stderr and
/// the returned error only counts them, so nothing is reported twice.
pub fn ruleset(path: &Path, format: &str) -> Result<parapet_parse::Parsed> {
    let format: Format = format.parse().map_err(|e: String| anyhow!(e))?;
    let name = path.display().to_string();
    parapet_parse::parse_with(&text(path)?, &name, format, options())
        .map_err(|errors| report_errors(path, &errors))
}

/// `-I DIR` of the command line: the nft include search path.
static OPTIONS: std::sync::OnceLock<ParseOptions> = std::sync::OnceLock::new();

/// Sets the include search path, once, before any file is read.
pub fn set_include_dirs(include_dirs: Vec<std::path::PathBuf>) {
    let _ = OPTIONS.set(ParseOptions { include_dirs });
}

fn options() -> &'static ParseOptions {
    OPTIONS.get_or_init(ParseOptions::default)
}

/// Checks a file as `parapet check` does ([`parapet_parse::check::check`]):
/// rules, set blocks or ipset sets, jumps. Errors are printed as for
/// [`ruleset`].
pub fn checked(path: &Path, format: &str) -> Result<parapet_parse::check::Checked> {
    let format: Format = format.parse().map_err(|e: String| anyhow!(e))?;
    let name = path.display().to_string();
    parapet_parse::check::check_with(&text(path)?, &name, format, options())
        .map_err(|errors| report_errors(path, &errors))
}

/// Whether `path` is an `ipset save` file (named so, or detected; stdin is
/// read once, so from stdin only when named).
pub fn is_ipset(path: &Path, format: &str) -> Result<bool> {
    let format: Format = format.parse().map_err(|e: String| anyhow!(e))?;
    Ok(match format {
        Format::Auto if path == Path::new("-") => false,
        Format::Auto => parapet_parse::detect(&text(path)?) == Format::Ipset,
        f => f == Format::Ipset,
    })
}

/// A short description of an ipset file's sets.
pub fn set_summary(sets: &parapet_sets::SetStore) -> String {
    let elements: usize = sets
        .names()
        .iter()
        .filter_map(|n| sets.get(n))
        .map(|s| s.len())
        .sum();
    format!(
        "{} set{}, {} element{}",
        sets.len(),
        plural(sets.len()),
        elements,
        plural(elements)
    )
}

/// The whole text of a file (gunzipped, `-` for stdin).
fn text(path: &Path) -> Result<String> {
    let mut text = String::new();
    open(path)?
        .read_to_string(&mut text)
        .with_context(|| format!("{}: cannot read", path.display()))?;
    Ok(text)
}

fn report_errors(path: &Path, errors: &[ParseError]) -> anyhow::Error {
    for e in errors {
        // An error of the whole file (a jump loop) has no position.
        if e.line == 0 {
            eprintln!("{}: {}", e.file, e.message);
        } else {
            eprintln!("{e}");
        }
    }
    anyhow!(
        "{}: {} error{}, nothing loaded",
        path.display(),
        errors.len(),
        plural(errors.len())
    )
}

/// Reads a trace file: the text format, or a pcap / pcapng capture.
pub fn trace_items(path: &Path) -> Result<Vec<TraceItem>> {
    if let Some(frames) = crate::pcap::frames(path)? {
        return Ok(frames
            .iter()
            .map(|f| crate::pcap::classify_frame(f))
            .collect());
    }
    TraceReader::new(open(path)?, &path.display().to_string())
        .map(|r| r.map(TraceItem::Packet).map_err(|e| anyhow!("{e}")))
        .collect()
}

/// The packets of a trace file (text or capture), skipping frames that are
/// not classified.
pub fn trace(path: &Path) -> Result<Vec<Packet>> {
    Ok(trace_items(path)?
        .into_iter()
        .filter_map(|i| match i {
            TraceItem::Packet(p) => Some(p),
            TraceItem::Unclassified { .. } => None,
        })
        .collect())
}

/// A short description of a ruleset: tables, chains, rules, set references.
pub fn summary(rs: &Ruleset) -> String {
    let chains: usize = rs.tables.iter().map(|t| t.chains.len()).sum();
    format!(
        "{} table{}, {} chain{}, {} rule{}, {} set reference{}",
        rs.tables.len(),
        plural(rs.tables.len()),
        chains,
        plural(chains),
        rs.rule_count(),
        plural(rs.rule_count()),
        rs.set_refs.len(),
        plural(rs.set_refs.len())
    ) + &left_to_kernel(rs)
        + &time_windows(rs)
        + &host_types(rs)
        + &offline_fields(rs)
        + &mark_changes(rs)
}

/// `; mark changes (rules 3, 9): …`, or nothing: the kernel dataplane
/// does not write the mark, so `apply` refuses mark changes some rule
/// reads and enforces the rest of those no rule reads (docs/syntax.md,
/// "Mark changes").
fn mark_changes(rs: &Ruleset) -> String {
    let ids: Vec<String> = rs
        .rules()
        .filter(|r| r.set_mark.is_some())
        .map(|r| r.id.to_string())
        .collect();
    if ids.is_empty() {
        return String::new();
    }
    let what = if parapet_dataplane::ruleset::mark_refusal(rs).is_some() {
        "a rule matches the mark: evaluated offline only, apply refuses them"
    } else {
        "no rule matches the mark: apply enforces the rest, the host's own rules set the mark"
    };
    format!(
        "; mark changes (rule{} {}): {what}",
        plural(ids.len()),
        ids.join(", ")
    )
}

/// `; the conntrack entry's original source port (rules 3, 4): evaluated
/// offline only, apply refuses it`, or nothing: `--ctorigsrcport`, `ct
/// original proto-src` and the entry's addresses (`--ctorigsrc`, …, `ct
/// original|reply ip saddr|daddr`) and the packet's bytes (`-m string`)
/// have no key word yet (docs/syntax.md).
fn offline_fields(rs: &Ruleset) -> String {
    use parapet_model::Field;
    // (the fields, what the note calls them): one note per entry
    const OFFLINE: &[(&[Field], &str)] = &[
        (
            &[Field::CtOrigSrcPort],
            "the conntrack entry's original source port",
        ),
        (
            &[
                Field::CtOrigSrc,
                Field::CtOrigDst,
                Field::CtReplSrc,
                Field::CtReplDst,
            ],
            "the conntrack entry's addresses",
        ),
    ];
    let mut out = String::new();
    for (fields, what) in OFFLINE {
        let ids: Vec<String> = rs
            .rules()
            .filter(|r| fields.iter().any(|f| r.all_matches().get(*f).is_some()))
            .map(|r| r.id.to_string())
            .collect();
        if !ids.is_empty() {
            out += &format!(
                "; {what} (rule{} {}): evaluated offline only, apply refuses it",
                plural(ids.len()),
                ids.join(", ")
            );
        }
    }
    out
}

/// `; address types beyond the local table (rules 1, 4): evaluated
/// offline only, apply refuses them`, or nothing: the dataplane types
/// addresses by the host's `local` table only, so a rule telling UNICAST
/// from UNREACHABLE, BLACKHOLE, … is not compiled (docs/syntax.md,
/// "Address and packet types").
fn host_types(rs: &Ruleset) -> String {
    use parapet_model::Field;
    let ids: Vec<String> = rs
        .rules()
        .filter(|r| {
            [Field::SrcType, Field::DstType].iter().any(|&f| {
                r.all_matches().get(f).is_some_and(|set| {
                    !parapet_model::dataplane_typed(r.all_matches().get(Field::Family), set)
                })
            })
        })
        .map(|r| r.id.to_string())
        .collect();
    if ids.is_empty() {
        return String::new();
    }
    format!(
        "; address types beyond the local table (rule{} {}): evaluated offline only, apply refuses them",
        plural(ids.len()),
        ids.join(", ")
    )
}

/// `; time windows with another stateful condition (rules 6, 7):
/// evaluated offline only, apply refuses them`, or nothing: rules the
/// linear engine evaluates but the compiler refuses (docs/syntax.md, "Time
/// conditions").
fn time_windows(rs: &Ruleset) -> String {
    let ids: Vec<String> = rs
        .rules()
        .filter(|r| r.time_with_another_condition())
        .map(|r| r.id.to_string())
        .collect();
    if ids.is_empty() {
        return String::new();
    }
    format!(
        "; time windows with another stateful condition (rule{} {}): evaluated offline only, apply refuses them",
        plural(ids.len()),
        ids.join(", ")
    )
}

/// `; left to the kernel: nat (PREROUTING 1 rule, …), …`, or nothing: the
/// tables parapet loads but does not enforce (the kernel keeps them).
fn left_to_kernel(rs: &Ruleset) -> String {
    if rs.left_to_kernel.is_empty() {
        return String::new();
    }
    let tables = LeftToKernel::summary(&rs.left_to_kernel);
    format!("; left to the kernel: {}", tables.join(", "))
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}
