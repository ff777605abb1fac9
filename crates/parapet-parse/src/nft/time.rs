//! nft's time keys, `meta time`, `meta hour` and `meta day`, lowered to a
//! [`TimeWindow`] (the window iptables' `-m time` has): `meta time` bounds
//! the date, `meta hour` the time of day, `meta day` the weekdays. Several
//! in one rule are one window (at most one `meta hour`).
//!
//! nft converts a written date or hour from the local time zone of the
//! process that loads the file; parapet reads them as UTC (nft with
//! `TZ=UTC`), and `meta day` with the kernel's `sys_tz` taken as UTC.

use super::lexer::{word_text, Res, Tok};
use super::rule::RuleParser;
use parapet_model::*;

/// nft's day names, Sunday (0) first.
const DAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

/// nft's day number (0 = Sunday) → the window's weekday bit (Monday = 1 …
/// Sunday = 7).
fn day_bit(nft_day: usize) -> u8 {
    1 << if nft_day == 0 { 7 } else { nft_day }
}

fn day(v: &str) -> Option<u8> {
    let n = DAYS
        .iter()
        .position(|d| d.eq_ignore_ascii_case(v) || d[..3].eq_ignore_ascii_case(v))
        .or_else(|| v.parse::<usize>().ok().filter(|n| *n < 7))?;
    Some(day_bit(n))
}

impl RuleParser<'_> {
    /// At `meta time|hour|day`.
    pub(super) fn time_expr(&mut self) -> Res<()> {
        self.i += 1;
        let key = self.next_word("time, hour or day")?;
        let key = key.word().unwrap_or("").to_string();
        let op = match self.peek_word() {
            Some(o @ ("==" | "!=" | "<" | ">" | "<=" | ">=" | "lt" | "gt" | "le" | "ge")) => {
                let o = match o {
                    "lt" => "<",
                    "gt" => ">",
                    "le" => "<=",
                    "ge" => ">=",
                    o => o,
                }
                .to_string();
                self.i += 1;
                Some(o)
            }
            _ => None,
        };
        if op.as_deref() == Some("!=") {
            return self.fail(format!(
                "'meta {key} !=' is not supported: write the window that matches"
            ));
        }
        let mut w = TimeWindow::default();
        if key == "day" {
            if op.as_deref().is_some_and(|o| o != "==") {
                return self.fail("'meta day' takes a day or a set of days ({ \"Monday\", \"Friday\" }), not a comparison");
            }
            let mut bits = 0u8;
            let set = matches!(self.peek().map(|t| &t.tok), Some(Tok::Open));
            if set {
                self.i += 1;
            }
            loop {
                let t = self.next_word("a day (Sunday … Saturday, or 0-6)")?;
                let v = word_text(&t);
                bits |= day(&v).ok_or((
                    t.line,
                    t.col,
                    format!("expected a day (Sunday … Saturday, or 0-6 from Sunday), found '{v}'"),
                ))?;
                if !set {
                    break;
                }
                match self.peek().map(|t| &t.tok) {
                    Some(Tok::Comma) => self.i += 1,
                    Some(Tok::Close) => {
                        self.i += 1;
                        break;
                    }
                    _ => return self.fail("expected ',' or '}' in the set of days"),
                }
            }
            w.weekdays = bits;
        } else {
            // A value, or a range `"A"-"B"` (or unquoted `A-B` for hours).
            let t = self.next_word(if key == "time" {
                "a date \"YYYY-MM-DD hh:mm:ss\""
            } else {
                "an hour \"hh:mm[:ss]\""
            })?;
            let first = word_text(&t);
            let mut text = first.clone();
            if self.peek_word() == Some("-") {
                self.i += 1;
                let b = self.next_word("the end of the range")?;
                text = format!("{first}\u{0}{}", word_text(&b));
            } else if key == "hour" {
                if let Some((a, b)) = first.split_once('-') {
                    text = format!("{a}\u{0}{b}");
                }
            }
            let read = |s: &str| -> Option<i64> {
                match key.as_str() {
                    "time" => parse_date(s),
                    _ => parse_daytime(s).map(i64::from),
                }
            };
            let bad = || {
                (t.line, t.col, match key.as_str() {
                "time" => format!("expected a date \"YYYY-MM-DD hh:mm[:ss]\" (UTC, 1970 to 2037), found '{first}'"),
                _ => format!("expected an hour \"hh:mm[:ss]\" (UTC), found '{first}'"),
            })
            };
            let (lo_max, hi_max) = match key.as_str() {
                "time" => (0, MAX_DATESTOP),
                _ => (0, SECONDS_PER_DAY_I64 - 1),
            };
            let (lo, hi) = match text.split_once('\u{0}') {
                Some((a, b)) => {
                    if op.as_deref().is_some_and(|o| o != "==") {
                        return self.fail("a range after a comparison operator");
                    }
                    (read(a).ok_or_else(bad)?, read(b).ok_or_else(bad)?)
                }
                None => {
                    let v = read(&text).ok_or_else(bad)?;
                    match op.as_deref() {
                        None | Some("==") => (v, v),
                        Some(">=") => (v, hi_max),
                        Some(">") => (v + 1, hi_max),
                        Some("<=") => (lo_max, v),
                        _ => (lo_max, v - 1),
                    }
                }
            };
            if lo > hi {
                return Err((t.line, t.col, format!("'meta {key}': the window ends before it starts (an hour range past midnight is two rules in nft)")));
            }
            if key == "time" {
                (w.date_start, w.date_stop) = (lo, hi);
            } else {
                (w.daytime_start, w.daytime_stop) = (lo as u32, hi as u32);
            }
        }
        let combined = match &self.rule.time {
            None => Some(w),
            Some(old) => old.and(&w),
        };
        match combined {
            Some(c) => {
                self.rule.time = Some(c);
                Ok(())
            }
            None => self.fail("two 'meta hour' windows in one rule are not supported"),
        }
    }
}

const SECONDS_PER_DAY_I64: i64 = 86_400;
