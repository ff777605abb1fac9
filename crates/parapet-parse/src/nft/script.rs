//! What `nft -f` does before parsing: `include "FILE"` (relative to the
//! including file, shell wildcards in the last path component), `define NAME
//! = VALUE` / `redefine` / `undefine` and `$NAME` substitution. The result
//! is one token stream; tokens of an included file carry their own line
//! range (`Errors::file_line`) and source index, so errors name the file.

use super::lexer::{tokenize, Tok, Token, SUBSTITUTED};
use crate::error::{Errors, FILE_LINE_BITS};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// nft's own include depth limit (`MAX_INCLUDE_DEPTH`).
const MAX_INCLUDE_DEPTH: usize = 16;

/// The texts the tokens point into: index 0 is the main file.
pub(super) struct Sources {
    pub(super) texts: Vec<String>,
}

struct Expander<'e> {
    errs: &'e mut Errors,
    texts: Vec<String>,
    /// The directory of each source, for relative includes.
    dirs: Vec<PathBuf>,
    defines: HashMap<String, Vec<Token>>,
    /// Canonical paths being included, innermost last (cycle check).
    stack: Vec<PathBuf>,
    /// `-I DIR`: where a relative include not found next to the including
    /// file is looked for, in order (nft's include path).
    search: &'e [PathBuf],
}

/// Expands includes and variables of `text` (read from `file`).
pub(super) fn expand(
    text: &str,
    file: &str,
    search: &[PathBuf],
    errs: &mut Errors,
) -> (Vec<Token>, Sources) {
    let toks = tokenize(text, errs, 0, 0);
    let dir = Path::new(file)
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let mut ex = Expander {
        errs,
        texts: vec![text.to_string()],
        dirs: vec![dir],
        defines: HashMap::new(),
        stack: std::fs::canonicalize(file).into_iter().collect(),
        search,
    };
    let mut out = Vec::new();
    ex.run(toks, &mut out);
    (out, Sources { texts: ex.texts })
}

fn statement_start(prev: Option<&Token>) -> bool {
    matches!(
        prev.map(|t| &t.tok),
        None | Some(Tok::Newline | Tok::Semi | Tok::Open | Tok::Close)
    )
}

impl Expander<'_> {
    fn run(&mut self, toks: Vec<Token>, out: &mut Vec<Token>) {
        let mut i = 0;
        let mut prev: Option<Token> = None;
        while i < toks.len() {
            let t = &toks[i];
            let start = statement_start(prev.as_ref());
            match t.word() {
                Some("include") if start => {
                    i = self.include(&toks, i, out);
                    continue;
                }
                Some("define" | "redefine") if start => {
                    i = self.define(&toks, i);
                    continue;
                }
                Some("undefine") if start => {
                    match toks.get(i + 1).and_then(|n| n.word()) {
                        Some(n) if self.defines.remove(n).is_some() => {}
                        _ => self.errs.push(
                            t.line,
                            t.col,
                            "expected a defined name after 'undefine'",
                        ),
                    }
                    i = end_of_statement(&toks, i);
                    continue;
                }
                Some(w) if w.starts_with('$') => {
                    let next = toks.get(i + 1).map(|n| n.tok.clone());
                    self.substitute(t, next, out);
                    prev = Some(t.clone());
                    i += 1;
                    continue;
                }
                _ => {}
            }
            out.push(t.clone());
            prev = Some(t.clone());
            i += 1;
        }
    }

    /// `$NAME` → its value, at the use's position. A set value used inside
    /// a set is merged into it (`{ $lan, 10.0.0.1 }`), as nft does.
    fn substitute(&mut self, t: &Token, next: Option<Tok>, out: &mut Vec<Token>) {
        let name = &t.word().unwrap_or("")[1..];
        let Some(value) = self.defines.get(name) else {
            self.errs.push(
                t.line,
                t.col,
                format!("undefined variable '${name}' (no 'define {name} = …' before it)"),
            );
            return;
        };
        // In a set: after `,`, or alone or first after `{`.
        let in_set = match out.last().map(|t| &t.tok) {
            Some(Tok::Comma) => true,
            Some(Tok::Open) => matches!(next, Some(Tok::Comma | Tok::Close)),
            _ => false,
        };
        let braced = matches!(value.first().map(|t| &t.tok), Some(Tok::Open))
            && matches!(value.last().map(|t| &t.tok), Some(Tok::Close));
        let body = if in_set && braced {
            &value[1..value.len() - 1]
        } else {
            &value[..]
        };
        out.extend(
            body.iter()
                .filter(|v| v.tok != Tok::Newline)
                .map(|v| Token {
                    line: t.line,
                    col: t.col,
                    src: SUBSTITUTED,
                    ..v.clone()
                }),
        );
    }

    /// `define NAME = VALUE` up to the end of the line (or `;`); variables
    /// in VALUE are expanded now, so nested defines work.
    fn define(&mut self, toks: &[Token], at: usize) -> usize {
        let end = end_of_statement(toks, at);
        let kw = &toks[at];
        let (Some(name), Some(eq)) = (toks.get(at + 1), toks.get(at + 2)) else {
            self.errs
                .push(kw.line, kw.col, "expected 'define NAME = VALUE'");
            return end;
        };
        if name.word().is_none() || eq.word() != Some("=") || at + 3 >= end {
            self.errs
                .push(kw.line, kw.col, "expected 'define NAME = VALUE'");
            return end;
        }
        let mut value = Vec::new();
        self.run(toks[at + 3..end].to_vec(), &mut value);
        self.defines
            .insert(name.word().unwrap_or("").to_string(), value);
        end
    }

    /// `include "PATH"`: the files' tokens in place of the statement.
    fn include(&mut self, toks: &[Token], at: usize, out: &mut Vec<Token>) -> usize {
        let end = end_of_statement(toks, at);
        let kw = &toks[at];
        let Some(Tok::Str(path)) = toks.get(at + 1).map(|t| &t.tok) else {
            self.errs
                .push(kw.line, kw.col, "expected 'include \"FILE\"'");
            return end;
        };
        let dir = self.dirs.get(kw.src as usize).cloned().unwrap_or_default();
        // Next to the including file first, then the search path.
        let found = std::iter::once(&dir)
            .chain(
                self.search
                    .iter()
                    .filter(|_| !Path::new(path).is_absolute()),
            )
            .map(|d| resolve(path, d))
            .find(|r| r.as_ref().is_ok_and(|f| !f.is_empty()));
        let files = match found.unwrap_or_else(|| resolve(path, &dir)) {
            Ok(f) => f,
            Err(m) => {
                self.errs.push(kw.line, kw.col, m);
                return end;
            }
        };
        for f in files {
            if self.stack.len() > MAX_INCLUDE_DEPTH {
                self.errs.push(
                    kw.line,
                    kw.col,
                    format!(
                        "include '{}': includes nested more than {MAX_INCLUDE_DEPTH} deep",
                        f.display()
                    ),
                );
                break;
            }
            let canon = std::fs::canonicalize(&f).unwrap_or_else(|_| f.clone());
            if self.stack.contains(&canon) {
                self.errs.push(
                    kw.line,
                    kw.col,
                    format!(
                        "include '{}' includes itself (an include cycle)",
                        f.display()
                    ),
                );
                continue;
            }
            let text = match std::fs::read_to_string(&f) {
                Ok(t) => t,
                Err(e) => {
                    self.errs.push(
                        kw.line,
                        kw.col,
                        format!("cannot read included file '{}': {e}", f.display()),
                    );
                    continue;
                }
            };
            self.errs.included.push(f.display().to_string());
            let n = self.errs.included.len() as u32;
            let src = self.texts.len() as u16;
            let inc = tokenize(&text, self.errs, n << FILE_LINE_BITS, src);
            self.texts.push(text);
            self.dirs
                .push(f.parent().map(Path::to_path_buf).unwrap_or_default());
            self.stack.push(canon);
            self.run(inc, out);
            self.stack.pop();
            // The included text ends a statement.
            if let Some(last) = out.last() {
                if !matches!(last.tok, Tok::Newline) {
                    out.push(Token {
                        tok: Tok::Newline,
                        ..last.clone()
                    });
                }
            }
        }
        end
    }
}

