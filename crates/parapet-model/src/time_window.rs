//! Time conditions: iptables `-m time` and nft `meta time|hour|day`.
//!
//! A time window is a condition on the clock, not on the packet: like a
//! `limit`, it makes a rule conditional (the rule matches only some of the
//! packets its fields hold for; when the window is closed evaluation goes
//! on with the next rule), but it keeps no state. [`TimeWindow::admits`]
//! is `xt_time.c`'s `time_mt`, step for step, on a wall-clock time in
//! seconds since the epoch (UTC); nft's `meta` keys are lowered to the
//! same window (see `docs/syntax.md`).

use serde::{Deserialize, Serialize};

/// Seconds in a day.
pub const SECONDS_PER_DAY: i64 = 86_400;

/// Every day of the month, bits 1..=31 (`XT_TIME_ALL_MONTHDAYS`).
pub const ALL_MONTHDAYS: u32 = 0xffff_fffe;

/// Every weekday, bits 1 (Monday) ..= 7 (Sunday) (`XT_TIME_ALL_WEEKDAYS`).
pub const ALL_WEEKDAYS: u8 = 0xfe;

/// The latest `--datestop` (`XT_TIME_MAX_DATESTOP`: 2038-01-19 03:14:07).
pub const MAX_DATESTOP: i64 = i32::MAX as i64;

/// Weekday names as iptables writes them, Monday first (bit 1).
pub const WEEKDAY_NAMES: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];

/// A rule's time condition (`struct xt_time_info`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TimeWindow {
    /// First and last second (since the epoch, UTC) the rule matches,
    /// inclusive (`--datestart`, `--datestop`).
    pub date_start: i64,
    pub date_stop: i64,
    /// First and last second of the day, inclusive (`--timestart`,
    /// `--timestop`); start > stop wraps past midnight.
    pub daytime_start: u32,
    pub daytime_stop: u32,
    /// Weekdays, bit 1 = Monday … bit 7 = Sunday.
    pub weekdays: u8,
    /// Days of the month, bits 1..=31.
    pub monthdays: u32,
    /// `--kerneltz`: the day and time are the kernel's local time (its
    /// `sys_tz`), not UTC.
    pub kernel_tz: bool,
    /// `--contiguous`: a window wrapping past midnight belongs to the day
    /// it started on.
    pub contiguous: bool,
}

impl Default for TimeWindow {
    /// Always open: every date, time of day, weekday and month day.
    fn default() -> Self {
        TimeWindow {
            date_start: 0,
            date_stop: MAX_DATESTOP,
            daytime_start: 0,
            daytime_stop: (SECONDS_PER_DAY - 1) as u32,
            weekdays: ALL_WEEKDAYS,
            monthdays: ALL_MONTHDAYS,
            kernel_tz: false,
            contiguous: false,
        }
    }
}

/// Days since 1970-01-01 → (year, month 1..=12, day 1..=31) in the
/// proleptic Gregorian calendar (the kernel's `localtime_3` computes the
/// same day of the month from its own tables).
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// (year, month, day) → days since 1970-01-01.
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (m as i64 + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

impl TimeWindow {
    /// Whether the window is open at `utc_secs` (seconds since the epoch),
    /// on a kernel whose `sys_tz` is `minutes_west` minutes west of UTC
    /// (used with `kernel_tz` only). `xt_time.c`'s `time_mt`.
    pub fn admits(&self, utc_secs: i64, minutes_west: i32) -> bool {
        let mut stamp = utc_secs;
        if self.kernel_tz {
            stamp -= 60 * minutes_west as i64;
        }
        if stamp < self.date_start || stamp > self.date_stop {
            return false;
        }
        let packet_time = stamp.rem_euclid(SECONDS_PER_DAY) as u32;
        if self.daytime_start < self.daytime_stop {
            if packet_time < self.daytime_start || packet_time > self.daytime_stop {
                return false;
            }
        } else {
            if packet_time < self.daytime_start && packet_time > self.daytime_stop {
                return false;
            }
            // After midnight, a contiguous window is the previous day's.
            if self.contiguous && packet_time <= self.daytime_stop {
                stamp -= SECONDS_PER_DAY;
            }
        }
        let days = stamp.div_euclid(SECONDS_PER_DAY);
        // 1970-01-01 was a Thursday (4); Monday = 1 … Sunday = 7.
        let weekday = (days + 3).rem_euclid(7) + 1;
        if self.weekdays & (1 << weekday) == 0 {
            return false;
        }
        if self.monthdays != ALL_MONTHDAYS {
            let (_, _, monthday) = civil_from_days(days);
            if self.monthdays & (1 << monthday) == 0 {
                return false;
            }
        }
        true
    }

    /// The window open in both `self` and `other` (nft's `meta hour` and
    /// `meta day` in one rule). `None` when the two cannot be one window
    /// (both restrict the time of day).
    pub fn and(&self, other: &TimeWindow) -> Option<TimeWindow> {
        let all = TimeWindow::default();
        let day = |w: &TimeWindow| (w.daytime_start, w.daytime_stop, w.contiguous);
        let daytime = match (day(self) == day(&all), day(other) == day(&all)) {
            (true, _) => day(other),
            (_, true) => day(self),
            _ => return None,
        };
        if self.kernel_tz != other.kernel_tz {
            return None;
        }
        Some(TimeWindow {
            date_start: self.date_start.max(other.date_start),
            date_stop: self.date_stop.min(other.date_stop),
            daytime_start: daytime.0,
            daytime_stop: daytime.1,
            weekdays: self.weekdays & other.weekdays,
            monthdays: self.monthdays & other.monthdays,
            kernel_tz: self.kernel_tz,
            contiguous: daytime.2,
        })
    }
}

/// `HH:MM[:SS]` → seconds of the day.
pub fn parse_daytime(s: &str) -> Option<u32> {
    let parts: Vec<&str> = s.split(':').collect();
    if !(2..=3).contains(&parts.len()) {
        return None;
    }
    let num = |p: &str, max: u32| {
        (!p.is_empty() && p.len() <= 2 && p.bytes().all(|b| b.is_ascii_digit()))
            .then(|| p.parse::<u32>().ok())
            .flatten()
            .filter(|v| *v <= max)
    };
    let h = num(parts[0], 23)?;
    let m = num(parts[1], 59)?;
    let sec = match parts.get(2) {
        Some(p) => num(p, 59)?,
        None => 0,
    };
    Some(h * 3600 + m * 60 + sec)
}

/// `YYYY[-MM[-DD[Thh[:mm[:ss]]]]]` (iptables) or `YYYY-MM-DD hh:mm[:ss]`
/// (nft) → seconds since the epoch, read as UTC.
pub fn parse_date(s: &str) -> Option<i64> {
    let (date, time) = match s.split_once(['T', ' ']) {
        Some((d, t)) => (d, Some(t)),
        None => (s, None),
    };
    let parts: Vec<&str> = date.split('-').collect();
    if parts.is_empty()
        || parts.len() > 3
        || parts
            .iter()
            .any(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()))
    {
        return None;
    }
    let y: i64 = parts[0]
        .parse()
        .ok()
        .filter(|y| (1970..=2037).contains(y))?;
    let m: u32 = parts.get(1).map_or(Some(1), |p| p.parse().ok())?;
    let d: u32 = parts.get(2).map_or(Some(1), |p| p.parse().ok())?;
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    let days = days_from_civil(y, m, d);
    if civil_from_days(days) != (y, m, d) {
        return None;
    }
    let secs = match time {
        None => 0,
        Some(t) if !t.contains(':') => t.parse::<u32>().ok().filter(|h| *h <= 23)? * 3600,
        Some(t) => parse_daytime(t)?,
    };
    Some(days * SECONDS_PER_DAY + secs as i64)
}

