//! # parapet-parse
//!
//! Frontends of parapet: text → [`Ruleset`], and back.
//!
//! - [`parse`] / [`parse_file`]: iptables-save and ip6tables-save,
//!   ClassBench filters, `nft list ruleset` (see `docs/syntax.md` for every
//!   construct and how it lowers to fields).
//! - [`detect`]: which [`Format`] a text is in (for `--format auto`).
//! - [`check::check`]: everything `parapet check` verifies (parse, set
//!   blocks or ipset sets, jumps), for the CLI and the conformance suite.
//! - [`trace`]: packet traces.
//! - [`render`]: a [`Ruleset`] back to iptables-save, nft or JSON.
//!
//! Errors are all-or-nothing: a file with any error yields every error
//! ([`ParseError`], displayed `FILE:LINE:COL: message`) and no ruleset.
//!
//! ```
//! use parapet_parse::{parse, Format};
//! let text = "*filter\n:INPUT DROP [0:0]\n-A INPUT -p tcp -m tcp --dport 22 -j ACCEPT\nCOMMIT\n";
//! let parsed = parse(text, "rules.v4", Format::Auto).unwrap();
//! assert_eq!(parsed.format, Format::IptablesSave);
//! assert_eq!(parsed.ruleset.rule_count(), 1);
//!
//! let errs = parse("*filter\n-A\nCOMMIT\n", "bad.v4", Format::IptablesSave).unwrap_err();
//! assert_eq!(errs[0].to_string(), "bad.v4:2:4: expected a chain name after -A");
//! ```

mod addrtype;
pub mod check;
mod classbench;
mod common;
mod ctorig;
mod ctstatus;
mod error;
mod iptables;
mod mangle;
mod mark_stmt;
mod nft;
mod owner_ids;
pub mod render;
mod rev_path;
pub mod trace;

pub use error::ParseError;
use parapet_model::{Family, Ruleset};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// The input formats.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Format {
    /// Decide from the content ([`detect`]).
    Auto,
    /// `iptables-save` output; the family is detected (ip6tables-save's
    /// header comment, IPv6 addresses or ICMPv6 make it IPv6).
    IptablesSave,
    /// `ip6tables-save` output: every rule is IPv6, whatever the content.
    Ip6tablesSave,
    /// ClassBench filters.
    Classbench,
    /// `nft list ruleset`.
    Nft,
    /// `ipset save`: detected here, parsed by the sets crate.
    Ipset,
}

impl Format {
    /// The name `--format` takes.
    pub fn name(self) -> &'static str {
        match self {
            Format::Auto => "auto",
            Format::IptablesSave => "iptables-save",
            Format::Ip6tablesSave => "ip6tables-save",
            Format::Classbench => "classbench",
            Format::Nft => "nft",
            Format::Ipset => "ipset",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Format {
    type Err = String;

    /// Accepts the names of [`Format::name`] and a few aliases (`iptables`,
    /// `ip6tables`, `cb`, `nftables`).
    ///
    /// ```
    /// use parapet_parse::Format;
    /// assert_eq!("nft".parse::<Format>(), Ok(Format::Nft));
    /// assert!("pf".parse::<Format>().unwrap_err().contains("expected one of"));
    /// ```
    fn from_str(s: &str) -> Result<Format, String> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "auto" => Format::Auto,
            "iptables-save" | "iptables" => Format::IptablesSave,
            "ip6tables-save" | "ip6tables" => Format::Ip6tablesSave,
            "classbench" | "cb" => Format::Classbench,
            "nft" | "nftables" => Format::Nft,
            "ipset" | "ipset-save" => Format::Ipset,
            _ => {
                return Err(format!(
                    "unknown format '{s}' (expected one of auto, iptables-save, ip6tables-save, classbench, nft, ipset)"
                ))
            }
        })
    }
}

/// A named set block of an nft table, kept as raw text for the sets crate.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetBlock {
    /// The table holding it.
    pub table: String,
    /// The set's name.
    pub name: String,
    /// The block's text from `set NAME {` to the matching `}` inclusive.
    pub text: String,
    /// 1-based line of `set NAME {`.
    pub line: u32,
    /// 1-based column of `set` on that line, so a position inside the
    /// block's first line maps back to the file.
    #[serde(default)]
    pub col: u32,
}

impl SetBlock {
    /// The file position of line `line`, column `col` of [`Self::text`].
    pub fn file_position(&self, line: usize, col: usize) -> (usize, usize) {
        let file_line = self.line as usize + line.saturating_sub(1);
        let file_col = if line <= 1 {
            col + self.col.max(1) as usize - 1
        } else {
            col
        };
        (file_line, file_col)
    }
}

/// A parsed file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Parsed {
    /// The rules.
    pub ruleset: Ruleset,
    /// The format it was read as (never [`Format::Auto`]).
    pub format: Format,
    /// nft `set` blocks, raw (empty for other formats).
    pub set_blocks: Vec<SetBlock>,
}

