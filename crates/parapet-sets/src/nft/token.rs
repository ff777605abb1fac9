//! Tokens of nft set text: words, strings, braces, `;` and newlines, with
//! 1-based positions for errors.

use crate::Error;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum T<'a> {
    Word(&'a str),
    Str(&'a str),
    LBrace,
    RBrace,
    Semi,
    Comma,
    Eq,
    Nl,
    Eof,
}

#[derive(Clone, Copy, Debug)]
pub(super) struct Tok<'a> {
    pub(super) t: T<'a>,
    pub(super) line: usize,
    pub(super) col: usize,
}

pub(super) fn lex(text: &str) -> Result<Vec<Tok<'_>>, Error> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let (mut line, mut ls) = (1usize, 0usize);
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let col = i - ls + 1;
        match c {
            b'\n' => {
                out.push(Tok {
                    t: T::Nl,
                    line,
                    col,
                });
                line += 1;
                ls = i + 1;
                i += 1;
            }
            b' ' | b'\t' | b'\r' => i += 1,
            b'#' => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'\\' if b.get(i + 1) == Some(&b'\n') => {
                i += 2;
                line += 1;
                ls = i;
            }
            b'{' | b'}' | b';' | b',' | b'=' => {
                let t = match c {
                    b'{' => T::LBrace,
                    b'}' => T::RBrace,
                    b';' => T::Semi,
                    b',' => T::Comma,
                    _ => T::Eq,
                };
                out.push(Tok { t, line, col });
                i += 1;
            }
            b'"' => {
                let s = i + 1;
                let mut j = s;
                while j < b.len() && b[j] != b'"' && b[j] != b'\n' {
                    if b[j] == b'\\' {
                        j += 1;
                    }
                    j += 1;
                }
                if j >= b.len() || b[j] != b'"' {
                    return Err(Error::new(
                        line,
                        col,
                        "unterminated string: expected a closing `\"`",
                    ));
                }
                out.push(Tok {
                    t: T::Str(&text[s..j]),
                    line,
                    col,
                });
                i = j + 1;
            }
            _ => {
                let s = i;
                while i < b.len()
                    && !matches!(
                        b[i],
                        b' ' | b'\t'
                            | b'\r'
                            | b'\n'
                            | b'{'
                            | b'}'
                            | b';'
                            | b','
                            | b'='
                            | b'"'
                            | b'#'
                    )
                {
                    i += 1;
                }
                out.push(Tok {
                    t: T::Word(&text[s..i]),
                    line,
                    col,
                });
            }
        }
    }
    out.push(Tok {
        t: T::Eof,
        line,
        col: b.len() - ls + 1,
    });
    Ok(out)
}

pub(super) fn show(t: T) -> String {
    match t {
        T::Word(w) => format!("`{w}`"),
        T::Str(s) => format!("\"{s}\""),
        T::LBrace => "`{`".into(),
        T::RBrace => "`}`".into(),
        T::Semi => "`;`".into(),
        T::Comma => "`,`".into(),
        T::Eq => "`=`".into(),
        T::Nl => "end of line".into(),
        T::Eof => "end of input".into(),
    }
}
