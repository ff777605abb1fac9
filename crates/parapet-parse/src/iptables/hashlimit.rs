//! `-m hashlimit`'s options (libxt_hashlimit's spelling, revision 3) and
//! the checks `hashlimit_mt_check` makes when the rule is loaded.

use super::matches::parse_rate;
use super::option_arg::OptionArg;
use super::rule::RuleParser;
use parapet_model::*;

impl RuleParser<'_> {
    pub(super) fn hashlimit_option(&mut self, arg: OptionArg<'_>) {
        let (opt, col, negated, v, vcol) = arg.parts();
        let family = self.family;
        let Some(d) = self.hashlimit.as_mut() else {
            return self.err(col, format!("{opt} needs -m hashlimit before it"));
        };
        let rate_opt = matches!(
            opt,
            "--hashlimit" | "--hashlimit-upto" | "--hashlimit-above"
        );
        if let (Some(c), false) = (negated, rate_opt) {
            return self.err(c, format!("'!' cannot negate {opt}"));
        }
        let full = if family == Family::V4 { 32 } else { 128 };
        let number = |v: &str| -> Result<u32, String> {
            v.parse::<u32>()
                .map_err(|_| format!("expected a number after {opt}, found '{v}'"))
        };
        let h = &mut d.h;
        let result: Result<(), String> = match opt {
            "--hashlimit" | "--hashlimit-upto" | "--hashlimit-above" => {
                if v.to_ascii_lowercase().contains("b/s") {
                    Err(format!(
                        "'{v}': hashlimit's byte mode is not supported yet (parapet limits packets per time unit)"
                    ))
                } else {
                    match parse_rate(v) {
                        Some((r, per)) if r == 0 || r as u64 > HASHLIMIT_SCALE * per.seconds() as u64 => {
                            Err(format!("rate '{v}' is too fast or zero (iptables allows at most 1000000/second)"))
                        }
                        Some((r, per)) => {
                            (h.rate, h.per) = (r, per);
                            // `! --hashlimit-upto` is `--hashlimit-above`
                            h.above = (opt == "--hashlimit-above") != negated.is_some();
                            d.rate = true;
                            Ok(())
                        }
                        None => Err(format!(
                            "expected a rate like 5/min (units: second, minute, hour, day), found '{v}'"
                        )),
                    }
                }
            }
            "--hashlimit-burst" => match number(v) {
                Ok(b) if (1..=HASHLIMIT_MAX_BURST).contains(&b) => {
                    h.burst = b;
                    Ok(())
                }
                Ok(_) => Err(format!(
                    "--hashlimit-burst takes 1 to {HASHLIMIT_MAX_BURST} (a burst in bytes is byte mode, not supported yet)"
                )),
                Err(e) => Err(e),
            },
            "--hashlimit-mode" => {
                let mut mode = 0;
                let mut bad = None;
                for part in v.split(',') {
                    mode |= match part {
                        "srcip" => HASHLIMIT_SRCIP,
                        "srcport" => HASHLIMIT_SRCPORT,
                        "dstip" => HASHLIMIT_DSTIP,
                        "dstport" => HASHLIMIT_DSTPORT,
                        "none" if v == "none" => 0,
                        _ => {
                            bad = Some(part.to_string());
                            0
                        }
                    };
                }
                match bad {
                    Some(p) => Err(format!(
                        "unknown --hashlimit-mode '{p}' (modes: srcip, srcport, dstip, dstport, comma-separated)"
                    )),
                    None => {
                        h.mode = mode;
                        Ok(())
                    }
                }
            }
            "--hashlimit-srcmask" | "--hashlimit-dstmask" => match number(v) {
                Ok(m) if m <= full as u32 => {
                    if opt == "--hashlimit-srcmask" {
                        h.srcmask = m as u8;
                    } else {
                        h.dstmask = m as u8;
                    }
                    Ok(())
                }
                Ok(_) => Err(format!("{opt} takes a prefix length of 0 to {full}")),
                Err(e) => Err(e),
            },
            "--hashlimit-name" => {
                if v.is_empty()
                    || v.len() > 254
                    || v.chars().any(|c| c == '/' || c == '"' || c == '\'' || c.is_whitespace())
                {
                    Err(format!("--hashlimit-name '{v}': a table name has 1 to 254 bytes, no '/', quotes or spaces (it is a file in /proc/net/ipt_hashlimit)"))
                } else {
                    h.name = v.to_string();
                    d.name = true;
                    Ok(())
                }
            }
            "--hashlimit-htable-size" => number(v).map(|n| h.size = n),
            "--hashlimit-htable-max" => number(v).map(|n| h.max = n),
            "--hashlimit-htable-gcinterval" | "--hashlimit-htable-expire" => match number(v) {
                Ok(0) => Err(format!("{opt} must be at least 1 (ms): the kernel refuses 0")),
                Ok(n) if opt == "--hashlimit-htable-expire" => {
                    h.expire = n;
                    d.expire = true;
                    Ok(())
                }
                Ok(n) => {
                    h.gcinterval = n;
                    Ok(())
                }
                Err(e) => Err(e),
            },
            _ => Err(format!(
                "{opt} is not supported yet (hashlimit's rate-match mode measures a rate without limiting it)"
            )),
        };
        if let Err(e) = result {
            let c = if v.is_empty() { col } else { vcol };
            self.err(c, e);
        }
    }

    /// libxt_hashlimit's final check (a rate and a name) and the kernel's
    /// (`burst × avg` must not overflow the credits, `-ERANGE`).
    pub(super) fn check_hashlimit(&mut self) {
        let Some(d) = self.hashlimit.as_mut() else {
            return;
        };
        if !d.expire {
            d.h.expire = d.h.per.seconds() * 1000;
        }
        let (col, rate, name, h) = (d.col, d.rate, d.name, d.h.clone());
        if !rate {
            return self.err(
                col,
                "-m hashlimit needs --hashlimit-upto or --hashlimit-above",
            );
        }
        if !name {
            return self.err(col, "-m hashlimit needs --hashlimit-name");
        }
        let credits = |x: u64| (x as u128) * HASHLIMIT_MAX_CREDIT_FACTOR as u128;
        if credits(h.avg() * h.burst as u64) > u64::MAX as u128 {
            self.err(
                col,
                format!(
                    "-m hashlimit {}/{} with burst {}: rate × burst overflows the kernel's credits (it refuses the rule): use a faster rate or a smaller burst",
                    h.rate,
                    h.per.name(),
                    h.burst
                ),
            );
        }
    }
}

