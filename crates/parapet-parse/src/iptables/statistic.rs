//! `-m statistic` options (libxt_statistic.c), read into a [`Statistic`],
//! with iptables' checks: `--mode` once and required, `--every` at least
//! 1 and with `--packet`, `--packet` below `--every`, `--probability` in
//! `[0, 1]`, `!` only before `--every` or `--probability`.

use super::option_arg::OptionArg;
use super::rule::RuleParser;
use parapet_model::*;

/// The options of `-m statistic`.
pub(super) const STATISTIC_OPTIONS: &[&str] = &["--mode", "--probability", "--every", "--packet"];

impl RuleParser<'_> {
    /// One `-m statistic` option.
    pub(super) fn statistic_option(&mut self, arg: OptionArg<'_>) {
        let (opt, col, negated, v, vcol) = arg.parts();
        let Some(mut d) = self.statistic.take() else {
            return self.err(col, format!("option {opt} needs -m statistic before it"));
        };
        if let Some(c) = negated.filter(|_| matches!(opt, "--mode" | "--packet")) {
            self.statistic = Some(d);
            return self.err(
                c,
                format!("statistic: option \"{opt}\" cannot be inverted ('!' goes before --every or --probability)"),
            );
        }
        let twice = match opt {
            "--mode" => d.nth.is_some(),
            "--probability" => d.threshold.is_some(),
            "--every" => d.every.is_some(),
            _ => d.packet.is_some(),
        };
        let error: Option<(u32, String)> = if twice {
            Some((
                col,
                format!("statistic: option \"{opt}\" can only be used once"),
            ))
        } else {
            match opt {
                "--mode" => match v {
                    "nth" | "random" => {
                        d.nth = Some(v == "nth");
                        None
                    }
                    _ => Some((vcol, format!("statistic: bad mode \"{v}\" (nth or random)"))),
                },
                "--probability" => match v.parse::<f64>().ok().and_then(Statistic::threshold_of) {
                    _ if d.every.is_some() || d.packet.is_some() => Some((col, "statistic: --probability cannot be used with --every or --packet".into())),
                    Some(t) => {
                        d.threshold = Some(t);
                        None
                    }
                    None => Some((vcol, format!("statistic: bad value for option \"--probability\", or out of range (0-1): '{v}'"))),
                },
                _ => match v.parse::<u32>() {
                    _ if d.threshold.is_some() => Some((col, format!("statistic: {opt} cannot be used with --probability"))),
                    Ok(0) if opt == "--every" => Some((vcol, "statistic: bad value for option \"--every\", or out of range (1-4294967295): '0'".into())),
                    Ok(n) => {
                        let at = Some((n, vcol));
                        if opt == "--every" {
                            d.every = at;
                        } else {
                            d.packet = at;
                        }
                        None
                    }
                    Err(_) => Some((vcol, format!("statistic: bad value for option \"{opt}\", or out of range: '{v}'"))),
                },
            }
        };
        if negated.is_some() {
            d.invert = true;
        }
        self.statistic = Some(d);
        if let Some((c, m)) = error {
            self.err(c, m);
        }
    }

    /// The rule's `-m statistic`, once every option is read: iptables'
    /// final checks (`statistic_check`), then the model's [`Statistic`].
    pub(super) fn check_statistic(&mut self) -> Option<Statistic> {
        let d = self.statistic.clone()?;
        let mode = match (d.nth, d.threshold, d.every, d.packet) {
            (None, ..) => {
                self.err(d.col, "-m statistic needs --mode nth|random (iptables: statistic: option \"--mode\" must be specified)");
                return None;
            }
            (Some(false), Some(threshold), None, None) => StatisticMode::Random { threshold },
            (Some(false), ..) => {
                self.err(
                    d.col,
                    "--probability must be specified when using random mode",
                );
                return None;
            }
            (Some(true), _, Some(_), None) => {
                self.err(
                    d.col,
                    "statistic: option \"--every\" also requires \"--packet\"",
                );
                return None;
            }
            (Some(true), _, Some((every, _)), Some((packet, pcol))) => {
                if packet >= every {
                    self.err(pcol, format!("the --packet p must be 0 <= p <= n-1 (here --every {every} --packet {packet})"));
                    return None;
                }
                StatisticMode::Nth { every, packet }
            }
            (Some(true), ..) => {
                self.err(
                    d.col,
                    "--every and --packet must be specified when using nth mode",
                );
                return None;
            }
        };
        Some(Statistic {
            mode,
            invert: d.invert,
        })
    }
}