/// `YYYY-MM-DDThh:mm:ss`, as `iptables-save` writes a date.
pub fn format_date(secs: i64) -> String {
    let (y, m, d) = civil_from_days(secs.div_euclid(SECONDS_PER_DAY));
    let t = secs.rem_euclid(SECONDS_PER_DAY);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}",
        t / 3600,
        t / 60 % 60,
        t % 60
    )
}

/// Seconds of the day as `hh:mm:ss`.
pub fn format_daytime(secs: u32) -> String {
    format!("{:02}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calendar_round_trips_and_weekdays() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(days_from_civil(2000, 2, 29), 11_016);
        for d in [-1000, 0, 59, 11_016, 20_000, 24_000] {
            let (y, m, dd) = civil_from_days(d);
            assert_eq!(days_from_civil(y, m, dd), d);
        }
        // 2022-05-30 was a Monday.
        let mon = parse_date("2022-05-30").unwrap();
        let w = TimeWindow {
            weekdays: 1 << 1,
            ..TimeWindow::default()
        };
        assert!(w.admits(mon + 3600, 0));
        assert!(!w.admits(mon - 1, 0));
        assert!(!w.admits(mon + SECONDS_PER_DAY, 0));
    }

    #[test]
    fn windows_as_xt_time_reads_them() {
        let day = parse_date("2024-03-10").unwrap(); // a Sunday
        let w = TimeWindow {
            daytime_start: 22 * 3600,
            daytime_stop: 2 * 3600,
            weekdays: 1 << 7,
            ..TimeWindow::default()
        };
        // Wraps: Sunday 23:00 and Sunday 01:00 match, Monday 01:00 not.
        assert!(w.admits(day + 23 * 3600, 0));
        assert!(w.admits(day + 3600, 0));
        assert!(!w.admits(day + SECONDS_PER_DAY + 3600, 0));
        // --contiguous: Monday 01:00 is Sunday's night.
        let c = TimeWindow {
            contiguous: true,
            ..w.clone()
        };
        assert!(c.admits(day + SECONDS_PER_DAY + 3600, 0));
        assert!(!c.admits(day + 3600, 0));
        // --kerneltz, a kernel one hour east (minutes_west = -60).
        let k = TimeWindow {
            kernel_tz: true,
            daytime_start: 3600,
            daytime_stop: 7199,
            ..TimeWindow::default()
        };
        assert!(k.admits(day, -60));
        assert!(!k.admits(day, 0));
        // Month days and dates.
        let md = TimeWindow {
            monthdays: 1 << 10,
            ..TimeWindow::default()
        };
        assert!(md.admits(day + 5, 0));
        assert!(!md.admits(day + SECONDS_PER_DAY, 0));
        let dates = TimeWindow {
            date_start: day,
            date_stop: day + 10,
            ..TimeWindow::default()
        };
        assert!(
            dates.admits(day + 10, 0) && !dates.admits(day + 11, 0) && !dates.admits(day - 1, 0)
        );
        assert_eq!(format_date(day + 3661), "2024-03-10T01:01:01");
        assert_eq!(parse_date("2024-03-10T01:01:01"), Some(day + 3661));
        assert_eq!(parse_date("2023-02-29"), None);
    }
}
