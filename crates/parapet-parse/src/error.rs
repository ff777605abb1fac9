//! Parse errors: where (`FILE:LINE:COL`) and what was expected.

use std::fmt;

/// One error in an input file.
///
/// Displayed as `FILE:LINE:COL: message`, the shape compilers use, so editors
/// and terminals can jump to it.
///
/// ```
/// use parapet_parse::ParseError;
/// let e = ParseError::new("rules.v4", 3, 7, "expected a chain name after -A");
/// assert_eq!(e.to_string(), "rules.v4:3:7: expected a chain name after -A");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// The file name as given by the caller (may be `-` or `<string>`).
    pub file: String,
    /// 1-based line.
    pub line: u32,
    /// 1-based column, counted in characters.
    pub column: u32,
    /// What was wrong, naming what was expected.
    pub message: String,
}

impl ParseError {
    /// Builds an error.
    pub fn new(file: &str, line: u32, column: u32, message: impl Into<String>) -> Self {
        ParseError {
            file: file.to_string(),
            line,
            column,
            message: message.into(),
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file, self.line, self.column, self.message
        )
    }
}

impl std::error::Error for ParseError {}

/// Collects the errors of one file; parsers keep going after an error so a
/// user sees every problem at once.
#[derive(Debug)]
pub(crate) struct Errors {
    pub file: String,
    pub list: Vec<ParseError>,
    /// Files a parse reads besides `file` (nft `include`): a line number
    /// `n << FILE_LINE_BITS | line` is line `line` of `included[n - 1]`.
    pub included: Vec<String>,
}

/// Lines per file in the shared line numbering of a file and its includes.
pub(crate) const FILE_LINE_BITS: u32 = 20;

impl Errors {
    pub fn new(file: &str) -> Self {
        Errors {
            file: file.to_string(),
            list: Vec::new(),
            included: Vec::new(),
        }
    }

    pub fn push(&mut self, line: u32, column: u32, message: impl Into<String>) {
        let (file, line) = self.file_line(line);
        let e = ParseError::new(&file, line, column, message);
        self.list.push(e);
    }

    /// The file and line a shared line number stands for.
    pub fn file_line(&self, line: u32) -> (String, u32) {
        let n = (line >> FILE_LINE_BITS) as usize;
        let real = line & ((1 << FILE_LINE_BITS) - 1);
        match n.checked_sub(1).and_then(|i| self.included.get(i)) {
            Some(f) => (f.clone(), real),
            None => (self.file.clone(), real),
        }
    }

    /// All or nothing: the value only when no error was recorded.
    pub fn finish<T>(mut self, value: T) -> Result<T, Vec<ParseError>> {
        if self.list.is_empty() {
            Ok(value)
        } else {
            self.list.sort_by_key(|e| (e.line, e.column));
            Err(self.list)
        }
    }
}