/// The first rule naming a `-m hashlimit` table: `hashlimit_mt_check`
/// creates the table from that rule's settings, and a later rule naming
/// the table shares it whatever it says (`htable_find_get` looks a table up
/// by name and family only). In `hashlimit_mt_common` a later rule's own
/// `--hashlimit-upto`/`--hashlimit-above` (the mode's invert bit) decides
/// how it answers; the rate, burst, key mode, masks and htable options are
/// the table's (its buckets are filled, refilled and keyed from the
/// table's configuration).
#[derive(Clone, Debug)]
pub(super) struct FirstRule {
    /// The rule's settings without upto/above (which is `above`).
    settings: Hashlimit,
    above: bool,
    line: u32,
    table: String,
    chain: String,
    appended: bool,
}

impl FirstRule {
    /// Rule `h` at `line`, in `chain` of iptables table `table`, appended
    /// (`-A`) or inserted (`-I`).
    pub(super) fn new(
        h: &Hashlimit,
        line: u32,
        table: &str,
        chain: &str,
        appended: bool,
    ) -> FirstRule {
        FirstRule {
            settings: Hashlimit {
                above: false,
                ..h.clone()
            },
            above: h.above,
            line,
            table: table.to_string(),
            chain: chain.to_string(),
            appended,
        }
    }

    /// What `later`'s hashlimit does: its own settings when they are the
    /// table's; else the table's settings with its own upto/above, when
    /// this rule is sure to come first in the kernel's table (both
    /// appended to one chain; across chains or with `-I` the order the
    /// kernel checks rules in is libiptc's layout, not the file's), and an
    /// error otherwise.
    pub(super) fn settings_for(&self, later: &FirstRule) -> Result<Hashlimit, String> {
        let above = |s: &Hashlimit, a: bool| Hashlimit {
            above: a,
            ..s.clone()
        };
        let own_above = later.above;
        if later.settings == self.settings {
            return Ok(above(&self.settings, own_above));
        }
        if self.appended && later.appended && self.table == later.table && self.chain == later.chain
        {
            return Ok(above(&self.settings, own_above));
        }
        Err(format!(
            "-m hashlimit table '{}' has other settings at line {}, in another chain or with -I: the kernel configures a table from the first rule naming it (its rate, burst, mode, masks and htable options are every rule's), and which rule is first depends on how iptables lays the chains out; give every rule of a table the same settings",
            self.settings.name, self.line
        ))
    }
}
