//! `-m time` options (libxt_time.c), read into a [`TimeWindow`]. Dates and
//! times are UTC unless `--kerneltz` says the kernel's local time, as
//! iptables documents.

use super::option_arg::OptionArg;
use super::rule::RuleParser;
use parapet_model::*;

/// The options of `-m time`.
pub(super) const TIME_OPTIONS: &[&str] = &[
    "--timestart",
    "--timestop",
    "--weekdays",
    "--monthdays",
    "--datestart",
    "--datestop",
    "--kerneltz",
    "--localtz",
    "--utc",
    "--contiguous",
    "--days",
];

/// `Mon,Tue` or `1,2` (1 = Monday … 7 = Sunday) → weekday bits 1..=7.
fn weekdays(v: &str) -> Option<u8> {
    let mut bits = 0u8;
    for d in v.split(',') {
        let n = match WEEKDAY_NAMES.iter().position(|w| w.eq_ignore_ascii_case(d)) {
            Some(i) => i as u8 + 1,
            None => d.parse::<u8>().ok().filter(|n| (1..=7).contains(n))?,
        };
        bits |= 1 << n;
    }
    Some(bits)
}

/// `1,15,31` → month day bits 1..=31.
fn monthdays(v: &str) -> Option<u32> {
    let mut bits = 0u32;
    for d in v.split(',') {
        let n = d.parse::<u32>().ok().filter(|n| (1..=31).contains(n))?;
        bits |= 1 << n;
    }
    Some(bits)
}

impl RuleParser<'_> {
    /// One `-m time` option.
    pub(super) fn time_option(&mut self, arg: OptionArg<'_>) {
        let (opt, col, negated, v, vcol) = arg.parts();
        let mut w = self.time.take().unwrap_or_default();
        if let Some(c) = negated.filter(|_| !matches!(opt, "--weekdays" | "--monthdays")) {
            return self.err(
                c,
                format!("'!' cannot negate {opt} (only --weekdays and --monthdays)"),
            );
        }
        match opt {
            "--timestart" | "--timestop" => match parse_daytime(v) {
                Some(s) if opt == "--timestart" => w.daytime_start = s,
                Some(s) => w.daytime_stop = s,
                None => return self.err(vcol, format!("expected a time of day hh:mm[:ss] after {opt}, found '{v}'")),
            },
            "--datestart" | "--datestop" => match parse_date(v) {
                Some(s) if opt == "--datestart" => w.date_start = s,
                Some(s) => w.date_stop = s,
                None => return self.err(vcol, format!("expected a date YYYY[-MM[-DD[Thh[:mm[:ss]]]]] (1970 to 2037) after {opt}, found '{v}'")),
            },
            "--weekdays" => match weekdays(v) {
                Some(b) => w.weekdays = if negated.is_some() { !b & ALL_WEEKDAYS } else { b },
                None => return self.err(vcol, format!("expected weekdays like Mon,Tue or 1,2 (1 = Monday … 7 = Sunday) after --weekdays, found '{v}'")),
            },
            "--monthdays" => match monthdays(v) {
                Some(b) => w.monthdays = if negated.is_some() { !b & ALL_MONTHDAYS } else { b },
                None => return self.err(vcol, format!("expected days of the month like 1,15 (1 to 31) after --monthdays, found '{v}'")),
            },
            "--kerneltz" | "--localtz" => w.kernel_tz = true,
            "--utc" => w.kernel_tz = false,
            "--contiguous" => w.contiguous = true,
            // Not an alias: `--days` is the option of the old ipt_time
            // match (patch-o-matic's libipt_time, before iptables 1.4.0 and
            // Linux 2.6.23's xt_time); libxt_time, "based on libipt_time.c",
            // renamed it `--weekdays`, and iptables refuses `--days` since.
            "--days" => return self.err(col, "--days is the option of the old ipt_time match (patch-o-matic, before iptables 1.4.0 / Linux 2.6.23); iptables refuses it today (unknown option \"--days\"), as parapet does: write --weekdays with the same days (Mon,Tue,… or 1-7)"),
            _ => return self.err(col, format!("unknown option '{opt}' of -m time")),
        }
        self.time = Some(w);
    }

    /// The checks libxt_time makes once the rule is read.
    pub(super) fn check_time(&mut self, col: u32) {
        if let Some(w) = &self.time {
            if w.contiguous && w.daytime_start < w.daytime_stop {
                self.err(col, "time: --contiguous only makes sense when --timestop is earlier than --timestart");
            }
        }
    }
}
