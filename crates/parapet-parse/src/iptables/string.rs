//! `-m string --algo bm|kmp [!] --string S | [!] --hex-string H [--from N]
//! [--to N] [--icase]` (libxt_string, xt_string.c), read into a
//! `StringMatch` of the rule's matches (`parapet_model::string_match`
//! for what the kernel searches). Each `-m string` is completed when the
//! next `-m` starts or the rule ends, so a string match before a stateful
//! one stays before it.

use super::option_arg::OptionArg;
use super::rule::{RuleParser, StringDraft};
use parapet_model::string_match::{StringAlgo, StringMatch, MAX_PATTERN};

/// The options of `-m string`.
pub(super) const STRING_OPTIONS: &[&str] = &[
    "--algo",
    "--string",
    "--hex-string",
    "--from",
    "--to",
    "--icase",
];

/// `--hex-string`'s text: bytes outside `|…|` as written (`\` takes the
/// next character as it is), pairs of hex digits inside, spaces between
/// pairs allowed. An error message when it does not read.
pub(crate) fn hex_string(s: &str) -> Result<Vec<u8>, String> {
    let b = s.as_bytes();
    let (mut out, mut i, mut hex) = (Vec::new(), 0, false);
    while i < b.len() {
        match b[i] {
            b'|' => {
                hex = !hex;
                i += 1;
            }
            b' ' if hex => i += 1,
            b'\\' if hex => return Err("a literal (\\) inside a |hex| block".into()),
            b'\\' => match b.get(i + 1) {
                Some(&c) => {
                    out.push(c);
                    i += 2;
                }
                None => return Err("a \\ at the end of the string".into()),
            },
            _ if hex => {
                let pair = s
                    .get(i..i + 2)
                    .filter(|p| p.chars().all(|c| c.is_ascii_hexdigit()))
                    .ok_or_else(|| format!("invalid hex digits at byte {}", i + 1))?;
                out.push(u8::from_str_radix(pair, 16).expect("two hex digits"));
                i += 2;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    if hex {
        return Err("a |hex| block is not closed".into());
    }
    Ok(out)
}

impl RuleParser<'_> {
    /// `-m string` at column `col`: completes the one before, if any.
    pub(super) fn string_module(&mut self, col: u32) {
        self.finish_string();
        self.string = Some(StringDraft {
            col,
            pattern: None,
            algo: None,
            from: 0,
            to: u16::MAX,
            icase: false,
        });
    }

    /// One option of the last `-m string`.
    pub(super) fn string_option(&mut self, arg: OptionArg<'_>) {
        let (opt, col, negated, v, vcol) = arg.parts();
        let Some(mut d) = self.string.take() else {
            return self.err(col, format!("option {opt} needs -m string before it"));
        };
        if let Some(c) = negated.filter(|_| !matches!(opt, "--string" | "--hex-string")) {
            return self.err(
                c,
                format!(
                    "string: {opt} cannot be inverted ('!' goes before --string or --hex-string)"
                ),
            );
        }
        let error = match opt {
            "--algo" => match v {
                _ if d.algo.is_some() => Some((col, "string: --algo given twice".to_string())),
                "bm" => (d.algo = Some(StringAlgo::Bm), None).1,
                "kmp" => (d.algo = Some(StringAlgo::Kmp), None).1,
                _ => Some((vcol, format!("string: algorithm '{v}' is not read (bm and kmp are; the kernel's fsm takes a token list, not a pattern)"))),
            },
            "--from" | "--to" => match v.parse::<u16>() {
                Ok(n) if opt == "--from" => (d.from = n, None).1,
                Ok(n) => (d.to = n, None).1,
                Err(_) => Some((vcol, format!("expected an offset 0-65535 after {opt}, found '{v}'"))),
            },
            "--icase" => (d.icase = true, None).1,
            _ if d.pattern.is_some() => Some((
                col,
                "string: one pattern per -m string (--string or --hex-string, once)".to_string(),
            )),
            _ => {
                let bytes = if opt == "--string" {
                    Ok(v.as_bytes().to_vec())
                } else {
                    hex_string(v)
                };
                match bytes {
                    Ok(b) if b.is_empty() => Some((vcol, "string: the pattern is empty (iptables: STRING must contain at least one char)".to_string())),
                    Ok(b) if b.len() > MAX_PATTERN => Some((vcol, format!("string: the pattern is {} bytes, more than the kernel's {MAX_PATTERN} (iptables: STRING too long)", b.len()))),
                    Ok(b) => (d.pattern = Some((b, negated.is_some())), None).1,
                    Err(m) => Some((vcol, format!("string: {m}"))),
                }
            }
        };
        self.string = Some(d);
        if let Some((c, m)) = error {
            self.err(c, m);
        }
    }

    /// Completes the pending `-m string` with libxt_string's final checks
    /// and xt_string's (`--from` after `--to`: EINVAL).
    pub(super) fn finish_string(&mut self) {
        let Some(d) = self.string.take() else {
            return;
        };
        let (Some((pattern, invert)), Some(algo)) = (d.pattern, d.algo) else {
            return self.err(
                d.col,
                "string: --algo (bm or kmp) and a pattern (--string or --hex-string) must be given, as iptables requires",
            );
        };
        if d.from > d.to {
            return self.err(
                d.col,
                format!(
                    "string: --from {} is after --to {}: the kernel refuses it (EINVAL)",
                    d.from, d.to
                ),
            );
        }
        self.matches.constrain_payload(StringMatch {
            pattern,
            algo,
            from: d.from,
            to: d.to,
            icase: d.icase,
            invert,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::hex_string;

    #[test]
    fn hex_strings_read_as_libxt_string_writes_them() {
        assert_eq!(hex_string("|000161622263|").unwrap(), b"\x00\x01ab\"c");
        assert_eq!(hex_string("a|0d 0a|b").unwrap(), b"a\r\nb");
        assert_eq!(hex_string("x\\|y").unwrap(), b"x|y");
        for bad in ["|0d", "|0g|", "|0|", "a\\"] {
            assert!(hex_string(bad).is_err(), "{bad}");
        }
    }
}
