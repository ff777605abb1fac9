//! The nft tokenizer: words, quoted strings and punctuation, each with its
//! line, column and byte span.

use crate::error::Errors;

#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Tok {
    Word(String),
    Str(String),
    Open,
    Close,
    Semi,
    Newline,
    Comma,
    LParen,
    RParen,
    Pipe,
    Amp,
}

#[derive(Clone, Debug)]
pub(super) struct Token {
    pub(super) tok: Tok,
    pub(super) line: u32,
    pub(super) col: u32,
    /// Byte offsets in the text, for raw set blocks.
    pub(super) start: usize,
    pub(super) end: usize,
    /// Which source text the span is in (0: the file named on the command
    /// line; others: included files, see `script`); `SUBSTITUTED` when the
    /// token came from a `$variable`, so its span is not its text.
    pub(super) src: u16,
}

/// `Token::src` of a token a `$variable` expanded to.
pub(super) const SUBSTITUTED: u16 = u16::MAX;

impl Token {
    pub(super) fn word(&self) -> Option<&str> {
        match &self.tok {
            Tok::Word(w) => Some(w),
            _ => None,
        }
    }

    /// The token as the user wrote it, for messages.
    pub(super) fn show(&self) -> String {
        match &self.tok {
            Tok::Word(w) => w.clone(),
            Tok::Str(s) => format!("\"{s}\""),
            Tok::Open => "{".into(),
            Tok::Close => "}".into(),
            Tok::Semi => ";".into(),
            Tok::Newline => "end of line".into(),
            Tok::Comma => ",".into(),
            Tok::LParen => "(".into(),
            Tok::RParen => ")".into(),
            Tok::Pipe => "|".into(),
            Tok::Amp => "&".into(),
        }
    }
}

/// Tokens of `text`; `line_base` is added to every line number (included
/// files get their own range, see `Errors::file_line`).
pub(super) fn tokenize(text: &str, errs: &mut Errors, line_base: u32, src: u16) -> Vec<Token> {
    let mut out = Vec::new();
    let mut line = 1u32;
    let mut line_start = 0usize;
    let bytes: Vec<(usize, char)> = text.char_indices().collect();
    let mut i = 0;
    let col_of = |pos: usize, line_start: usize| text[line_start..pos].chars().count() as u32 + 1;
    while i < bytes.len() {
        let (pos, c) = bytes[i];
        let single = |t: Tok| Token {
            tok: t,
            line,
            col: col_of(pos, line_start),
            start: pos,
            end: pos + c.len_utf8(),
            src,
        };
        match c {
            '\n' => {
                out.push(single(Tok::Newline));
                line += 1;
                line_start = pos + 1;
                i += 1;
            }
            // A line continuation: the statement goes on on the next line.
            '\\' if bytes.get(i + 1).map(|b| b.1) == Some('\n') => {
                line += 1;
                line_start = bytes[i + 1].0 + 1;
                i += 2;
            }
            c if c.is_whitespace() => i += 1,
            '#' => {
                while i < bytes.len() && bytes[i].1 != '\n' {
                    i += 1;
                }
            }
            '{' | '}' | ';' | ',' | '(' | ')' | '|' | '&' => {
                out.push(single(match c {
                    '{' => Tok::Open,
                    '}' => Tok::Close,
                    ';' => Tok::Semi,
                    ',' => Tok::Comma,
                    '(' => Tok::LParen,
                    ')' => Tok::RParen,
                    '|' => Tok::Pipe,
                    _ => Tok::Amp,
                }));
                i += 1;
            }
            '"' => {
                let col = col_of(pos, line_start);
                let mut s = String::new();
                i += 1;
                let mut closed = false;
                while i < bytes.len() {
                    match bytes[i].1 {
                        '"' => {
                            closed = true;
                            break;
                        }
                        '\n' => break,
                        '\\' if i + 1 < bytes.len() && matches!(bytes[i + 1].1, '"' | '\\') => {
                            s.push(bytes[i + 1].1);
                            i += 1;
                        }
                        ch => s.push(ch),
                    }
                    i += 1;
                }
                if !closed {
                    errs.push(line_base + line, col, "unterminated \"-quoted string");
                    continue;
                }
                let end = bytes[i].0 + 1;
                i += 1;
                out.push(Token {
                    tok: Tok::Str(s),
                    line,
                    col,
                    start: pos,
                    end,
                    src,
                });
            }
            _ => {
                let col = col_of(pos, line_start);
                let mut s = String::new();
                while i < bytes.len() {
                    let ch = bytes[i].1;
                    if ch.is_whitespace() || "{};,()|&\"#".contains(ch) {
                        break;
                    }
                    s.push(ch);
                    i += 1;
                }
                let end = bytes.get(i).map_or(text.len(), |b| b.0);
                out.push(Token {
                    tok: Tok::Word(s),
                    line,
                    col,
                    start: pos,
                    end,
                    src,
                });
            }
        }
    }
    for t in &mut out {
        t.line += line_base;
    }
    out
}

/// The text of a word or string token.
pub(super) fn word_text(t: &Token) -> String {
    match &t.tok {
        Tok::Word(w) | Tok::Str(w) => w.clone(),
        other => format!("{other:?}"),
    }
}
/// An error at `(line, column)` with its message.
pub(super) type Res<T> = Result<T, (u32, u32, String)>;

/// A jump target and where it is written.
pub(super) type JumpAt = (String, u32, u32);