/// Guesses the format of a text from its first meaningful lines.
///
/// ```
/// use parapet_parse::{detect, Format};
/// assert_eq!(detect("# Generated by iptables-save\n*filter\n"), Format::IptablesSave);
/// assert_eq!(detect("# Generated by ip6tables-save v1.8.9\n*filter\n"), Format::Ip6tablesSave);
/// assert_eq!(detect("@1.2.3.4/32\t0.0.0.0/0\t0 : 65535\t0 : 65535\t0x06/0xFF\n"), Format::Classbench);
/// assert_eq!(detect("table inet filter {\n}\n"), Format::Nft);
/// assert_eq!(detect("create ban hash:ip\nadd ban 1.2.3.4\n"), Format::Ipset);
/// assert_eq!(detect("-N ban iphash\n-A ban 1.2.3.4\nCOMMIT\n"), Format::Ipset);
/// assert_eq!(detect("hello"), Format::Auto);
/// ```
///
/// Returns [`Format::Auto`] when nothing fits.
pub fn detect(text: &str) -> Format {
    for line in text.lines().take(200) {
        let l = line.trim();
        // iptables' header, or the one `parapet list` writes.
        if l.starts_with("# Generated by ip6tables") || l.contains("(ip6tables-save format)") {
            return Format::Ip6tablesSave;
        }
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        if l.starts_with('@') {
            return Format::Classbench;
        }
        if l.starts_with('*') || l.starts_with(':') || l.starts_with("-A ") || l == "COMMIT" {
            return if iptables::detect_family(text) == Family::V6 {
                Format::Ip6tablesSave
            } else {
                Format::IptablesSave
            };
        }
        let first = l.split_whitespace().next().unwrap_or("");
        match first {
            "table" | "flush" | "define" | "include" | "insert" | "delete" | "destroy" => {
                return Format::Nft
            }
            "add" | "create"
                if matches!(
                    l.split_whitespace().nth(1),
                    Some("table" | "chain" | "rule" | "map" | "element")
                ) =>
            {
                return Format::Nft
            }
            "create" | "add" if l.split_whitespace().count() >= 3 => return Format::Ipset,
            // ipset 4's `-N SET TYPE` / `-A SET ELEM`, which a current
            // `ipset restore` still reads.
            "-N" if legacy_ipset(text) => return Format::Ipset,
            _ => return Format::Auto,
        }
    }
    Format::Auto
}

/// `-N NAME TYPE` first, no `*table`: ipset 4's save format (an
/// iptables-restore file's `-N CHAIN` comes after its `*table`).
fn legacy_ipset(text: &str) -> bool {
    let mut lines = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'));
    lines.next().is_some_and(|l| l.starts_with("-N ")) && !text.lines().any(|l| l.starts_with('*'))
}

/// Parses `text` (named `path` in errors) in `format`.
///
/// With [`Format::Auto`] the format is [`detect`]ed; an undetectable text is
/// an error at 1:1. [`Format::Ipset`] is not parsed here (the sets crate
/// does it, through [`check::check`]) and yields an error saying so.
pub fn parse(text: &str, path: &str, format: Format) -> Result<Parsed, Vec<ParseError>> {
    parse_with(text, path, format, &ParseOptions::default())
}

/// What a parse may look at besides the text.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ParseOptions {
    /// nft `include` search path (`nft -I DIR`): a relative include not
    /// found next to the including file is looked for in these, in order.
    pub include_dirs: Vec<std::path::PathBuf>,
}

/// [`parse`] with [`ParseOptions`].
pub fn parse_with(
    text: &str,
    path: &str,
    format: Format,
    opts: &ParseOptions,
) -> Result<Parsed, Vec<ParseError>> {
    let format = match format {
        Format::Auto => match detect(text) {
            Format::Auto => {
                return Err(vec![ParseError::new(
                    path,
                    1,
                    1,
                    "cannot tell the format (expected iptables-save, ClassBench, nft or ipset save text); name it with --format",
                )])
            }
            f => f,
        },
        f => f,
    };
    let (ruleset, set_blocks) = match format {
        Format::IptablesSave => (iptables::parse(text, path, None)?, Vec::new()),
        Format::Ip6tablesSave => (iptables::parse(text, path, Some(Family::V6))?, Vec::new()),
        Format::Classbench => (classbench::parse(text, path)?, Vec::new()),
        Format::Nft => nft::parse(text, path, &opts.include_dirs)?,
        Format::Ipset => {
            return Err(vec![ParseError::new(
                path,
                1,
                1,
                "this is an ipset save file: it holds sets, not rules (load it as sets)",
            )])
        }
        Format::Auto => unreachable!("resolved above"),
    };
    Ok(Parsed {
        ruleset,
        format,
        set_blocks,
    })
}

/// A copy of the ruleset with every [`parapet_model::Origin`] cleared, so
/// rulesets read from different texts (a file and its rendering) compare by
/// meaning: ids, matches, actions, policies, counters.
pub fn without_origins(rs: &Ruleset) -> Ruleset {
    let mut rs = rs.clone();
    for t in &mut rs.tables {
        for c in &mut t.chains {
            for r in &mut c.rules {
                r.origin = parapet_model::Origin::default();
            }
        }
    }
    for l in &mut rs.left_to_kernel {
        l.line = 0;
    }
    rs
}

/// Reads and parses a file (`-` is stdin). Files whose name ends in `.gz`
/// are decompressed first (the ClassBench sets ship gzipped).
pub fn parse_file(path: &str, format: Format) -> Result<Parsed, Vec<ParseError>> {
    let text = read_text(path)
        .map_err(|e| vec![ParseError::new(path, 0, 0, format!("cannot read: {e}"))])?;
    parse(&text, path, format)
}

/// The text of a file, `-` for stdin, gunzipped when the name ends in `.gz`.
pub fn read_text(path: &str) -> std::io::Result<String> {
    use std::io::Read;
    let mut s = String::new();
    if path == "-" {
        std::io::stdin().read_to_string(&mut s)?;
    } else if path.ends_with(".gz") {
        flate2::read::GzDecoder::new(std::fs::File::open(path)?).read_to_string(&mut s)?;
    } else {
        s = std::fs::read_to_string(path)?;
    }
    Ok(s)
}
