//! What `parapet check` accepts, in one place: the CLI's `check` and the
//! corpus conformance suite both call [`check`], so the counts the suite
//! reports are the ones a user sees.
//!
//! A file passes when it parses, its nft `set` blocks (or, for an `ipset
//! save` file, its sets) load into a [`SetStore`], and the default chain
//! flattens (jumps resolve, no loops).

use crate::{parse_with, Format, ParseError, ParseOptions, Parsed};
use parapet_sets::SetStore;

/// A file that passed [`check`].
#[derive(Debug)]
pub struct Checked {
    /// The format it was read as (never [`Format::Auto`]).
    pub format: Format,
    /// The rules; `None` for an `ipset save` file, which holds only sets.
    pub parsed: Option<Parsed>,
    /// The named sets: an nft file's `set` blocks, or an ipset file's sets.
    pub sets: SetStore,
}

/// Checks `text` (named `path` in errors) as `parapet check` does. Every
/// error carries the file's own line and column (a set block's errors are
/// mapped back from the block to the file). An error that has no position
/// in the text (a jump loop found while flattening) is at line 0, column 0.
pub fn check(text: &str, path: &str, format: Format) -> Result<Checked, Vec<ParseError>> {
    check_with(text, path, format, &ParseOptions::default())
}

/// [`check`] with [`ParseOptions`] (the nft include search path).
pub fn check_with(
    text: &str,
    path: &str,
    format: Format,
    opts: &ParseOptions,
) -> Result<Checked, Vec<ParseError>> {
    let format = match format {
        Format::Auto => crate::detect(text),
        f => f,
    };
    if format == Format::Ipset {
        let mut sets = SetStore::new();
        sets.load_ipset(text).map_err(|e| {
            vec![ParseError::new(
                path,
                e.line as u32,
                e.column as u32,
                e.message,
            )]
        })?;
        return Ok(Checked {
            format,
            parsed: None,
            sets,
        });
    }
    let parsed = parse_with(text, path, format, opts)?;
    let mut sets = SetStore::new();
    let mut errors = Vec::new();
    for b in &parsed.set_blocks {
        if let Err(e) = sets.load_nft(&b.text) {
            let (l, c) = b.file_position(e.line, e.column);
            errors.push(ParseError::new(
                path,
                l as u32,
                c as u32,
                format!("set '{}': {}", b.name, e.message),
            ));
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    if let Ok(chain) = parsed.ruleset.select_chain(None) {
        parapet_model::flatten(&parsed.ruleset, chain)
            .map_err(|e| vec![ParseError::new(path, 0, 0, e.to_string())])?;
    }
    Ok(Checked {
        format: parsed.format,
        parsed: Some(parsed),
        sets,
    })
}