/// The index of the newline or `;` ending the statement at `at` (braces
/// nest), or the end.
fn end_of_statement(toks: &[Token], at: usize) -> usize {
    let mut depth = 0;
    for (i, t) in toks.iter().enumerate().skip(at) {
        match t.tok {
            Tok::Open => depth += 1,
            Tok::Close if depth > 0 => depth -= 1,
            Tok::Close => return i,
            Tok::Newline | Tok::Semi if depth == 0 => return i,
            _ => {}
        }
    }
    toks.len()
}

/// The files an include names: a path relative to the including file's
/// directory, with `*`, `?` in its last component matching (sorted, and
/// none is fine, as in nft); a plain path must exist.
fn resolve(path: &str, dir: &Path) -> Result<Vec<PathBuf>, String> {
    let p = Path::new(path);
    let full = if p.is_absolute() {
        p.to_path_buf()
    } else {
        dir.join(p)
    };
    let name = full.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if !name.contains(['*', '?']) {
        return if full.is_file() {
            Ok(vec![full])
        } else {
            Err(format!("included file '{}' does not exist", full.display()))
        };
    }
    let parent = full.parent().unwrap_or(Path::new("."));
    let mut found: Vec<PathBuf> = std::fs::read_dir(parent)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter(|e| {
                    let n = e.file_name().to_string_lossy().to_string();
                    !n.starts_with('.') && wildcard(name, &n)
                })
                .map(|e| e.path())
                .filter(|p| p.is_file())
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    Ok(found)
}

/// Shell wildcard match: `*` any run, `?` one character.
fn wildcard(pat: &str, s: &str) -> bool {
    let (p, s): (Vec<char>, Vec<char>) = (pat.chars().collect(), s.chars().collect());
    let (mut pi, mut si, mut star, mut mark) = (0, 0, None, 0);
    while si < s.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == s[si]) {
            pi += 1;
            si += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = si;
            pi += 1;
        } else if let Some(st) = star {
            pi = st + 1;
            mark += 1;
            si = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards() {
        assert!(wildcard("*.nft", "a.nft"));
        assert!(!wildcard("*.nft", "a.conf"));
        assert!(wildcard("r?.nft", "r1.nft"));
    }
}
